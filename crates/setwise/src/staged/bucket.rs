//! Splitting a party's items into the agreed buckets: item `i` goes to bucket
//! [`Plan::bucket_of`]`(item)`, and within a bucket items keep their input order (so a
//! bucket's list, and every message computed from it, is the same on every re-run).

use super::plan::Plan;
use rayon::prelude::*;

/// The indices (into `items`) of each bucket's items, ascending; `B` lists.
pub fn assign<I: AsRef<[u8]> + Sync>(plan: &Plan, items: &[I]) -> Vec<Vec<u32>> {
    let of: Vec<u32> = items.par_iter().map(|i| plan.bucket_of(i.as_ref())).collect();
    let mut sizes = vec![0usize; plan.buckets as usize];
    of.iter().for_each(|&b| sizes[b as usize] += 1);
    let mut buckets: Vec<Vec<u32>> = sizes.iter().map(|&n| Vec::with_capacity(n)).collect();
    for (i, &b) in of.iter().enumerate() {
        buckets[b as usize].push(i as u32);
    }
    buckets
}

/// The items of one bucket, by the indices [`assign`] gave.
pub fn select<'a, I: AsRef<[u8]>>(items: &'a [I], indices: &[u32]) -> Vec<&'a [u8]> {
    indices.iter().map(|&i| items[i as usize].as_ref()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocols::{Operation, Protocol, Role};
    use crate::staged::plan::{Buckets, Settings};
    use crate::staged::seed::RunSeed;

    fn plan(buckets: u32) -> Plan {
        let s = Settings {
            buckets: Buckets::Fixed(buckets),
            ..Settings::new("t", Protocol::Ecdh, Operation::Intersection)
        };
        let a = s.hello(Role::Sender, 1, &RunSeed::from_bytes([1; 32]));
        let b = s.hello(Role::Receiver, 1, &RunSeed::from_bytes([2; 32]));
        Plan::agree(&s, &a, &b).unwrap()
    }

    #[test]
    fn every_item_lands_in_one_bucket_in_order_and_buckets_are_balanced() {
        let p = plan(16);
        let items: Vec<String> = (0..32_000).map(|i| format!("user{i}@example.org")).collect();
        let buckets = assign(&p, &items);
        assert_eq!(buckets.len(), 16);
        let mut all: Vec<u32> = buckets.concat();
        all.sort_unstable();
        assert_eq!(all, (0..32_000).collect::<Vec<_>>(), "a partition of the items");
        for (b, list) in buckets.iter().enumerate() {
            assert!(list.windows(2).all(|w| w[0] < w[1]), "input order kept");
            assert!(list.iter().all(|&i| p.bucket_of(items[i as usize].as_bytes()) == b as u32));
            // 2000 expected per bucket; 6 standard deviations is ±270.
            assert!((1730..=2270).contains(&list.len()), "bucket {b}: {}", list.len());
        }
        assert_eq!(select(&items, &buckets[3])[0], items[buckets[3][0] as usize].as_bytes());
        assert_eq!(assign(&plan(1), &items)[0].len(), 32_000);
        assert_eq!(assign(&p, &items), buckets, "deterministic");
    }
}
