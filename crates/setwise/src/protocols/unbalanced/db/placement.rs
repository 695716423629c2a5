//! Placing items: each item goes into every one of its candidate bins, in the first
//! bundle at that bundle index whose bin has room and no equal felt at the same position
//! (so label interpolation has distinct points), or a new bundle.

use super::super::Digest;
use super::super::params::UnbalancedParams;
use super::super::{MAX_BUNDLES_PER_INDEX, locate};
use super::Bundle;
use crate::error::{Error, Result};
use rayon::prelude::*;
use std::collections::HashMap;

/// Items' distinct candidate bins (ascending) and field elements, flat: `h` bin slots
/// and `k` felts per item, and each item's count of distinct bins (0: not computed). One
/// allocation per array instead of two per item: at 2^24 items that is the difference
/// between ~0.8 GB and ~2 GB, and it is what every load checks.
pub(super) struct Layouts {
    h: usize,
    k: usize,
    bins: Vec<u32>,
    counts: Vec<u8>,
    felts: Vec<u64>,
}

impl Layouts {
    /// The layouts of `items`, in parallel; with `only`, of the items it marks (the
    /// others stay uncomputed until [`ensure`](Self::ensure)).
    pub(super) fn of(p: &UnbalancedParams, items: &[Digest], only: Option<&[bool]>) -> Self {
        let (h, k, n) = (p.table_params.hash_func_count, p.item_params.felts_per_item, items.len());
        let mut l = Self { h, k, bins: vec![0; n * h], counts: vec![0; n], felts: vec![0; n * k] };
        l.bins
            .par_chunks_mut(h)
            .zip(l.counts.par_iter_mut())
            .zip(l.felts.par_chunks_mut(k))
            .enumerate()
            .filter(|(i, _)| only.is_none_or(|o| o[*i]))
            .for_each_init(
                || (Vec::new(), Vec::new()),
                |scratch, (i, ((bins, count), felts))| fill(p, &items[i], bins, count, felts, scratch),
            );
        l
    }

    /// The bytes [`of`](Self::of) takes per item under `p`: its candidate bins, their
    /// count and its felts.
    pub(super) fn bytes_per_item(p: &UnbalancedParams) -> usize {
        let (h, k) = (p.table_params.hash_func_count, p.item_params.felts_per_item);
        h * size_of::<u32>() + size_of::<u8>() + k * size_of::<u64>()
    }

    /// The bytes these layouts hold (their arrays' lengths).
    #[cfg(test)]
    pub(super) fn bytes(&self) -> usize {
        self.bins.len() * size_of::<u32>() + self.counts.len() + self.felts.len() * size_of::<u64>()
    }

    /// Computes item `id`'s layout (from its digest `d`) if it is not yet known.
    pub(super) fn ensure(&mut self, p: &UnbalancedParams, id: u32, d: &Digest) {
        let (i, h, k) = (id as usize, self.h, self.k);
        if self.counts[i] == 0 {
            let scratch = &mut (Vec::new(), Vec::new());
            fill(p, d, &mut self.bins[i * h..][..h], &mut self.counts[i], &mut self.felts[i * k..][..k], scratch);
        }
    }

    /// Appends the layout of a new item (digest `d`), whose id is the current count.
    pub(super) fn push(&mut self, p: &UnbalancedParams, d: &Digest) {
        let id = self.counts.len() as u32;
        self.bins.resize(self.bins.len() + self.h, 0);
        self.counts.push(0);
        self.felts.resize(self.felts.len() + self.k, 0);
        self.ensure(p, id, d);
    }

    /// Item `id`'s distinct candidate bins, ascending (empty if not computed).
    pub(super) fn bins(&self, id: u32) -> &[u32] {
        &self.bins[id as usize * self.h..][..self.counts[id as usize] as usize]
    }

    /// Item `id`'s field elements.
    pub(super) fn felts(&self, id: u32) -> &[u64] {
        &self.felts[id as usize * self.k..][..self.k]
    }
}

/// Writes digest `d`'s distinct bins (ascending) and their count, and its felts.
fn fill(
    p: &UnbalancedParams,
    d: &Digest,
    bins: &mut [u32],
    count: &mut u8,
    felts: &mut [u64],
    (b, f): &mut (Vec<u32>, Vec<u64>),
) {
    locate(p, d, b, f);
    b.sort_unstable();
    b.dedup();
    bins[..b.len()].copy_from_slice(b);
    // At most 8 hash functions (checked with the parameters), so this fits.
    *count = b.len() as u8;
    felts.copy_from_slice(f);
}

