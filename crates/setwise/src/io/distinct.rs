//! Checking that a caller's items form a set.

use super::InputError;
use rayon::prelude::*;
use std::hash::{BuildHasher, RandomState};

/// `Ok` if no two of `items` are equal; otherwise the indices of an equal pair.
///
/// Sorts 64-bit hashes of the items in parallel and compares the bytes only where two
/// hashes are equal, so a set of 2^24 items costs a fraction of a second, far below any
/// protocol run on it.
pub fn check_distinct<I: AsRef<[u8]> + Sync>(items: &[I]) -> Result<(), InputError> {
    let state = RandomState::new();
    let mut hashes: Vec<(u64, u32)> =
        items.par_iter().enumerate().map(|(i, x)| (state.hash_one(x.as_ref()), i as u32)).collect();
    hashes.par_sort_unstable();
    for run in hashes.chunk_by(|a, b| a.0 == b.0).filter(|r| r.len() > 1) {
        for (k, a) in run.iter().enumerate() {
            if let Some(b) = run[k + 1..].iter().find(|b| items[b.1 as usize].as_ref() == items[a.1 as usize].as_ref())
            {
                let (first, second) = (a.1.min(b.1) as usize, a.1.max(b.1) as usize);
                return Err(InputError::Duplicate { first, second });
            }
        }
    }
    Ok(())
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
