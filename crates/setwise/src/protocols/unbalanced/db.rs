//! The sender database: OPRF outputs hashed into bins, cut into bundles, each bundle's
//! matching (and label) polynomials kept as plaintexts ready for products. Built once,
//! saved as a directory (a checksummed manifest and one hashed segment file per bundle),
//! loaded without recomputing anything but the plaintexts' NTT form, shared read-only by
//! concurrent sessions. Inserts and removes edit only the bundles they change, point by
//! point, and write only those segments and the manifest (docs/protocols/unbalanced.md).

use super::params::UnbalancedParams;
use super::{LabelLayout, MAX_BUNDLES_PER_INDEX, MAX_LABEL_BYTES, locate, record_to_felts, seal_label};
use crate::group::SecretScalar;
use crate::hash::dst;
use crate::he::{HeContext, Plaintext};
use crate::oprf::{OprfKey, Output};
use crate::poly::{add_point, from_roots, interpolate, remove_point};
use crate::wire::{Reader, Writer};
use rayon::prelude::*;
use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// First bytes of a database manifest.
const MAGIC: [u8; 8] = *b"SETWISDB";
/// Version of the file layout.
const VERSION: u32 = 2;
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

/// A bundle's coefficients as saved: the segment file `seg-<id>` in the database
/// directory and the BLAKE3 hash of its bytes (kept in the manifest).
#[derive(Debug, Clone, Copy)]
struct Segment {
    id: u64,
    hash: [u8; 32],
}

impl Segment {
    fn file_name(id: u64) -> String {
        format!("seg-{id:016x}")
    }
}

/// One change to one bin of a bundle whose coefficients are known, applied in
/// O(B) per polynomial ([`add_point`], [`remove_point`]) instead of re-interpolating.
#[derive(Debug)]
struct Edit {
    /// The bin within the bundle.
    bin: u32,
    /// Add the item (else remove it).
    add: bool,
    /// The item's felts.
    felts: Vec<u64>,
    /// Labelled add: the label felts, `parts` chunks of `felts_per_item`.
    values: Vec<u64>,
}

/// One bundle: up to `max_items_per_bin` items in each of its bins, and the
/// coefficients of each slot's matching (and label) polynomials.
#[derive(Debug)]
struct Bundle {
    /// Item ids per bin.
    bins: Vec<Vec<u32>>,
    /// `(1 + parts) × (B + 1) × N` coefficients: the matching polynomial, then each label
    /// part; polynomial-major, then coefficient-major. `None` when not loaded (an update
    /// reads only the bundles it changes) or dropped once encoded.
    coeffs: Option<Vec<u32>>,
    /// The coefficients as plaintexts at level 0, in the same order.
    plaintexts: Vec<Plaintext>,
    /// Where the coefficients are saved, while they are unchanged since.
    saved: Option<Segment>,
    /// New, or its coefficients are unknown: interpolate every bin anew.
    rebuild: bool,
    /// Changes since the coefficients were computed, in order.
    edits: Vec<Edit>,
}

impl Bundle {
    fn empty(bpb: usize) -> Self {
        Self {
            bins: vec![Vec::new(); bpb],
            coeffs: None,
            plaintexts: Vec::new(),
            saved: None,
            rebuild: true,
            edits: Vec::new(),
        }
    }

    fn dirty(&self) -> bool {
        self.rebuild || !self.edits.is_empty()
    }

