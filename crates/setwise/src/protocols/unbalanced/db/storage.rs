//! The on-disk format: a database is a directory with a `MANIFEST` (parameters, key,
//! items, labels, bins, and each bundle's segment name and hash; its own BLAKE3 hash
//! last) and one `seg-<id>` file of coefficients per bundle. Saving writes new segments
//! first and replaces the manifest atomically by a rename.

use super::super::MAX_BUNDLES_PER_INDEX;
use super::super::labels::{LABEL_NONCE, LabelLayout, MAX_LABEL_BYTES};
use super::super::params::UnbalancedParams;
use super::{Bundle, DbInfo, Labels, SenderDb, oprf_key};
use crate::crypto::oprf::Output;
use crate::crypto::ristretto::SecretScalar;
use crate::error::{Error, Result};
use crate::he::HeContext;
use crate::wire::{Reader, Writer};
use rayon::prelude::*;
use std::path::Path;

/// First bytes of a database manifest.
const MAGIC: [u8; 8] = *b"SETWISDB";
/// Version of the file layout: 3 adds the number of key columns (version 2 databases,
/// which lack it, load with one).
const VERSION: u32 = 3;
/// Longest parameter JSON or preset name accepted from a file.
const MAX_TEXT: usize = 1 << 16;

/// A bundle's coefficients as saved: the segment file `seg-<id>` in the database
/// directory and the BLAKE3 hash of its bytes (kept in the manifest).
#[derive(Debug, Clone, Copy)]
pub(super) struct Segment {
    id: u64,
    hash: [u8; 32],
}

impl Segment {
    fn file_name(id: u64) -> String {
        format!("seg-{id:016x}")
    }
}

/// A writer that hashes what it writes.
struct HashingWriter<W: std::io::Write> {
    out: W,
    hash: blake3::Hasher,
}

impl<W: std::io::Write> HashingWriter<W> {
    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.hash.update(bytes);
        self.out.write_all(bytes)
    }
}

/// The manifest's file name in a database directory.
const MANIFEST: &str = "MANIFEST";
/// Where a save writes the manifest before renaming it.
const MANIFEST_TMP: &str = "MANIFEST.tmp";

/// Writes coefficients as a new segment file (little-endian u32s) in `dir`, synced, and
/// names it by a random id.
fn write_segment(dir: &Path, coeffs: &[u32]) -> std::io::Result<Segment> {
    let bytes: Vec<u8> = coeffs.iter().flat_map(|c| c.to_le_bytes()).collect();
    let mut id = [0u8; 8];
    crate::crypto::rng::fill_os(&mut id);
    let seg = Segment { id: u64::from_le_bytes(id), hash: *blake3::hash(&bytes).as_bytes() };
    let mut f = std::fs::File::create(dir.join(Segment::file_name(seg.id)))?;
    std::io::Write::write_all(&mut f, &bytes)?;
    f.sync_all()?;
    Ok(seg)
}

/// Reads a bundle's segment, checking its length, hash and that every coefficient is
/// below the plain modulus.
pub(super) fn read_segment(dir: &Path, seg: Segment, len: usize, p: &UnbalancedParams) -> Result<Vec<u32>> {
    let file = dir.join(Segment::file_name(seg.id));
    let bytes = std::fs::read(&file).map_err(|e| Error::file(&file, e))?;
    let bad = |why: String| Error::damaged(&file, why);
    if bytes.len() != 4 * len {
        return Err(bad(format!(
            "{} bytes where the manifest implies {}: the file is truncated",
            bytes.len(),
            4 * len
        )));
    }
    if blake3::hash(&bytes).as_bytes() != &seg.hash {
        return Err(bad("checksum mismatch: the file is corrupted".into()));
    }
    let t = p.seal_params.plain_modulus;
    let coeffs: Vec<u32> = bytes.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes"))).collect();
    if coeffs.iter().any(|&c| c as u64 >= t) {
        return Err(bad("a coefficient is not below the plain modulus".into()));
    }
    Ok(coeffs)
}

