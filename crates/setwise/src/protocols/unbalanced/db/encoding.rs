//! Serving a database: the coefficients encoded as plaintexts at level 0 once (their NTT
//! form makes the per-query products cheap), or kept as they are in compact mode and
//! encoded per query (4 bytes a slot instead of (L+1)·8).

use super::SenderDb;
use super::storage::read_segment;
use crate::error::{Error, Result};
use crate::he::{HeContext, HeError, Plaintext};
use rayon::prelude::*;
use std::borrow::Cow;
use std::path::Path;

/// Encodes coefficient rows of `n` as plaintexts at level 0.
pub(super) fn encode_coefficients(ctx: &HeContext, n: usize, coeffs: &[u32]) -> Result<Vec<Plaintext>, HeError> {
    let mut row = vec![0u64; n];
    coeffs
        .chunks(n)
        .map(|c| {
            row.iter_mut().zip(c).for_each(|(r, &v)| *r = v as u64);
            ctx.encode(&row, 0)
        })
        .collect()
}

impl SenderDb {
    /// Encodes every bundle's coefficients as plaintexts at level 0 (their NTT form is
    /// what makes the per-query products cheap).
    pub(super) fn encode(&mut self) -> Result<()> {
        let (n, ctx) = (self.params.seal_params.poly_modulus_degree, &self.ctx);
        self.indices.par_iter_mut().flatten().filter(|b| b.plaintexts.is_empty()).try_for_each(|bundle| {
            let coeffs = bundle.coeffs.as_ref().expect("coefficients before encoding");
            bundle.plaintexts = encode_coefficients(ctx, n, coeffs).map_err(|e| Error::Params(e.to_string()))?;
            Ok(())
        })
    }

    /// The plaintexts of bundle `b` at bundle index `bi`: the matching polynomial's
    /// `B + 1`, then each label part's `B + 1`. Encoded now in compact mode.
    pub(crate) fn bundle_plaintexts(&self, bi: usize, b: usize) -> Result<Cow<'_, [Plaintext]>, HeError> {
        let bundle = &self.indices[bi][b];
        if !bundle.plaintexts.is_empty() {
            return Ok(Cow::Borrowed(&bundle.plaintexts));
        }
        let n = self.params.seal_params.poly_modulus_degree;
        Ok(Cow::Owned(encode_coefficients(&self.ctx, n, bundle.coeffs.as_deref().unwrap_or_default())?))
    }

    /// Loads a database to serve it, refusing a truncated, corrupted or foreign one: each
    /// bundle's segment is read, checked and encoded in parallel, and its coefficients
    /// dropped (the loaded database costs what its plaintexts cost).
    pub fn load(path: &Path) -> Result<Self> {
        let mut db = Self::load_for_update(path)?;
        let (p, ctx, n, len) = (&db.params, &db.ctx, db.params.seal_params.poly_modulus_degree, db.segment_len());
        db.indices.par_iter_mut().flatten().try_for_each(|b| {
            let seg = b.saved.expect("a loaded bundle is saved");
            let coeffs = read_segment(path, seg, len, p)?;
            b.plaintexts = encode_coefficients(ctx, n, &coeffs).map_err(|e| Error::Params(e.to_string()))?;
            Ok::<_, Error>(())
        })?;
        db.refresh_info();
        Ok(db)
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

    /// Loads a database to serve it in compact mode: only the coefficients are kept
    /// (4 bytes a slot instead of the plaintexts' (L+1)·8), and each query encodes the
    /// plaintexts it uses.
    pub fn load_compact(path: &Path) -> Result<Self> {
        let mut db = Self::load_for_update(path)?;
        let (p, len) = (&db.params, db.segment_len());
        db.indices.par_iter_mut().flatten().try_for_each(|b| {
            b.coeffs = Some(read_segment(path, b.saved.expect("a loaded bundle is saved"), len, p)?);
            Ok::<_, Error>(())
        })?;
        db.info.compact = true;
        Ok(db)
    }
}