    /// Records a change to bin `bin` (nothing to record if it is rebuilt anyway).
    fn edit(&mut self, bin: usize, add: bool, felts: &[u64], values: impl FnOnce() -> Vec<u64>) {
        if !self.rebuild {
            let values = if add { values() } else { Vec::new() };
            self.edits.push(Edit { bin: bin as u32, add, felts: felts.to_vec(), values });
        }
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
    /// Of those, bundles interpolated anew (new ones, or ones whose coefficients were
    /// not at hand); the others were edited point by point.
    pub bundles_new: usize,
    /// Bundles in the database afterwards.
    pub bundles_total: usize,
}

/// An item's distinct candidate bins and its field elements.
fn layout_of(p: &UnbalancedParams, o: &Output) -> (Vec<u32>, Vec<u64>) {
    let (mut bins, mut felts) = (Vec::new(), Vec::new());
    locate(p, o, &mut bins, &mut felts);
    bins.sort_unstable();
    bins.dedup();
    (bins, felts)
}

/// Each item's distinct candidate bins and field elements.
fn layouts(p: &UnbalancedParams, outputs: &[Output]) -> Vec<(Vec<u32>, Vec<u64>)> {
    outputs.par_iter().map(|o| layout_of(p, o)).collect()
}

/// Felts of the items in the bins a placement looked at, keyed by (bundle index, bundle,
/// bin) and gathered on first use: a new item is compared with every item of a bin with
/// room, and one contiguous list is far cheaper to scan than each item's layout.
type BinFelts = std::collections::HashMap<(u32, u32, u32), Vec<u32>>;

/// Puts item `id` into each of its bins: the first bundle at that bundle index whose bin
/// has room and no item with an equal felt at the same position (so label interpolation
/// has distinct points), or a new bundle. Records the change in the bundles it changes
/// (`values` gives the item's label felts).
fn place(
    p: &UnbalancedParams,
    indices: &mut [Vec<Bundle>],
    id: u32,
    layout: &[(Vec<u32>, Vec<u64>)],
    values: &dyn Fn(u32) -> Vec<u64>,
    seen: &mut BinFelts,
) -> Result<(), DbError> {
    let (bpb, cap, k) = (p.bins_per_bundle(), p.table_params.max_items_per_bin, p.item_params.felts_per_item);
    let felts = &layout[id as usize].1;
    for &bin in &layout[id as usize].0 {
        let (bi, lb) = (bin as usize / bpb, bin as usize % bpb);
        let bundles = &mut indices[bi];
        let mut at = None;
        for (j, b) in bundles.iter().enumerate().filter(|(_, b)| b.bins[lb].len() < cap) {
            let list = seen.entry((bi as u32, j as u32, lb as u32)).or_insert_with(|| {
                b.bins[lb].iter().flat_map(|&o| layout[o as usize].1.iter().map(|&f| f as u32)).collect()
            });
            if !list.chunks_exact(k).any(|c| c.iter().zip(felts).any(|(&a, &f)| a as u64 == f)) {
                at = Some(j);
                break;
            }
        }
        let at = match at {
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
        seen.entry((bi as u32, at as u32, lb as u32)).or_default().extend(felts.iter().map(|&f| f as u32));
        bundles[at].edit(lb, true, felts, || values(id));
    }
    Ok(())
}

/// Encrypted labels of a database: one record of `layout.record_bytes` per item, end to
/// end (one allocation, written and read as one slice).
#[derive(Debug)]
struct Labels {
    layout: LabelLayout,
    records: Vec<u8>,
}

impl Labels {
    fn record(&self, id: u32) -> &[u8] {
        let rb = self.layout.record_bytes;
        &self.records[id as usize * rb..][..rb]
    }

    fn set(&mut self, id: u32, record: &[u8]) {
        let rb = self.layout.record_bytes;
        self.records[id as usize * rb..][..rb].copy_from_slice(record);
    }
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
    /// The database directory the saved segments are in.
    dir: Option<PathBuf>,
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
            let mut records = vec![0u8; outputs.len() * layout.record_bytes];
            records
                .par_chunks_mut(layout.record_bytes)
                .zip(outputs.par_iter().zip(l))
                .for_each(|(r, (o, label))| r.copy_from_slice(&seal_label(o, label, &layout)));
            Labels { layout, records }
        });
        let mut db =
            Self { params, ctx, oprf, items: outputs, indices: Vec::new(), labels, dir: None, info: DbInfo::default() };
        db.fill_bundles()?;
        db.compute_coefficients()?;
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
        let mut seen = BinFelts::new();
        for id in 0..self.items.len() as u32 {
            // Every bundle is new, so no change is recorded and no label felts are asked for.
            place(&self.params, &mut indices, id, &layout, &|_| Vec::new(), &mut seen)?;
        }
        self.indices = indices;
        Ok(())
    }

    /// Label felts of a sealed record: `parts` chunks of `felts_per_item`.
    fn label_felts(labels: &Option<Labels>, p: &UnbalancedParams, id: u32) -> Vec<u64> {
        labels.as_ref().map_or_else(Vec::new, |l| {
            record_to_felts(l.record(id), l.layout.parts * p.item_params.felts_per_item, p.felt_bits())
        })
    }

    /// Adds `items` (with `labels` in a labelled database); an item already present gets
    /// the new label. Only the bundles that change are recomputed, and only their
    /// changed points (O(B) per point and polynomial).
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
        let index = self.find(&outputs);
        // Placing an item compares its felts only with the items of bins that have room,
        // so only those items' layouts are computed.
        let cap = self.params.table_params.max_items_per_bin;
        let mut open = vec![false; self.items.len()];
        for bin in self.indices.iter().flatten().flat_map(|b| &b.bins).filter(|bin| bin.len() < cap) {
            bin.iter().for_each(|&id| open[id as usize] = true);
        }
        let p = &self.params;
        let mut layout: Vec<(Vec<u32>, Vec<u64>)> = self
            .items
            .par_iter()
            .zip(&open)
            .map(|(o, &open)| if open { layout_of(p, o) } else { (Vec::new(), Vec::new()) })
            .collect();
        let mut stats = UpdateStats::default();
        let bpb = self.params.bins_per_bundle();
        let mut seen = std::collections::HashSet::new();
        let mut bin_felts = BinFelts::new();
        for (j, o) in outputs.iter().enumerate() {
            // An item given twice in one insert keeps its first label.
            if let Some(&id) = index.get(o).or_else(|| seen.contains(o).then_some(&u32::MAX)) {
                match (&mut self.labels, labels) {
                    (Some(l), Some(new)) if id != u32::MAX => l.set(id, &seal_label(o, &new[j], &l.layout)),
                    _ => {
                        stats.unchanged += 1;
                        continue;
                    }
                }
                let values = Self::label_felts(&self.labels, &self.params, id);
                if layout[id as usize].1.is_empty() {
                    layout[id as usize] = layout_of(&self.params, o);
                }
                // A new label is the same point with a new value: remove it, then add it.
                let felts = &layout[id as usize].1;
                for &bin in &layout[id as usize].0 {
                    let (bi, lb) = (bin as usize / bpb, bin as usize % bpb);
                    for b in self.indices[bi].iter_mut().filter(|b| b.bins[lb].contains(&id)) {
                        b.edit(lb, false, felts, Vec::new);
                        b.edit(lb, true, felts, || values.clone());
                    }
                }
                stats.relabelled += 1;
                continue;
            }
            let id = self.items.len() as u32;
            self.items.push(*o);
            seen.insert(*o);
            if let (Some(l), Some(new)) = (&mut self.labels, labels) {
                l.records.extend_from_slice(&seal_label(o, &new[j], &l.layout));
            }
            layout.push(layout_of(&self.params, o));
            let (params, lab) = (&self.params, &self.labels);
            place(
                &self.params,
                &mut self.indices,
                id,
                &layout,
                &|id| Self::label_felts(lab, params, id),
                &mut bin_felts,
            )?;
            stats.added += 1;
        }
        self.finish_update(stats)
    }

    /// The ids of those `outputs` already in the database: a set of the (few) outputs
    /// asked for, scanned against every item in parallel, instead of an index of the
    /// whole database per update.
    fn find(&self, outputs: &[Output]) -> std::collections::HashMap<Output, u32> {
        let wanted: std::collections::HashSet<&Output> = outputs.iter().collect();
        self.items.par_iter().enumerate().filter(|(_, o)| wanted.contains(o)).map(|(i, o)| (*o, i as u32)).collect()
    }

    /// Removes `items`; only the bundles that held them are recomputed (bundles left
    /// empty are dropped).
    pub fn remove<I: AsRef<[u8]> + Sync>(&mut self, items: &[I]) -> Result<UpdateStats, DbError> {
        let outputs = self.oprf.evaluate_items(items);
        let index = self.find(&outputs);
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
        let (items, p) = (&self.items, &self.params);
        let (mut bins_buf, mut felts) = (Vec::new(), Vec::new());
        for bundles in &mut self.indices {
            for b in bundles.iter_mut() {
                for lb in 0..b.bins.len() {
                    for i in 0..b.bins[lb].len() {
                        let id = b.bins[lb][i];
                        if gone[id as usize] {
                            locate(p, &items[id as usize], &mut bins_buf, &mut felts);
                            b.edit(lb, false, &felts, Vec::new);
                        }
                    }
                    let bin = &mut b.bins[lb];
                    bin.retain(|&id| !gone[id as usize]);
                    bin.iter_mut().for_each(|id| *id = remap[*id as usize]);
                }
            }
            bundles.retain(|b| b.bins.iter().any(|bin| !bin.is_empty()));
        }
        let mut keep = gone.iter().map(|g| !g);
        self.items.retain(|_| keep.next().expect("one flag per item"));
        if let Some(l) = &mut self.labels {
            let rb = l.layout.record_bytes;
            l.records = l.records.chunks(rb).zip(&gone).filter(|(_, g)| !**g).flat_map(|(r, _)| r).copied().collect();
        }
        self.finish_update(stats)
    }

    fn finish_update(&mut self, mut stats: UpdateStats) -> Result<UpdateStats, DbError> {
        stats.bundles_touched = self.indices.iter().flatten().filter(|b| b.dirty()).count();
        let serving = self.indices.iter().flatten().any(|b| !b.plaintexts.is_empty());
        stats.bundles_new = self.compute_coefficients()?;
        if serving {
            self.encode()?;
        }
        self.refresh_info();
        self.check_false_matches()?;
        stats.bundles_total = self.info.bundles;
        Ok(stats)
    }

    /// Brings every changed bundle's coefficients up to date (in parallel): a new
    /// bundle, or one whose coefficients are unknown, is interpolated anew; an edited
    /// one reads its saved coefficients if they are not in memory and applies its
    /// edits point by point. Returns how many were interpolated anew.
    fn compute_coefficients(&mut self) -> Result<usize, DbError> {
        let (items, labels, p, dir) = (&self.items, &self.labels, &self.params, self.dir.as_deref());
        let parts = labels.as_ref().map_or(0, |l| l.layout.parts);
        let len = (1 + parts) * (p.table_params.max_items_per_bin + 1) * p.seal_params.poly_modulus_degree;
        self.indices
            .par_iter_mut()
            .flatten()
            .filter(|b| b.dirty())
            .try_fold(
                || 0,
                |anew, bundle| {
                    bundle.plaintexts.clear();
                    if !bundle.rebuild && bundle.coeffs.is_none() {
                        match (bundle.saved, dir) {
                            (Some(seg), Some(dir)) => bundle.coeffs = Some(read_segment(dir, seg, len, p)?),
                            _ => bundle.rebuild = true,
                        }
                    }
                    if !bundle.rebuild {
                        let coeffs = bundle.coeffs.as_mut().expect("loaded above");
                        if apply_edits(p, parts, &bundle.edits, coeffs).is_none() {
                            // Not the points the coefficients were made from: interpolate anew.
                            bundle.rebuild = true;
                        }
                    }
                    let rebuilt = bundle.rebuild;
                    if rebuilt {
                        bundle.coeffs = Some(interpolate_bundle(p, parts, &bundle.bins, items, labels));
                    }
                    bundle.edits.clear();
                    bundle.rebuild = false;
                    bundle.saved = None;
                    Ok(anew + usize::from(rebuilt))
                },
            )
            .try_reduce(|| 0, |a, b| Ok(a + b))
    }

    /// Encodes every bundle's coefficients as plaintexts at level 0 (their NTT form is
    /// what makes the per-query products cheap).
    fn encode(&mut self) -> Result<(), DbError> {
        let (n, ctx) = (self.params.seal_params.poly_modulus_degree, &self.ctx);
        self.indices.par_iter_mut().flatten().filter(|b| b.plaintexts.is_empty()).try_for_each(|bundle| {
            let coeffs = bundle.coeffs.as_ref().expect("coefficients before encoding");
            bundle.plaintexts = encode_coefficients(ctx, n, coeffs).map_err(|e| DbError::Params(e.to_string()))?;
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
        Ok(Cow::Owned(encode_coefficients(&self.ctx, n, bundle.coeffs.as_deref().unwrap_or_default())?))
    }

    /// Saves the database as the directory `path`: a segment file per bundle changed
    /// since it was last saved there (written and synced first), then the manifest —
    /// parameters, key, items, labels, bins and each segment's name and hash — written to
    /// a temporary file and renamed over the old one, which is the atomic step: an
    /// interrupted save leaves the old manifest and the segments it names. Segments no
    /// manifest names are deleted last. An update therefore writes only the bundles it
    /// changed (and the manifest).
    pub fn save(&mut self, path: &Path) -> Result<(), DbError> {
        let name = path.display().to_string();
        let io = |source| DbError::Io { path: name.clone(), source };
        if path.is_file() {
            return Err(DbError::Invalid {
                path: name.clone(),
                why: "is a file; a database is a directory (format version 2): choose another path".into(),
            });
        }
        // Saving deletes the segment files its manifest does not name, so it refuses a
        // directory that holds anything but a database.
        if path.is_dir() && !path.join(MANIFEST).exists() && std::fs::read_dir(path).map_err(io)?.next().is_some() {
            return Err(DbError::Invalid {
                path: name.clone(),
                why: "is a directory that is not a setwise database: choose a new path".into(),
            });
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
                        .ok_or_else(|| DbError::Params("coefficients were dropped before saving".into()))?;
                    write_segment(path, coeffs).map_err(io)
                }
            })
            .collect::<Result<Vec<Segment>, DbError>>()?;
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
        w.bytes(self.info.preset.as_bytes()).u64(self.info.build_ms);
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

    /// Drops the coefficient copies once the database is saved (memory then is the
    /// plaintexts').
    pub fn drop_coefficients(&mut self) {
        self.indices.iter_mut().flatten().for_each(|b| b.coeffs = None);
    }

    /// Loads a database to serve it, refusing a truncated, corrupted or foreign one: each
    /// bundle's segment is read, checked and encoded in parallel, and its coefficients
    /// dropped (the loaded database costs what its plaintexts cost).
    pub fn load(path: &Path) -> Result<Self, DbError> {
        let mut db = Self::load_for_update(path)?;
        let (p, ctx, n, len) = (&db.params, &db.ctx, db.params.seal_params.poly_modulus_degree, db.segment_len());
        db.indices.par_iter_mut().flatten().try_for_each(|b| {
            let seg = b.saved.expect("a loaded bundle is saved");
            let coeffs = read_segment(path, seg, len, p)?;
            b.plaintexts = encode_coefficients(ctx, n, &coeffs).map_err(|e| DbError::Params(e.to_string()))?;
            Ok::<_, DbError>(())
        })?;
        db.refresh_info();
        Ok(db)
    }

    /// Makes a built or edited database ready to serve fast: encodes the plaintexts and
    /// drops the coefficient copies (it can then be saved only where it was saved
    /// before). Without it, each query encodes the plaintexts it uses, as in compact mode.
    pub fn prepare(&mut self) -> Result<(), DbError> {
        self.encode()?;
        self.drop_coefficients();
        self.refresh_info();
        Ok(())
    }

    /// Loads a database to serve it in compact mode: only the coefficients are kept
    /// (4 bytes a slot instead of the plaintexts' (L+1)·8), and each query encodes the
    /// plaintexts it uses.
    pub fn load_compact(path: &Path) -> Result<Self, DbError> {
        let mut db = Self::load_for_update(path)?;
        let (p, len) = (&db.params, db.segment_len());
        db.indices.par_iter_mut().flatten().try_for_each(|b| {
            b.coeffs = Some(read_segment(path, b.saved.expect("a loaded bundle is saved"), len, p)?);
            Ok::<_, DbError>(())
        })?;
        db.info.compact = true;
        Ok(db)
    }

    /// Coefficients in one bundle's segment.
    fn segment_len(&self) -> usize {
        let parts = self.labels.as_ref().map_or(0, |l| l.layout.parts);
        (1 + parts) * (self.params.table_params.max_items_per_bin + 1) * self.params.seal_params.poly_modulus_degree
    }

    /// Loads a database to edit it ([`insert`](Self::insert), [`remove`](Self::remove),
    /// [`save`](Self::save)): the manifest only; an update reads the segments of the
    /// bundles it changes.
    pub fn load_for_update(path: &Path) -> Result<Self, DbError> {
        let name = path.display().to_string();
        let bad = |why: String| DbError::Invalid { path: name.clone(), why };
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
        let bytes = std::fs::read(path.join(MANIFEST))
            .map_err(|source| DbError::Io { path: path.join(MANIFEST).display().to_string(), source })?;
        if bytes.len() < MAGIC.len() + 4 + 32 || bytes[..8] != MAGIC {
            return Err(bad("not a setwise database (bad magic in MANIFEST)".into()));
        }
        let (body, sum) = bytes.split_at(bytes.len() - 32);
        if blake3::Hasher::new().update_rayon(body).finalize().as_bytes() != sum {
            return Err(bad("MANIFEST checksum mismatch: the file is truncated or corrupted".into()));
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
            info: DbInfo { preset, build_ms, ..Default::default() },
        };
        db.refresh_info();
        Ok(db)
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

/// Encodes coefficient rows of `n` as plaintexts at level 0.
fn encode_coefficients(ctx: &HeContext, n: usize, coeffs: &[u32]) -> Result<Vec<Plaintext>, crate::he::HeError> {
    let mut row = vec![0u64; n];
    coeffs
        .chunks(n)
        .map(|c| {
            row.iter_mut().zip(c).for_each(|(r, &v)| *r = v as u64);
            ctx.encode(&row, 0)
        })
        .collect()
}

/// Writes coefficients as a new segment file (little-endian u32s) in `dir`, synced, and
/// names it by a random id.
fn write_segment(dir: &Path, coeffs: &[u32]) -> std::io::Result<Segment> {
    let bytes: Vec<u8> = coeffs.iter().flat_map(|c| c.to_le_bytes()).collect();
    let mut id = [0u8; 8];
    crate::rng::fill_os(&mut id);
    let seg = Segment { id: u64::from_le_bytes(id), hash: *blake3::hash(&bytes).as_bytes() };
    let mut f = std::fs::File::create(dir.join(Segment::file_name(seg.id)))?;
    std::io::Write::write_all(&mut f, &bytes)?;
    f.sync_all()?;
    Ok(seg)
}

/// Reads a bundle's segment, checking its length, hash and that every coefficient is
/// below the plain modulus.
fn read_segment(dir: &Path, seg: Segment, len: usize, p: &UnbalancedParams) -> Result<Vec<u32>, DbError> {
    let file = dir.join(Segment::file_name(seg.id));
    let name = file.display().to_string();
    let bytes = std::fs::read(&file).map_err(|source| DbError::Io { path: name.clone(), source })?;
    let bad = |why: String| DbError::Invalid { path: name.clone(), why };
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

/// Interpolates a bundle anew: each slot's matching polynomial ∏(x − y_f), and for a
/// labelled database its label polynomials through (y_f, label felt).
fn interpolate_bundle(
    p: &UnbalancedParams,
    parts: usize,
    bins: &[Vec<u32>],
    items: &[Output],
    labels: &Option<Labels>,
) -> Vec<u32> {
    let (n, k, b, t) = (
        p.seal_params.poly_modulus_degree,
        p.item_params.felts_per_item,
        p.table_params.max_items_per_bin,
        p.seal_params.plain_modulus,
    );
    let fb = p.felt_bits();
    let mut coeffs = vec![0u32; (1 + parts) * (b + 1) * n];
    let (mut bins_buf, mut felts) = (Vec::new(), Vec::new());
    let mut roots: Vec<Vec<u64>> = vec![Vec::with_capacity(b); k];
    // values[f][part][j]: felt f of part `part` of the label of the bin's j-th item.
    let mut values: Vec<Vec<Vec<u64>>> = vec![vec![Vec::with_capacity(b); parts]; k];
    for (lb, ids) in bins.iter().enumerate() {
        roots.iter_mut().for_each(Vec::clear);
        values.iter_mut().flatten().for_each(Vec::clear);
        for &id in ids {
            locate(p, &items[id as usize], &mut bins_buf, &mut felts);
            for f in 0..k {
                roots[f].push(felts[f]);
            }
            if let Some(l) = labels {
                let lf = record_to_felts(l.record(id), parts * k, fb);
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
                // Distinct points: a bundle bin never holds two equal felts (see `place`).
                let polys = interpolate(r, &ys, t).expect("distinct felts per bundle bin");
                for (part, poly) in polys.iter().enumerate() {
                    for (i, &c) in poly.iter().enumerate() {
                        coeffs[((1 + part) * (b + 1) + i) * n + slot] = c as u32;
                    }
                }
            }
        }
    }
    coeffs
}

/// Applies a bundle's edits to its coefficients point by point, grouped by bin (in
/// order within a bin). `None` if an edit does not fit the points the coefficients hold
/// (then the bundle is interpolated anew).
fn apply_edits(p: &UnbalancedParams, parts: usize, edits: &[Edit], coeffs: &mut [u32]) -> Option<()> {
    let (n, k, rows, t) = (
        p.seal_params.poly_modulus_degree,
        p.item_params.felts_per_item,
        p.table_params.max_items_per_bin + 1,
        p.seal_params.plain_modulus,
    );
    let mut order: Vec<usize> = (0..edits.len()).collect();
    order.sort_by_key(|&i| edits[i].bin);
    let (mut cols, mut ys, mut scratch) = (vec![0u64; (1 + parts) * rows], Vec::new(), Vec::new());
    for group in order.chunk_by(|&a, &b| edits[a].bin == edits[b].bin) {
        for f in 0..k {
            let slot = edits[group[0]].bin as usize * k + f;
            for (j, c) in cols.iter_mut().enumerate() {
                *c = coeffs[j * n + slot] as u64;
            }
            let (roots, rest) = cols.split_at_mut(rows);
            let mut polys: Vec<&mut [u64]> = rest.chunks_mut(rows).collect();
            for e in group.iter().map(|&i| &edits[i]) {
                if e.add {
                    ys.clear();
                    ys.extend((0..parts).map(|part| e.values[part * k + f]));
                    add_point(roots, &mut polys, e.felts[f], &ys, t, &mut scratch)?;
                } else {
                    remove_point(roots, &mut polys, e.felts[f], t, &mut scratch)?;
                }
            }
            for (j, &c) in cols.iter().enumerate() {
                coeffs[j * n + slot] = c as u32;
            }
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> UnbalancedParams {
        UnbalancedParams::from_json(
            r#"{"table_params":{"hash_func_count":3,"table_size":1024,"max_items_per_bin":8},
                "item_params":{"felts_per_item":4},
                "query_params":{"ps_low_degree":0,"query_powers":[1,2,3,4,5,6,7,8]},
                "seal_params":{"poly_modulus_degree":4096,"coeff_modulus_bits":[42,36,31],"plain_modulus":2056193}}"#,
        )
        .unwrap()
    }

    fn keys(prefix: &str, range: std::ops::Range<u32>) -> Vec<Vec<u8>> {
        range.map(|i| format!("{prefix}{i}").into_bytes()).collect()
    }

    /// Every bundle's coefficients after point-by-point edits equal interpolating its
    /// bins anew, and edits were applied (not silently rebuilt).
    #[test]
    fn edited_bundles_equal_interpolating_anew() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.db");
        let sender = keys("s", 0..2500);
        let labels: Vec<Vec<u8>> = sender.iter().map(|k| [b"v0:", &k[..]].concat()).collect();
        let mut db = SenderDb::build_labelled(&sender, &labels, vec!["l".into()], params(), "t").unwrap();
        db.save(&path).unwrap();
        let mut db = SenderDb::load_for_update(&path).unwrap();
        let added = keys("n", 0..200);
        let relabel = keys("s", 100..140);
        let ins = [added, relabel].concat();
        let new_labels: Vec<Vec<u8>> = ins.iter().map(|k| [b"v1:", &k[..5.min(k.len())]].concat()).collect();
        let before = db.info.bundles;
        let st = db.insert(&ins, Some(&new_labels)).unwrap();
        assert_eq!(st.bundles_new, st.bundles_total - before, "only new bundles are interpolated anew: {st:?}");
        assert!(st.bundles_touched > st.bundles_new, "{st:?}");
        let st = db.remove(&keys("s", 1000..1300)).unwrap();
        assert!(st.bundles_touched > 0 && st.bundles_new == 0, "{st:?}");
        let parts = db.labels.as_ref().unwrap().layout.parts;
        for b in db.indices.iter().flatten().filter(|b| b.coeffs.is_some()) {
            let anew = interpolate_bundle(&db.params, parts, &b.bins, &db.items, &db.labels);
            assert!(b.coeffs.as_ref().unwrap() == &anew, "an edited bundle differs from interpolating it anew");
        }
        // Applying the same edits twice cannot fit: the second add of a point is refused.
        let b = db.indices.iter().flatten().find(|b| b.coeffs.is_some()).unwrap();
        let (bin, id) = b.bins.iter().enumerate().find_map(|(i, ids)| ids.first().map(|&id| (i, id))).unwrap();
        let (mut bins, mut felts) = (Vec::new(), Vec::new());
        locate(&db.params, &db.items[id as usize], &mut bins, &mut felts);
        let values = SenderDb::label_felts(&db.labels, &db.params, id);
        let edit = Edit { bin: bin as u32, add: true, felts, values };
        let mut coeffs = b.coeffs.clone().unwrap();
        assert!(apply_edits(&db.params, parts, &[edit], &mut coeffs).is_none());
    }
}
