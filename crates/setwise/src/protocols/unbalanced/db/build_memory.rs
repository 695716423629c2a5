//! The memory a build cannot do without, checked before any work: a build too large
//! for the machine is refused at once, naming both figures, instead of being killed
//! after its OPRF (about half an hour at 2^26 items on two cores).

use super::super::Digest;
use super::super::params::UnbalancedParams;
use super::placement::Layouts;
use crate::error::{Error, Result};
use crate::io::memory::{available_memory, swap_free};

/// A lower bound on the bytes a build of `items` items holds beside its input at its
/// peak, while it places them: each item's digest and sealed label record
/// (`record_bytes`, 0 unlabelled), its layout (candidate bins and felts), and at least
/// one slot (an item id) in some bundle's bin. The build holds more (the OPRF's outputs
/// until they are hashed, bins' spare capacity, a bundle's coefficients per thread), so
/// a build this refuses would not have fit in the memory the kernel reported available
/// (itself an estimate).
pub(super) fn floor(p: &UnbalancedParams, items: usize, record_bytes: usize) -> usize {
    let per_item = size_of::<Digest>() + record_bytes + Layouts::bytes_per_item(p) + size_of::<u32>();
    items.saturating_mul(per_item)
}

/// Refuses a build of `items` items whose [`floor`] is more than the memory
/// `available` (unknown: allowed), naming both.
pub(super) fn check(floor: usize, available: Option<usize>, items: usize) -> Result<()> {
    match available {
        Some(a) if floor > a => Err(Error::usage(
            "memory",
            format!(
                "building {items} items holds at least {} beside the input (each item's digest, label record, \
                 bins and felts while it is placed), but {} is available (free memory and swap): build on a \
                 machine with more memory, or split the set into databases of fewer items",
                gb(floor),
                gb(a)
            ),
        )),
        _ => Ok(()),
    }
}

/// [`check`] against this machine's available memory and free swap, taken now (after
/// the caller read its input, so the input is already accounted for).
pub(super) fn refuse_if_short(p: &UnbalancedParams, items: usize, record_bytes: usize) -> Result<()> {
    // Swap counts: a build that could finish only by swapping is slow, not impossible.
    let available = available_memory().map(|a| a.saturating_add(swap_free().unwrap_or(0)));
    check(floor(p, items, record_bytes), available, items)
}

fn gb(bytes: usize) -> String {
    format!("{:.2} GB", bytes as f64 / 1e9)
}

#[cfg(test)]
mod tests {
    use super::super::SenderDb;
    use super::*;
    use crate::protocols::unbalanced::params::small_test_params;

    #[test]
    fn a_build_larger_than_the_memory_is_refused_naming_both_figures() {
        let p = small_test_params();
        let need = floor(&p, 1 << 28, 84);
        let e = check(need, Some(need / 2), 1 << 28).unwrap_err().to_string();
        assert!(e.contains("268435456 items") && e.contains(&gb(need)) && e.contains(&gb(need / 2)), "{e}");
        check(need, Some(need - 1), 1 << 28).unwrap_err();
        check(need, Some(need), 1 << 28).unwrap();
        check(need, None, 1 << 28).unwrap();
        // This machine can build a small set.
        refuse_if_short(&p, 1000, 84).unwrap();
    }

    /// The floor is exactly what a real build holds while it places its items, counted
    /// from its own structures (its digests, label records and layouts) with one bin
    /// slot per item, and every item is in at least one bin.
    #[test]
    fn the_floor_is_what_a_build_holds_with_one_bin_slot_an_item() {
        let p = small_test_params();
        let items: Vec<Vec<u8>> = (0..3000u32).map(|i| format!("item{i}").into_bytes()).collect();
        let labels: Vec<Vec<u8>> = items.iter().map(|k| [b"label:", &k[..]].concat()).collect();
        let db = SenderDb::build_labelled(&items, &labels, vec!["l".into()], p.clone(), "t").unwrap();
        let records = &db.labels.as_ref().unwrap().records;
        let record_bytes = db.labels.as_ref().unwrap().layout.record_bytes;
        assert_eq!(records.len(), items.len() * record_bytes);
        let layouts = Layouts::of(&p, &db.items, None).bytes();
        assert_eq!(layouts, items.len() * Layouts::bytes_per_item(&p));
        let slots: usize = db.indices.iter().flatten().flat_map(|b| &b.bins).map(Vec::len).sum();
        assert!(slots >= items.len(), "{slots} bin slots for {} items", items.len());
        // The element sizes of the build's own vectors, so a wider digest or id shows.
        fn elem<T>(_: &[T]) -> usize {
            size_of::<T>()
        }
        let digests = db.items.len() * elem(&db.items);
        let one_slot_each = items.len() * elem(&db.indices[0][0].bins[0]);
        assert_eq!(floor(&p, items.len(), record_bytes), digests + records.len() + layouts + one_slot_each);
    }
}
