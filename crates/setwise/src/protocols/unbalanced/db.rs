//! The sender database: OPRF outputs hashed into bins, cut into bundles, each bundle's
//! matching polynomials kept as plaintexts ready for products. Built once, saved to a
//! versioned and checksummed file, loaded without recomputing anything but the
//! plaintexts' NTT form, shared read-only by concurrent sessions.

use super::params::UnbalancedParams;
use super::{LabelLayout, MAX_BUNDLES_PER_INDEX, MAX_LABEL_BYTES, locate, record_to_felts, seal_label};
use crate::group::SecretScalar;
use crate::hash::dst;
use crate::he::{HeContext, Plaintext};
use crate::oprf::{OprfKey, Output};
use crate::poly::{from_roots, interpolate};
use crate::wire::{Reader, Writer};
use rayon::prelude::*;
use std::borrow::Cow;
use std::path::Path;
use std::time::Instant;

/// First bytes of a database file.
const MAGIC: [u8; 8] = *b"SETWISDB";
/// Version of the file layout.
const VERSION: u32 = 1;
/// Longest parameter JSON or preset name accepted from a file.
const MAX_TEXT: usize = 1 << 16;

/// A database error, naming the file problem.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DbError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a setwise database, or is damaged.
    #[error("{path}: {why}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong.
        why: String,
    },
    /// The parameters are invalid, or the items do not fit them.
    #[error("{0}")]
    Params(String),
}

/// Facts about a database, for `db info` and reports.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct DbInfo {
    /// Distinct sender items.
    pub sender_size: usize,
    /// Preset the parameters came from, if any.
    pub preset: String,
    /// Parameter fingerprint.
    pub fingerprint: String,
    /// Bundles in all.
    pub bundles: usize,
    /// Most bundles at one bundle index.
    pub max_bundles_per_index: usize,
    /// Build time, milliseconds.
    pub build_ms: u64,
    /// Bytes of the loaded plaintexts (the database's memory when served encoded).
    pub plaintext_bytes: usize,
    /// Bytes of the coefficients alone (the database's memory in compact mode).
    pub compact_bytes: usize,
    /// Served in compact mode (plaintexts encoded per query).
    pub compact: bool,
    /// The most receiver items per query.
    pub receiver_max: usize,
    /// Labelled: the longest label in bytes (0 if unlabelled).
    pub label_bytes: usize,
    /// Labelled: label polynomials per bundle slot.
    pub label_parts: usize,
    /// Per-query false-match probability at the receiver maximum, log2.
    pub false_match_log2: f64,
}

/// One bundle: up to `max_items_per_bin` items in each of its bins, and the
/// coefficients of each slot's matching polynomial.
#[derive(Debug)]
struct Bundle {
    /// Item ids per bin.
    bins: Vec<Vec<u32>>,
    /// `(B + 1) × N` coefficients, coefficient-major; dropped once encoded and saved.
    coeffs: Option<Vec<u32>>,
    /// The coefficients as plaintexts at level 0: the matching polynomial's `B + 1`,
    /// then each label part's `B + 1`.
    plaintexts: Vec<Plaintext>,
    /// Labelled: `parts × (B + 1) × N` label-polynomial coefficients, part-major.
    label_coeffs: Option<Vec<u32>>,
    /// Its items changed: coefficients (and plaintexts) must be recomputed.
    dirty: bool,
}

impl Bundle {
    fn empty(bpb: usize) -> Self {
        Self { bins: vec![Vec::new(); bpb], coeffs: None, plaintexts: Vec::new(), label_coeffs: None, dirty: true }
    }
}

/// What an insert or remove changed.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct UpdateStats {
    /// New items.
    pub added: usize,
    /// Existing items given a new label.
    pub relabelled: usize,
    /// Items removed.
    pub removed: usize,
    /// Items asked for that were already there (insert) or absent (remove).
    pub unchanged: usize,
    /// Bundles recomputed.
    pub bundles_touched: usize,
    /// Bundles in the database afterwards.
    pub bundles_total: usize,
}

/// Each item's distinct candidate bins and field elements.
fn layouts(p: &UnbalancedParams, outputs: &[Output]) -> Vec<(Vec<u32>, Vec<u64>)> {
    outputs
        .par_iter()
        .map(|o| {
            let (mut bins, mut felts) = (Vec::new(), Vec::new());
            locate(p, o, &mut bins, &mut felts);
            bins.sort_unstable();
            bins.dedup();
            (bins, felts)
        })
        .collect()
}

