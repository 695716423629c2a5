//! Checking that a caller's items form a set.

use super::InputError;
use rayon::prelude::*;
use std::hash::{BuildHasher, RandomState};

/// `Ok` if no two of `items` are equal; otherwise the indices of an equal pair (the
/// first repeated item and its first occurrence).
///
/// A set of 2^24 items costs a fraction of a second ([`first_occurrences`]), far below
/// any protocol run on it.
pub fn check_distinct<I: AsRef<[u8]> + Sync>(items: &[I]) -> Result<(), InputError> {
    match first_occurrences(items).iter().enumerate().find(|&(i, &f)| f as usize != i) {
        Some((second, &first)) => Err(InputError::Duplicate { first: first as usize, second }),
        None => Ok(()),
    }
}

/// For each item, the index of the first item equal to it (itself if none is earlier).
///
/// Sorts words of a keyed 32-bit hash and the item's index in parallel and compares bytes
/// only within runs of equal hashes, sorted by bytes there, so an item repeated many
/// times costs n·log n, not n²; no per-item map entry and no random access into a table
/// as large as the input.
pub fn first_occurrences<I: AsRef<[u8]> + Sync>(items: &[I]) -> Vec<u32> {
    assert!(items.len() <= u32::MAX as usize, "at most 2^32 items");
    let state = RandomState::new();
    // Hash in the high half, index in the low: one 8-byte word to sort per item.
    let mut order: Vec<u64> =
        items.par_iter().enumerate().map(|(i, x)| (state.hash_one(x.as_ref()) & !0xFFFF_FFFF) | i as u64).collect();
    order.par_sort_unstable();
    let mut first: Vec<u32> = (0..items.len() as u32).collect();
    let index = |w: &u64| *w as u32;
    let bytes = |w: &u64| items[index(w) as usize].as_ref();
    for run in order.chunk_by_mut(|a, b| a >> 32 == b >> 32).filter(|r| r.len() > 1) {
        // By bytes, then by index, so each group of equal items starts with its first.
        run.sort_by(|a, b| bytes(a).cmp(bytes(b)).then(index(a).cmp(&index(b))));
        for group in run.chunk_by(|a, b| bytes(a) == bytes(b)) {
            group.iter().for_each(|w| first[index(w) as usize] = index(&group[0]));
        }
    }
    first
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_repeated_pair() {
        let items: Vec<Vec<u8>> = (0..10_000u32).map(|i| i.to_le_bytes().to_vec()).collect();
        assert!(check_distinct(&items).is_ok());
        let mut dup = items.clone();
        dup[7777] = dup[123].clone();
        match check_distinct(&dup) {
            Err(InputError::Duplicate { first: 123, second: 7777 }) => {}
            other => panic!("{other:?}"),
        }
        assert!(check_distinct::<Vec<u8>>(&[]).is_ok());
    }
}
