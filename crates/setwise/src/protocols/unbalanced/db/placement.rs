//! Placing items: each item goes into every one of its candidate bins, in the first
//! bundle at that bundle index whose bin has room and no equal felt at the same position
//! (so label interpolation has distinct points), or a new bundle.

use super::super::Digest;
use super::super::params::UnbalancedParams;
use super::super::{MAX_BUNDLES_PER_INDEX, locate};
use super::Bundle;
use crate::error::{Error, Result};
use rayon::prelude::*;

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

/// Felts of the items in the bins a placement looked at, keyed by (bundle index, bundle,
/// bin) and gathered on first use: a new item is compared with every item of a bin with
/// room, and one contiguous list is far cheaper to scan than each item's layout.
pub(super) type BinFelts = std::collections::HashMap<(u32, u32, u32), Vec<u32>>;

/// Puts item `id` into each of its bins: the first bundle at that bundle index whose bin
/// has room and no item with an equal felt at the same position (so label interpolation
/// has distinct points), or a new bundle. Records the change in the bundles it changes
/// (`values` gives the item's label felts).
pub(super) fn place(
    p: &UnbalancedParams,
    indices: &mut [Vec<Bundle>],
    id: u32,
    layout: &Layouts,
    values: &dyn Fn(u32) -> Vec<u64>,
    seen: &mut BinFelts,
) -> Result<()> {
    let (bpb, cap, k) = (p.bins_per_bundle(), p.table_params.max_items_per_bin, p.item_params.felts_per_item);
    let felts = layout.felts(id);
    for &bin in layout.bins(id) {
        let (bi, lb) = (bin as usize / bpb, bin as usize % bpb);
        let bundles = &mut indices[bi];
        let mut at = None;
        for (j, b) in bundles.iter().enumerate().filter(|(_, b)| b.bins[lb].len() < cap) {
            let list = seen.entry((bi as u32, j as u32, lb as u32)).or_insert_with(|| {
                b.bins[lb].iter().flat_map(|&o| layout.felts(o).iter().map(|&f| f as u32)).collect()
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
        bundles[at].bins[lb].push(id);
        seen.entry((bi as u32, at as u32, lb as u32)).or_default().extend(felts.iter().map(|&f| f as u32));
        bundles[at].edit(lb, true, felts, || values(id));
    }
    Ok(())
}