/// Puts item `id` into each of its bins: the first bundle at that bundle index whose bin
/// has room and no item with an equal felt at the same position (so label interpolation
/// has distinct points), or a new bundle. Marks the bundles it changes dirty.
fn place(
    p: &UnbalancedParams,
    indices: &mut [Vec<Bundle>],
    id: u32,
    layout: &[(Vec<u32>, Vec<u64>)],
) -> Result<(), DbError> {
    let (bpb, cap, k) = (p.bins_per_bundle(), p.table_params.max_items_per_bin, p.item_params.felts_per_item);
    let felts = &layout[id as usize].1;
    for &bin in &layout[id as usize].0 {
        let (bi, lb) = (bin as usize / bpb, bin as usize % bpb);
        let fits = |b: &Bundle| {
            b.bins[lb].len() < cap && b.bins[lb].iter().all(|&o| (0..k).all(|f| layout[o as usize].1[f] != felts[f]))
        };
        let bundles = &mut indices[bi];
        let at = match bundles.iter().position(fits) {
            Some(at) => at,
            None => {
                if bundles.len() >= MAX_BUNDLES_PER_INDEX {
                    return Err(DbError::Params(format!(
                        "more than {MAX_BUNDLES_PER_INDEX} bundles at one bundle index: the sender set is too large for these parameters"
                    )));
                }
                bundles.push(Bundle::empty(bpb));
                bundles.len() - 1
            }
        };
        bundles[at].bins[lb].push(id);
        bundles[at].dirty = true;
    }
    Ok(())
}

/// Encrypted labels of a database, one record per item.
#[derive(Debug)]
struct Labels {
    layout: LabelLayout,
    records: Vec<Vec<u8>>,
}

/// The preprocessed sender database.
#[derive(Debug)]
pub struct SenderDb {
    params: UnbalancedParams,
    ctx: HeContext,
    oprf: OprfKey,
    items: Vec<Output>,
    /// Bundles per bundle index.
    indices: Vec<Vec<Bundle>>,
    labels: Option<Labels>,
    info: DbInfo,
}

fn oprf_key(scalar: SecretScalar) -> OprfKey {
    OprfKey::from_scalar(scalar, dst::UNBALANCED_OPRF, dst::UNBALANCED_OPRF_OUT)
}

impl SenderDb {
    /// Builds a database from distinct `items` under `params` (`preset` names where
    /// they came from).
    pub fn build<I: AsRef<[u8]> + Sync>(items: &[I], params: UnbalancedParams, preset: &str) -> Result<Self, DbError> {
        Self::build_inner(items, None, params, preset)
    }

    /// Builds a labelled database: `labels[i]` (at most 1 KiB, the serialised label
    /// columns named `columns`) is returned to a receiver that holds `items[i]`.
    pub fn build_labelled<I: AsRef<[u8]> + Sync>(
        items: &[I],
        labels: &[Vec<u8>],
        columns: Vec<String>,
        params: UnbalancedParams,
        preset: &str,
    ) -> Result<Self, DbError> {
        if labels.len() != items.len() {
            return Err(DbError::Params(format!("{} labels for {} items", labels.len(), items.len())));
        }
        if let Some(l) = labels.iter().find(|l| l.len() > MAX_LABEL_BYTES) {
            return Err(DbError::Params(format!("a label has {} bytes; at most {MAX_LABEL_BYTES}", l.len())));
        }
        Self::build_inner(items, Some((labels, columns)), params, preset)
    }

    fn build_inner<I: AsRef<[u8]> + Sync>(
        items: &[I],
        labels: Option<(&[Vec<u8>], Vec<String>)>,
        params: UnbalancedParams,
        preset: &str,
    ) -> Result<Self, DbError> {
        let start = Instant::now();
        params.validate().map_err(DbError::Params)?;
        let ctx = HeContext::new(&params.he()).map_err(|e| DbError::Params(e.to_string()))?;
        let oprf = OprfKey::random(dst::UNBALANCED_OPRF, dst::UNBALANCED_OPRF_OUT);
        let outputs = oprf.evaluate_items(items);
        let labels = labels.map(|(l, columns)| {
            let layout = LabelLayout::new(&params, columns, l.iter().map(Vec::len).max().unwrap_or(0));
            let records = outputs.par_iter().zip(l).map(|(o, label)| seal_label(o, label, &layout)).collect();
            Labels { layout, records }
        });
        let mut db = Self { params, ctx, oprf, items: outputs, indices: Vec::new(), labels, info: DbInfo::default() };
        db.fill_bundles()?;
        db.compute_coefficients();
        db.info.preset = preset.to_string();
        db.info.build_ms = start.elapsed().as_millis() as u64;
        db.refresh_info();
        db.check_false_matches()?;
        Ok(db)
    }

