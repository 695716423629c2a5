//! Serving a database: the coefficients encoded as plaintexts once, at the level the
//! products are computed at
//! ([`UnbalancedParams::eval_level`](super::UnbalancedParams::eval_level): their NTT
//! form over that level's moduli makes the per-query products cheap), and held in
//! memory as far as it allows, the rest read per query from the encoded copy on disk
//! ([`rows`](super::rows)); or, in compact mode, kept as they are and encoded per query
//! (4 bytes a slot instead of 8 a modulus at that level).

use super::SenderDb;
use super::rows::{Found, RowsFile, Shape, remove_others};
use super::storage::read_segment;
use crate::crypto::dst::{self, Domain};
use crate::error::{Error, Result};
use crate::he::{HeContext, HeError, PlainRows, Plains};
use rayon::prelude::*;
use std::path::Path;

/// A fingerprint of how this build encodes plaintexts at `level` for `ctx`: the
/// encoding of a fixed probe, hashed. An encoded copy written by another encoding (a
/// change of slot layout or NTT) has another, and is not served.
fn encoding_fingerprint(ctx: &HeContext, level: usize) -> Result<[u8; 32]> {
    let t = ctx.plain_modulus();
    let probe: Vec<u64> = (0..ctx.slots() as u64).map(|i| (i * 0x9e37_79b9 + 1) % t).collect();
    let rows = ctx.encode_rows(&probe, level)?;
    let mut h = Domain::fixed(dst::FINGERPRINT_UNBALANCED_ENCODING).hasher();
    rows.words().iter().for_each(|w| {
        h.update(&w.to_le_bytes());
    });
    Ok(*h.finalize().as_bytes())
}

/// Encodes coefficient rows of N as plaintexts at `level`.
pub(super) fn encode_coefficients(ctx: &HeContext, level: usize, coeffs: &[u32]) -> Result<PlainRows, HeError> {
    ctx.encode_rows(coeffs, level)
}

/// A bundle whose coefficients are only in its segment (a database
/// [`build_into`](SenderDb::build_into) wrote, or one opened to update) cannot be served
/// or encoded from memory.
fn saved_only() -> Error {
    Error::usage("database", "its bundles are in its directory only: load it to serve it (SenderDb::load)")
}

impl SenderDb {
    /// Encodes the coefficients of every bundle whose plaintexts are neither in memory
    /// nor in the encoded copy on disk, at the evaluation level (their NTT form is what
    /// makes the per-query products cheap).
    pub(super) fn encode(&mut self) -> Result<()> {
        let (ctx, level) = (&self.ctx, self.level);
        let unencoded = |b: &&mut super::Bundle| b.plaintexts.is_empty() && b.on_disk.is_none();
        self.indices.par_iter_mut().flatten().filter(unencoded).try_for_each(|bundle| {
            let coeffs = bundle.coeffs.as_ref().ok_or_else(saved_only)?;
            bundle.plaintexts =
                encode_coefficients(ctx, level, coeffs).map_err(|e| Error::params("he_params", e.to_string()))?;
            Ok(())
        })
    }

    /// Words of one bundle's plaintexts at the evaluation level.
    fn bundle_words(&self) -> usize {
        self.segment_len() * self.params.moduli_at(self.level)
    }

    /// Bytes of one bundle's plaintexts at the evaluation level.
    pub(super) fn bundle_bytes(&self) -> usize {
        8 * self.bundle_words()
    }

    /// Loads the saved database in `dir` (whose manifest has the hash `manifest`) to
    /// serve it encoded, holding at most `budget` bytes of plaintexts in memory (`None`:
    /// all of them). Bundles beyond it are served from the encoded copy on disk, written
    /// now unless a valid one is there; a copy that is there is used either way, as
    /// reading it is faster than encoding, and one that does not check is replaced.
    /// Copies of other manifests, and what crashed writes left, are deleted.
    pub(super) fn load_encoded(&mut self, dir: &Path, manifest: [u8; 32], budget: Option<usize>) -> Result<()> {
        let bundles: usize = self.indices.iter().map(Vec::len).sum();
        let words = self.bundle_words();
        let resident = budget.map_or(bundles, |b| (b / (8 * words).max(1)).min(bundles));
        let level = self.level;
        let encoding = encoding_fingerprint(&self.ctx, level)?;
        let shape = Shape { manifest, encoding, level, bundles, words };
        remove_others(dir, &shape.file_name());
        let (len, p, ctx) = (self.segment_len(), &self.params, &self.ctx);
        let segments: Vec<_> =
            self.indices.iter().flatten().map(|b| b.saved.expect("every loaded bundle is saved")).collect();
        let encode = |i: usize| Ok(encode_coefficients(ctx, level, &read_segment(dir, segments[i], len, p)?)?);
        let keep = |i: usize| i < resident;
        let mut note = String::new();
        let found = match RowsFile::open(dir, shape, ctx, keep)? {
            Found::Invalid(why) => {
                // Replaced by the rename of a new copy, or deleted if none is needed
                // (best effort: another load may have done either already).
                note = format!("a copy that did not check ({why})");
                Found::Absent
            }
            found => found,
        };
        let (copy, kept) = match found {
            Found::Valid(copy, kept) => {
                note = "reused".into();
                (Some(copy), kept)
            }
            _ if resident == bundles => {
                if !note.is_empty() {
                    let _ = std::fs::remove_file(dir.join(shape.file_name()));
                    note = format!("deleted {note}: everything fits in memory");
                }
                (None, (0..bundles).into_par_iter().map(|i| encode(i).map(Some)).collect::<Result<_>>()?)
            }
            _ => {
                let (copy, kept) = RowsFile::write(dir, shape, encode, keep)?;
                note = if note.is_empty() { "written".into() } else { format!("written, replacing {note}") };
                (Some(copy), kept)
            }
        };
        for (i, (bundle, plain)) in self.indices.iter_mut().flatten().zip(kept).enumerate() {
            match plain {
                Some(plain) => bundle.plaintexts = plain,
                None => bundle.on_disk = Some(i),
            }
        }
        self.info.encoded_copy =
            if note.is_empty() { String::new() } else { format!("{} ({note})", shape.file_name()) };
        self.rows = copy.filter(|_| resident < bundles);
        Ok(())
    }

    /// Runs `f` on the plaintexts of bundle `b` at bundle index `bi`: the matching
    /// polynomial's `B + 1`, then each label part's `B + 1`. Read from the encoded copy
    /// on disk (into a buffer the thread reuses), or encoded now in compact mode, when
    /// not held in memory.
    pub(crate) fn with_bundle_plaintexts<R>(&self, bi: usize, b: usize, f: impl FnOnce(Plains<'_>) -> R) -> Result<R> {
        let bundle = &self.indices[bi][b];
        if !bundle.plaintexts.is_empty() {
            return Ok(f(bundle.plaintexts.all()));
        }
        if let (Some(copy), Some(i)) = (&self.rows, bundle.on_disk) {
            return copy.with_bundle(&self.ctx, i, f);
        }
        let coeffs = bundle.coeffs.as_deref().ok_or_else(saved_only)?;
        Ok(f(encode_coefficients(&self.ctx, self.level, coeffs)?.all()))
    }

    /// Makes a built or edited database ready to serve fast: encodes the plaintexts and
    /// drops the coefficient copies (it can then be saved only where it was saved
    /// before). Without it, each query encodes the plaintexts it uses, as in compact mode.
    pub fn prepare(&mut self) -> Result<()> {
        self.encode()?;
        self.drop_coefficients();
        self.refresh_info();
        Ok(())
    }
}
