//! Placing items: each item goes into every one of its candidate bins, in the first
//! bundle at that bundle index whose bin has room and no equal felt at the same position
//! (so label interpolation has distinct points), or a new bundle.

use super::super::Digest;
use super::super::params::UnbalancedParams;
use super::super::{MAX_BUNDLES_PER_INDEX, locate};
use super::Bundle;
use crate::error::{Error, Result};
use rayon::prelude::*;

/// An item's distinct candidate bins and its field elements.
pub(super) fn layout_of(p: &UnbalancedParams, o: &Digest) -> (Vec<u32>, Vec<u64>) {
    let (mut bins, mut felts) = (Vec::new(), Vec::new());
    locate(p, o, &mut bins, &mut felts);
    bins.sort_unstable();
    bins.dedup();
    (bins, felts)
}

/// Each item's distinct candidate bins and field elements.
pub(super) fn layouts(p: &UnbalancedParams, outputs: &[Digest]) -> Vec<(Vec<u32>, Vec<u64>)> {
    outputs.par_iter().map(|o| layout_of(p, o)).collect()
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
    layout: &[(Vec<u32>, Vec<u64>)],
    values: &dyn Fn(u32) -> Vec<u64>,
    seen: &mut BinFelts,
) -> Result<()> {
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