    /// Places every item (see [`place`]).
    fn fill_bundles(&mut self) -> Result<(), DbError> {
        let layout = layouts(&self.params, &self.items);
        let mut indices: Vec<Vec<Bundle>> = (0..self.params.bundle_indices()).map(|_| Vec::new()).collect();
        for id in 0..self.items.len() as u32 {
            place(&self.params, &mut indices, id, &layout)?;
        }
        self.indices = indices;
        Ok(())
    }

    /// Adds `items` (with `labels` in a labelled database); an item already present gets
    /// the new label. Only the bundles that change are recomputed.
    pub fn insert<I: AsRef<[u8]> + Sync>(
        &mut self,
        items: &[I],
        labels: Option<&[Vec<u8>]>,
    ) -> Result<UpdateStats, DbError> {
        match (&self.labels, labels) {
            (Some(_), None) => {
                return Err(DbError::Params("this database is labelled: give the new items' labels".into()));
            }
            (None, Some(_)) => {
                return Err(DbError::Params("this database has no labels: rebuild it with labels".into()));
            }
            (_, Some(l)) if l.len() != items.len() => {
                return Err(DbError::Params(format!("{} labels for {} items", l.len(), items.len())));
            }
            _ => {}
        }
        if let (Some(l), Some(new)) = (&self.labels, labels) {
            let max = l.layout.record_bytes - super::LABEL_NONCE - 2;
            if let Some(x) = new.iter().find(|x| x.len() > max) {
                return Err(DbError::Params(format!(
                    "a label of {} bytes exceeds this database's label size of {max}; rebuild it",
                    x.len()
                )));
            }
        }
        let outputs = self.oprf.evaluate_items(items);
        let mut layout = layouts(&self.params, &self.items);
        let index: std::collections::HashMap<Output, u32> =
            self.items.iter().enumerate().map(|(i, o)| (*o, i as u32)).collect();
        let mut stats = UpdateStats::default();
        let bpb = self.params.bins_per_bundle();
        for (j, o) in outputs.iter().enumerate() {
            if let Some(&id) = index.get(o) {
                match (&mut self.labels, labels) {
                    (Some(l), Some(new)) => {
                        l.records[id as usize] = seal_label(o, &new[j], &l.layout);
                        for &bin in &layout[id as usize].0 {
                            let (bi, lb) = (bin as usize / bpb, bin as usize % bpb);
                            self.indices[bi]
                                .iter_mut()
                                .filter(|b| b.bins[lb].contains(&id))
                                .for_each(|b| b.dirty = true);
                        }
                        stats.relabelled += 1;
                    }
                    _ => stats.unchanged += 1,
                }
                continue;
            }
            let id = self.items.len() as u32;
            self.items.push(*o);
            if let (Some(l), Some(new)) = (&mut self.labels, labels) {
                l.records.push(seal_label(o, &new[j], &l.layout));
            }
            layout.extend(layouts(&self.params, &[*o]));
            place(&self.params, &mut self.indices, id, &layout)?;
            stats.added += 1;
        }
        self.finish_update(stats)
    }