/// What a placement remembers at one bundle index between items. Within one placement
/// bins only grow (removals are a separate update), which is what makes both facts safe
/// to keep.
#[derive(Default)]
pub(super) struct AtIndex {
    /// Per bin of a bundle: every bundle before this one has no room in it, so a new item
    /// starts its search here instead of at the first of (at 2^24 items) 245 bundles.
    first_open: Vec<u32>,
    /// Felts (truncated) of the items of the bins with room that a placement looked at,
    /// keyed by (bundle, bin) and gathered on first use: one contiguous list is far
    /// cheaper to scan than each item's layout. Dropped when the bin fills.
    felts: HashMap<(u32, u32), Vec<u32>>,
}

/// A placement's state at every bundle index.
pub(super) type Placing = Vec<AtIndex>;

/// A fresh placement state for `p`'s bundle indices.
pub(super) fn placing(p: &UnbalancedParams) -> Placing {
    (0..p.bundle_indices()).map(|_| AtIndex::default()).collect()
}

/// Puts item `id` into each of its bins (see [`place_at`]); `values` gives the item's
/// label felts for the bundles that record changes.
pub(super) fn place(
    p: &UnbalancedParams,
    indices: &mut [Vec<Bundle>],
    id: u32,
    layout: &Layouts,
    values: &dyn Fn(u32) -> Vec<u64>,
    state: &mut Placing,
) -> Result<()> {
    let bpb = p.bins_per_bundle();
    for &bin in layout.bins(id) {
        let (bi, lb) = (bin as usize / bpb, bin as usize % bpb);
        place_at(p, &mut indices[bi], lb, id, layout, values, &mut state[bi])?;
    }
    Ok(())
}

/// Places every item of `layout` at bundle index `bi` into `bundles` (empty), in id order:
/// the bundles one pass over all items would give there, since a bundle index's
/// placement depends only on the items placed at it before. Indices can so be placed in
/// parallel, with the same result every time (a resumed build relies on that).
pub(super) fn place_index(p: &UnbalancedParams, bi: usize, items: usize, layout: &Layouts) -> Result<Vec<Bundle>> {
    let bpb = p.bins_per_bundle();
    let (mut bundles, mut at) = (Vec::new(), AtIndex::default());
    let range = (bi * bpb) as u32..((bi + 1) * bpb) as u32;
    for id in 0..items as u32 {
        for &bin in layout.bins(id).iter().filter(|b| range.contains(b)) {
            // Every bundle is new, so no change is recorded and no label felts are asked for.
            place_at(p, &mut bundles, bin as usize % bpb, id, layout, &|_| Vec::new(), &mut at)?;
        }
    }
    Ok(bundles)
}

/// Puts item `id` into bin `lb` of the first bundle (of one bundle index) whose bin has
/// room and no item with an equal felt at the same position (so label interpolation has
/// distinct points), or of a new bundle, and records the change in that bundle.
fn place_at(
    p: &UnbalancedParams,
    bundles: &mut Vec<Bundle>,
    lb: usize,
    id: u32,
    layout: &Layouts,
    values: &dyn Fn(u32) -> Vec<u64>,
    at_index: &mut AtIndex,
) -> Result<()> {
    let (bpb, cap, k) = (p.bins_per_bundle(), p.table_params.max_items_per_bin, p.item_params.felts_per_item);
    let felts = layout.felts(id);
    if at_index.first_open.is_empty() {
        at_index.first_open = vec![0; bpb];
    }
    let first = &mut at_index.first_open[lb];
    while (*first as usize) < bundles.len() && bundles[*first as usize].bins[lb].len() >= cap {
        *first += 1;
    }
    let mut at = None;
    for (j, b) in bundles.iter().enumerate().skip(*first as usize).filter(|(_, b)| b.bins[lb].len() < cap) {
        let list = at_index
            .felts
            .entry((j as u32, lb as u32))
            .or_insert_with(|| b.bins[lb].iter().flat_map(|&o| layout.felts(o).iter().map(|&f| f as u32)).collect());
        if !list.chunks_exact(k).any(|c| c.iter().zip(felts).any(|(&a, &f)| a as u64 == f)) {
            at = Some(j);
            break;
        }
    }
    let at = match at {
        Some(at) => at,
        None => {
            if bundles.len() >= MAX_BUNDLES_PER_INDEX {
                return Err(Error::params(
                    "sender_size",
                    format!(
                        "more than {MAX_BUNDLES_PER_INDEX} bundles at one bundle index: the sender set is too large for these parameters"
                    ),
                ));
            }
            bundles.push(Bundle::empty(bpb));
            bundles.len() - 1
        }
    };
    let bin = &mut bundles[at].bins[lb];
    bin.push(id);
    let key = (at as u32, lb as u32);
    if bin.len() >= cap {
        // Never looked at again in this placement.
        at_index.felts.remove(&key);
    } else {
        at_index.felts.entry(key).or_default().extend(felts.iter().map(|&f| f as u32));
    }
    bundles[at].edit(lb, true, felts, || values(id));
    Ok(())
}