impl SenderDb {
    /// Saves the database as the directory `path`: a segment file per bundle changed
    /// since it was last saved there (written and synced first), then the manifest —
    /// parameters, key, items, labels, bins and each segment's name and hash — written to
    /// a temporary file and renamed over the old one, which is the atomic step: an
    /// interrupted save leaves the old manifest and the segments it names. Segments no
    /// manifest names are deleted last. An update therefore writes only the bundles it
    /// changed (and the manifest).
    pub fn save(&mut self, path: &Path) -> Result<()> {
        let io = |source| Error::file(path, source);
        if path.is_file() {
            return Err(Error::damaged(path, "is a file; a database is a directory: choose another path"));
        }
        // Saving deletes the segment files its manifest does not name, so it refuses a
        // directory that holds anything but a database.
        if path.is_dir() && !path.join(MANIFEST).exists() && std::fs::read_dir(path).map_err(io)?.next().is_some() {
            return Err(Error::damaged(path, "is a directory that is not a setwise database: choose a new path"));
        }
        std::fs::create_dir_all(path).map_err(io)?;
        let same = self.dir.as_deref().is_some_and(|d| d.canonicalize().ok() == path.canonicalize().ok());
        let src = self.dir.as_deref();
        let segments = self
            .indices
            .par_iter()
            .flatten()
            .map(|b| match (b.saved, same, src) {
                (Some(seg), true, _) => Ok(seg),
                (Some(seg), false, Some(src)) => {
                    let f = Segment::file_name(seg.id);
                    std::fs::copy(src.join(&f), path.join(&f)).map_err(io)?;
                    std::fs::File::open(path.join(&f)).and_then(|f| f.sync_all()).map_err(io)?;
                    Ok(seg)
                }
                _ => {
                    let coeffs = b
                        .coeffs
                        .as_ref()
                        .ok_or_else(|| Error::Params("coefficients were dropped before saving".into()))?;
                    write_segment(path, coeffs).map_err(io)
                }
            })
            .collect::<Result<Vec<Segment>>>()?;
        let tmp = path.join(MANIFEST_TMP);
        let f = std::fs::File::create(&tmp).map_err(io)?;
        self.write_manifest(&segments, &f).map_err(io)?;
        f.sync_all().map_err(io)?;
        std::fs::rename(&tmp, path.join(MANIFEST)).map_err(io)?;
        // The rename is durable once the directory is synced.
        std::fs::File::open(path).and_then(|d| d.sync_all()).map_err(io)?;
        for (b, seg) in self.indices.iter_mut().flatten().zip(&segments) {
            b.saved = Some(*seg);
        }
        self.dir = Some(path.to_path_buf());
        // Segments of replaced bundles, and of an interrupted earlier save.
        let live: std::collections::HashSet<String> = segments.iter().map(|s| Segment::file_name(s.id)).collect();
        for entry in std::fs::read_dir(path).map_err(io)?.flatten() {
            let file = entry.file_name().to_string_lossy().into_owned();
            if file.starts_with("seg-") && !live.contains(&file) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        Ok(())
    }

    /// Writes the manifest, BLAKE3 hash last, streaming the large sections (items,
    /// labels) from memory instead of copying them into one buffer.
    fn write_manifest(&self, segments: &[Segment], out: impl std::io::Write) -> std::io::Result<()> {
        let mut out =
            HashingWriter { out: std::io::BufWriter::with_capacity(1 << 20, out), hash: blake3::Hasher::new() };
        let mut w = Writer::with_capacity(1 << 16);
        w.raw(&MAGIC).u32(VERSION);
        w.bytes(self.params.to_json().as_bytes());
        let mut key = self.oprf.scalar().to_bytes();
        w.raw(&key);
        zeroize::Zeroize::zeroize(&mut key);
        w.bytes(self.info.preset.as_bytes()).u64(self.info.build_ms).u32(self.key_columns as u32);
        w.u32(self.items.len() as u32);
        out.put(&w.into_vec())?;
        out.put(self.items.as_flattened())?;
        let mut w = Writer::with_capacity(1 << 12);
        match &self.labels {
            None => {
                w.u8(0);
                out.put(&w.into_vec())?;
            }
            Some(l) => {
                w.u8(1).u32(l.layout.record_bytes as u32).u32(l.layout.columns.len() as u32);
                l.layout.columns.iter().for_each(|c| {
                    w.bytes(c.as_bytes());
                });
                out.put(&w.into_vec())?;
                out.put(&l.records)?;
            }
        };
        let mut segments = segments.iter();
        for bundles in &self.indices {
            out.put(&(bundles.len() as u32).to_le_bytes())?;
            for b in bundles {
                let seg = segments.next().expect("one segment per bundle");
                let mut w = Writer::with_capacity(40 + b.bins.iter().map(|x| 4 + 4 * x.len()).sum::<usize>());
                w.u64(seg.id).raw(&seg.hash);
                for ids in &b.bins {
                    w.u32(ids.len() as u32);
                    for &id in ids {
                        w.u32(id);
                    }
                }
                out.put(&w.into_vec())?;
            }
        }
        let sum = out.hash.finalize();
        std::io::Write::write_all(&mut out.out, sum.as_bytes())?;
        std::io::Write::flush(&mut out.out)
    }

    /// Coefficients in one bundle's segment.
    pub(super) fn segment_len(&self) -> usize {
        let parts = self.labels.as_ref().map_or(0, |l| l.layout.parts);
        (1 + parts) * (self.params.table_params.max_items_per_bin + 1) * self.params.seal_params.poly_modulus_degree
    }

    /// Loads a database to edit it ([`insert`](Self::insert), [`remove`](Self::remove),
    /// [`save`](Self::save)): the manifest only; an update reads the segments of the
    /// bundles it changes.
    pub fn load_for_update(path: &Path) -> Result<Self> {
        let bad = |why: String| Error::damaged(path, why);
        if path.is_file() {
            let mut head = [0u8; 8];
            let old = std::fs::File::open(path)
                .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
                .is_ok_and(|()| head == MAGIC);
            return Err(bad(if old {
                "a single-file database of format version 1: rebuild it with `setwise db build`".into()
            } else {
                "not a setwise database (a database is a directory with a MANIFEST)".into()
            }));
        }
        let manifest = path.join(MANIFEST);
        let bytes = std::fs::read(&manifest).map_err(|e| Error::file(&manifest, e))?;
        if bytes.len() < MAGIC.len() + 4 + 32 || bytes[..8] != MAGIC {
            return Err(bad("not a setwise database (bad magic in MANIFEST)".into()));
        }
        let (body, sum) = bytes.split_at(bytes.len() - 32);
        if blake3::Hasher::new().update_rayon(body).finalize().as_bytes() != sum {
            return Err(bad("MANIFEST checksum mismatch: the file is truncated or corrupted".into()));
        }
        let mut r = Reader::new(&body[8..]);
        let wire = |e: crate::wire::WireError| Error::damaged(path, e.to_string());
        let version = r.u32("version").map_err(wire)?;
        if !(2..=VERSION).contains(&version) {
            return Err(bad(format!("database format version {version}, this setwise reads versions 2 to {VERSION}")));
        }
        let json = r.str("parameters", MAX_TEXT).map_err(wire)?;
        let params = UnbalancedParams::from_json(json).map_err(|e| bad(e.to_string()))?;
        let key = SecretScalar::from_bytes(r.array("oprf key").map_err(wire)?)
            .ok_or_else(|| bad("invalid OPRF key".into()))?;
        let preset = r.str("preset", MAX_TEXT).map_err(wire)?.to_string();
        let build_ms = r.u64("build time").map_err(wire)?;
        let key_columns = match version {
            2 => 1,
            _ => match r.u32("key columns").map_err(wire)? {
                0 => return Err(bad("zero key columns".into())),
                n => n as usize,
            },
        };
        let n_items = r.u32("item count").map_err(wire)? as usize;
        let items: Vec<Output> = r.records::<32>(n_items, "items").map_err(wire)?.to_vec();
        let labels = match r.u8("labelled").map_err(wire)? {
            0 => None,
            _ => {
                let record_bytes = r.u32("label record size").map_err(wire)? as usize;
                if !(LABEL_NONCE + 2..=LABEL_NONCE + 2 + MAX_LABEL_BYTES).contains(&record_bytes) {
                    return Err(bad(format!("label record size {record_bytes} is out of range")));
                }
                let ncols = r.count("label columns", 256).map_err(wire)?;
                let columns = (0..ncols)
                    .map(|_| r.str("label column", MAX_TEXT).map(str::to_string))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(wire)?;
                let layout = LabelLayout::new(&params, columns, record_bytes - LABEL_NONCE - 2);
                let records = r.take(n_items * record_bytes, "label records").map_err(wire)?.to_vec();
                Some(Labels { layout, records })
            }
        };
        let (bpb, b) = (params.bins_per_bundle(), params.table_params.max_items_per_bin);
        let mut indices = Vec::with_capacity(params.bundle_indices());
        for _ in 0..params.bundle_indices() {
            let count = r.count("bundle count", MAX_BUNDLES_PER_INDEX).map_err(wire)?;
            let mut bundles = Vec::new();
            for _ in 0..count {
                let id = r.u64("segment id").map_err(wire)?;
                let hash = r.array("segment hash").map_err(wire)?;
                let mut bins = Vec::with_capacity(bpb);
                for _ in 0..bpb {
                    let m = r.count("bin size", b).map_err(wire)?;
                    let ids: Vec<u32> =
                        r.records::<4>(m, "bin items").map_err(wire)?.iter().map(|x| u32::from_le_bytes(*x)).collect();
                    if ids.iter().any(|&id| id as usize >= n_items) {
                        return Err(bad("a bin names an item that does not exist".into()));
                    }
                    bins.push(ids);
                }
                let mut bundle = Bundle::empty(0);
                bundle.bins = bins;
                bundle.saved = Some(Segment { id, hash });
                bundle.rebuild = false;
                bundles.push(bundle);
            }
            indices.push(bundles);
        }
        r.finish("database").map_err(wire)?;
        let ctx = HeContext::new(&params.he()).map_err(|e| bad(e.to_string()))?;
        let mut db = Self {
            params,
            ctx,
            oprf: oprf_key(key),
            items,
            indices,
            labels,
            dir: Some(path.to_path_buf()),
            key_columns,
            info: DbInfo { preset, build_ms, ..Default::default() },
        };
        db.refresh_info();
        Ok(db)
    }
}