    /// Removes `items`; only the bundles that held them are recomputed (bundles left
    /// empty are dropped).
    pub fn remove<I: AsRef<[u8]> + Sync>(&mut self, items: &[I]) -> Result<UpdateStats, DbError> {
        let outputs = self.oprf.evaluate_items(items);
        let index: std::collections::HashMap<Output, u32> =
            self.items.iter().enumerate().map(|(i, o)| (*o, i as u32)).collect();
        let mut gone = vec![false; self.items.len()];
        let mut stats = UpdateStats::default();
        for o in &outputs {
            match index.get(o) {
                Some(&id) if !gone[id as usize] => {
                    gone[id as usize] = true;
                    stats.removed += 1;
                }
                _ => stats.unchanged += 1,
            }
        }
        // Ids stay dense: item `i` becomes `remap[i]`.
        let mut remap = vec![u32::MAX; self.items.len()];
        let mut next = 0u32;
        for (i, g) in gone.iter().enumerate() {
            if !g {
                remap[i] = next;
                next += 1;
            }
        }
        for bundles in &mut self.indices {
            for b in bundles.iter_mut() {
                for bin in &mut b.bins {
                    let before = bin.len();
                    bin.retain(|&id| !gone[id as usize]);
                    b.dirty |= bin.len() != before;
                    bin.iter_mut().for_each(|id| *id = remap[*id as usize]);
                }
            }
            bundles.retain(|b| b.bins.iter().any(|bin| !bin.is_empty()));
        }
        let mut keep = gone.iter().map(|g| !g);
        self.items.retain(|_| keep.next().expect("one flag per item"));
        if let Some(l) = &mut self.labels {
            let mut keep = gone.iter().map(|g| !g);
            l.records.retain(|_| keep.next().expect("one flag per record"));
        }
        self.finish_update(stats)
    }

    fn finish_update(&mut self, mut stats: UpdateStats) -> Result<UpdateStats, DbError> {
        stats.bundles_touched = self.indices.iter().flatten().filter(|b| b.dirty).count();
        let serving = self.indices.iter().flatten().any(|b| !b.plaintexts.is_empty());
        self.compute_coefficients();
        if serving {
            self.encode()?;
        }
        self.refresh_info();
        self.check_false_matches()?;
        stats.bundles_total = self.info.bundles;
        Ok(stats)
    }

    /// Interpolates each bundle's slot polynomials ∏(x − y_f), and for a labelled
    /// database the label polynomials through (y_f, label felt) (in parallel).
    fn compute_coefficients(&mut self) {
        let p = &self.params;
        let (n, k, b, t) = (
            p.seal_params.poly_modulus_degree,
            p.item_params.felts_per_item,
            p.table_params.max_items_per_bin,
            p.seal_params.plain_modulus,
        );
        let (items, labels) = (&self.items, &self.labels);
        let fb = p.felt_bits();
        self.indices.par_iter_mut().flatten().filter(|b| b.dirty).for_each(|bundle| {
            bundle.dirty = false;
            bundle.plaintexts.clear();
            let mut coeffs = vec![0u32; (b + 1) * n];
            let parts = labels.as_ref().map_or(0, |l| l.layout.parts);
            let mut label_coeffs = vec![0u32; parts * (b + 1) * n];
            let (mut bins_buf, mut felts) = (Vec::new(), Vec::new());
            let mut roots: Vec<Vec<u64>> = vec![Vec::with_capacity(b); k];
            // values[f][part][j]: felt f of part `part` of the label of the bin's j-th item.
            let mut values: Vec<Vec<Vec<u64>>> = vec![vec![Vec::with_capacity(b); parts]; k];
            for (lb, ids) in bundle.bins.iter().enumerate() {
                roots.iter_mut().for_each(Vec::clear);
                values.iter_mut().flatten().for_each(Vec::clear);
                for &id in ids {
                    locate(p, &items[id as usize], &mut bins_buf, &mut felts);
                    for f in 0..k {
                        roots[f].push(felts[f]);
                    }
                    if let Some(l) = labels {
                        let lf = record_to_felts(&l.records[id as usize], parts * k, fb);
                        for (part, chunk) in lf.chunks(k).enumerate() {
                            for f in 0..k {
                                values[f][part].push(chunk[f]);
                            }
                        }
                    }
                }
                for (f, r) in roots.iter().enumerate() {
                    let slot = lb * k + f;
                    for (i, c) in from_roots(r, t).into_iter().enumerate() {
                        coeffs[i * n + slot] = c as u32;
                    }
                    if parts > 0 {
                        let ys: Vec<&[u64]> = values[f].iter().map(Vec::as_slice).collect();
                        // Distinct points: a bundle bin never holds two equal felts (fill_bundles).
                        let polys = interpolate(r, &ys, t).expect("distinct felts per bundle bin");
                        for (part, poly) in polys.iter().enumerate() {
                            for (i, &c) in poly.iter().enumerate() {
                                label_coeffs[(part * (b + 1) + i) * n + slot] = c as u32;
                            }
                        }
                    }
                }
            }
            bundle.coeffs = Some(coeffs);
            bundle.label_coeffs = (parts > 0).then_some(label_coeffs);
        });
    }

    /// Encodes every bundle's coefficients as plaintexts at level 0 (their NTT form is
    /// what makes the per-query products cheap).
    fn encode(&mut self) -> Result<(), DbError> {
        let (n, ctx) = (self.params.seal_params.poly_modulus_degree, &self.ctx);
        self.indices.par_iter_mut().flatten().filter(|b| b.plaintexts.is_empty()).try_for_each(|bundle| {
            let coeffs = bundle.coeffs.as_ref().expect("coefficients before encoding");
            let encode = |coeffs: &[u32]| {
                coeffs
                    .chunks(n)
                    .map(|c| ctx.encode(&c.iter().map(|&v| v as u64).collect::<Vec<_>>(), 0))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| DbError::Params(e.to_string()))
            };
            bundle.plaintexts = encode(coeffs)?;
            if let Some(lc) = &bundle.label_coeffs {
                bundle.plaintexts.extend(encode(lc)?);
            }
            Ok(())
        })
    }

    /// The false-match bound depends on how many bundles the items fill, so it is checked
    /// on the built database, not only on the parameters.
    fn check_false_matches(&self) -> Result<(), DbError> {
        let fm = self.info.false_match_log2;
        if fm > super::params::MAX_FALSE_MATCH_LOG2 {
            return Err(DbError::Params(format!(
                "with {} bundles at a bundle index, a query of {} items would falsely match with probability 2^{fm:.1} (> 2^-40): use a smaller max_items_per_bin or more felts_per_item",
                self.info.max_bundles_per_index, self.info.receiver_max
            )));
        }
        Ok(())
    }

    fn refresh_info(&mut self) {
        // An `fhe` plaintext keeps its N slot values and its NTT form over L moduli.
        let n = self.params.seal_params.poly_modulus_degree;
        let per_pt = (self.params.seal_params.coeff_modulus_bits.len() + 1) * n * 8;
        let bundles: usize = self.indices.iter().map(Vec::len).sum();
        let max_bpi = self.indices.iter().map(Vec::len).max().unwrap_or(0);
        self.info.sender_size = self.items.len();
        self.info.fingerprint = self.params.fingerprint();
        self.info.bundles = bundles;
        self.info.max_bundles_per_index = max_bpi;
        let parts = self.labels.as_ref().map_or(0, |l| l.layout.parts);
        let polys = bundles * (1 + parts) * (self.params.table_params.max_items_per_bin + 1);
        self.info.plaintext_bytes = polys * per_pt;
        self.info.compact_bytes = polys * n * 4;
        self.info.label_parts = parts;
        self.info.label_bytes = self.labels.as_ref().map_or(0, |l| l.layout.record_bytes - super::LABEL_NONCE - 2);
        self.info.receiver_max = self.params.receiver_max();
        self.info.false_match_log2 = self.params.false_match_log2(self.info.receiver_max, max_bpi);
    }

    /// The parameters.
    pub fn params(&self) -> &UnbalancedParams {
        &self.params
    }

    /// Facts for `db info`.
    pub fn info(&self) -> &DbInfo {
        &self.info
    }

    pub(crate) fn context(&self) -> &HeContext {
        &self.ctx
    }

    pub(crate) fn oprf(&self) -> &OprfKey {
        &self.oprf
    }

    /// Number of bundles at each bundle index.
    pub(crate) fn bundle_counts(&self) -> Vec<usize> {
        self.indices.iter().map(Vec::len).collect()
    }

    /// The label layout, if the database is labelled.
    pub fn label_layout(&self) -> Option<&LabelLayout> {
        self.labels.as_ref().map(|l| &l.layout)
    }

    /// The plaintexts of bundle `b` at bundle index `bi`: the matching polynomial's
    /// `B + 1`, then each label part's `B + 1`. Encoded now in compact mode.
    pub(crate) fn bundle_plaintexts(&self, bi: usize, b: usize) -> Result<Cow<'_, [Plaintext]>, crate::he::HeError> {
        let bundle = &self.indices[bi][b];
        if !bundle.plaintexts.is_empty() {
            return Ok(Cow::Borrowed(&bundle.plaintexts));
        }
        let n = self.params.seal_params.poly_modulus_degree;
        let all = bundle.coeffs.iter().chain(bundle.label_coeffs.iter()).flat_map(|c| c.chunks(n));
        let pts = all
            .map(|c| self.ctx.encode(&c.iter().map(|&v| v as u64).collect::<Vec<_>>(), 0))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Cow::Owned(pts))
    }

    /// Writes the database to `path` atomically (a temporary file, then rename).
    pub fn save(&self, path: &Path) -> Result<(), DbError> {
        let io = |source| DbError::Io { path: path.display().to_string(), source };
        // The exact size, so a 400 MB database is written without reallocating.
        let coeff_bytes: usize = self
            .indices
            .iter()
            .flatten()
            .map(|b| 4 * (b.coeffs.as_ref().map_or(0, Vec::len) + b.label_coeffs.as_ref().map_or(0, Vec::len)))
            .sum();
        let bin_bytes: usize =
            self.indices.iter().flatten().map(|b| b.bins.iter().map(|x| 4 + 4 * x.len()).sum::<usize>()).sum();
        let label_bytes = self.labels.as_ref().map_or(0, |l| l.records.len() * l.layout.record_bytes);
        let mut w = Writer::with_capacity((1 << 16) + 32 * self.items.len() + coeff_bytes + bin_bytes + label_bytes);
        w.raw(&MAGIC).u32(VERSION);
        w.bytes(self.params.to_json().as_bytes());
        let mut key = self.oprf.scalar().to_bytes();
        w.raw(&key);
        zeroize::Zeroize::zeroize(&mut key);
        w.bytes(self.info.preset.as_bytes()).u64(self.info.build_ms);
        w.u32(self.items.len() as u32);
        for o in &self.items {
            w.raw(o);
        }
        match &self.labels {
            None => w.u8(0),
            Some(l) => {
                w.u8(1).u32(l.layout.record_bytes as u32).u32(l.layout.columns.len() as u32);
                l.layout.columns.iter().for_each(|c| {
                    w.bytes(c.as_bytes());
                });
                l.records.iter().for_each(|r| {
                    w.raw(r);
                });
                &mut w
            }
        };
        for bundles in &self.indices {
            w.u32(bundles.len() as u32);
            for b in bundles {
                for ids in &b.bins {
                    w.u32(ids.len() as u32);
                    for &id in ids {
                        w.u32(id);
                    }
                }
                let coeffs = b
                    .coeffs
                    .as_ref()
                    .ok_or_else(|| DbError::Params("coefficients were dropped before saving".into()))?;
                for &c in coeffs.iter().chain(b.label_coeffs.iter().flatten()) {
                    w.u32(c);
                }
            }
        }
        let mut body = w.into_vec();
        let sum = blake3::Hasher::new().update_rayon(&body).finalize();
        body.extend_from_slice(sum.as_bytes());
        let tmp = path.with_extension("db.tmp");
        std::fs::write(&tmp, &body).map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }

    /// Drops the coefficient copies once the database is saved (memory then is the
    /// plaintexts').
    pub fn drop_coefficients(&mut self) {
        self.indices.iter_mut().flatten().for_each(|b| {
            b.coeffs = None;
            b.label_coeffs = None;
        });
    }

    /// Loads a database file to serve it, refusing a truncated, corrupted or foreign
    /// one: the plaintexts are encoded and the coefficient copies dropped.
    pub fn load(path: &Path) -> Result<Self, DbError> {
        let mut db = Self::load_for_update(path)?;
        db.prepare()?;
        Ok(db)
    }

    /// Makes a built or edited database ready to serve fast: encodes the plaintexts and
    /// drops the coefficient copies (it can no longer be saved). Without it, each query
    /// encodes the plaintexts it uses, as in compact mode.
    pub fn prepare(&mut self) -> Result<(), DbError> {
        self.encode()?;
        self.drop_coefficients();
        self.refresh_info();
        Ok(())
    }

    /// Loads a database file to serve it in compact mode: only the coefficients are kept
    /// (4 bytes a slot instead of the plaintexts' (L+1)·8), and each query encodes the
    /// plaintexts it uses.
    pub fn load_compact(path: &Path) -> Result<Self, DbError> {
        let mut db = Self::load_for_update(path)?;
        db.info.compact = true;
        Ok(db)
    }

    /// Loads a database file to edit it ([`insert`](Self::insert),
    /// [`remove`](Self::remove), [`save`](Self::save)): coefficients kept, nothing encoded.
    pub fn load_for_update(path: &Path) -> Result<Self, DbError> {
        let name = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| DbError::Io { path: name.clone(), source })?;
        let bad = |why: String| DbError::Invalid { path: name.clone(), why };
        if bytes.len() < MAGIC.len() + 4 + 32 || bytes[..8] != MAGIC {
            return Err(bad("not a setwise database (bad magic)".into()));
        }
        let (body, sum) = bytes.split_at(bytes.len() - 32);
        if blake3::Hasher::new().update_rayon(body).finalize().as_bytes() != sum {
            return Err(bad("checksum mismatch: the file is truncated or corrupted".into()));
        }
        let mut r = Reader::new(&body[8..]);
        let wire = |e: crate::wire::WireError| DbError::Invalid { path: name.clone(), why: e.to_string() };
        let version = r.u32("version").map_err(wire)?;
        if version != VERSION {
            return Err(bad(format!("database format version {version}, this setwise reads version {VERSION}")));
        }
        let json = r.str("parameters", MAX_TEXT).map_err(wire)?;
        let params = UnbalancedParams::from_json(json).map_err(&bad)?;
        let key = SecretScalar::from_bytes(r.array("oprf key").map_err(wire)?)
            .ok_or_else(|| bad("invalid OPRF key".into()))?;
        let preset = r.str("preset", MAX_TEXT).map_err(wire)?.to_string();
        let build_ms = r.u64("build time").map_err(wire)?;
        let n_items = r.u32("item count").map_err(wire)? as usize;
        let items: Vec<Output> = r.records::<32>(n_items, "items").map_err(wire)?.to_vec();
        let labels = match r.u8("labelled").map_err(wire)? {
            0 => None,
            _ => {
                let record_bytes = r.u32("label record size").map_err(wire)? as usize;
                if !(super::LABEL_NONCE + 2..=super::LABEL_NONCE + 2 + MAX_LABEL_BYTES).contains(&record_bytes) {
                    return Err(bad(format!("label record size {record_bytes} is out of range")));
                }
                let ncols = r.count("label columns", 256).map_err(wire)?;
                let columns = (0..ncols)
                    .map(|_| r.str("label column", MAX_TEXT).map(str::to_string))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(wire)?;
                let layout = LabelLayout::new(&params, columns, record_bytes - super::LABEL_NONCE - 2);
                let records = (0..n_items)
                    .map(|_| r.take(record_bytes, "label records").map(<[u8]>::to_vec))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(wire)?;
                Some(Labels { layout, records })
            }
        };
        let parts = labels.as_ref().map_or(0, |l| l.layout.parts);
        let (n, bpb, b) =
            (params.seal_params.poly_modulus_degree, params.bins_per_bundle(), params.table_params.max_items_per_bin);
        let t = params.seal_params.plain_modulus;
        let mut indices = Vec::with_capacity(params.bundle_indices());
        for _ in 0..params.bundle_indices() {
            let count = r.count("bundle count", MAX_BUNDLES_PER_INDEX).map_err(wire)?;
            let mut bundles = Vec::new();
            for _ in 0..count {
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
                let mut read_coeffs = |count: usize| -> Result<Vec<u32>, DbError> {
                    let c: Vec<u32> = r
                        .records::<4>(count, "coefficients")
                        .map_err(wire)?
                        .iter()
                        .map(|x| u32::from_le_bytes(*x))
                        .collect();
                    if c.iter().any(|&c| c as u64 >= t) {
                        return Err(bad("a coefficient is not below the plain modulus".into()));
                    }
                    Ok(c)
                };
                let mut bundle = Bundle::empty(0);
                bundle.coeffs = Some(read_coeffs((b + 1) * n)?);
                bundle.label_coeffs = if parts > 0 { Some(read_coeffs(parts * (b + 1) * n)?) } else { None };
                bundle.bins = bins;
                bundle.dirty = false;
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
            info: DbInfo { preset, build_ms, ..Default::default() },
        };
        db.refresh_info();
        Ok(db)
    }
}
