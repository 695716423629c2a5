//! Grouping indices by bucket with a counting sort: two passes, no comparison, stable.

/// The indices `0..buckets_of.len()` grouped by bucket (`buckets_of[i] < buckets`), in
/// index order within a bucket, and where each bucket's group starts (`buckets + 1`
/// offsets; bucket b is `order[starts[b]..starts[b + 1]]`).
pub fn group_by_bucket(buckets_of: &[u32], buckets: usize) -> (Vec<usize>, Vec<u32>) {
    let mut starts = vec![0usize; buckets + 1];
    for &b in buckets_of {
        starts[b as usize + 1] += 1;
    }
    for b in 1..=buckets {
        starts[b] += starts[b - 1];
    }
    let mut next = starts.clone();
    let mut order = vec![0u32; buckets_of.len()];
    for (i, &b) in buckets_of.iter().enumerate() {
        order[next[b as usize]] = i as u32;
        next[b as usize] += 1;
    }
    (starts, order)
}

/// `items` cut into the groups that `starts` delimits (as [`group_by_bucket`] gives
/// them), to be filled or sorted group by group in parallel.
pub fn split_groups<'a, T>(mut items: &'a mut [T], starts: &[usize]) -> Vec<&'a mut [T]> {
    let mut groups = Vec::with_capacity(starts.len().saturating_sub(1));
    for w in starts.windows(2) {
        let (group, rest) = items.split_at_mut(w[1] - w[0]);
        groups.push(group);
        items = rest;
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_the_buckets_in_index_order() {
        let of = [2, 0, 2, 1, 0, 2];
        let (starts, order) = group_by_bucket(&of, 4);
        assert_eq!(starts, [0, 2, 3, 6, 6]);
        assert_eq!(order, [1, 4, 3, 0, 2, 5]);
        assert_eq!(group_by_bucket(&[], 3), (vec![0; 4], vec![]));
        let mut items = [10, 11, 12, 13, 14, 15];
        let groups = split_groups(&mut items, &starts);
        assert_eq!(groups.iter().map(|g| g.len()).collect::<Vec<_>>(), [2, 1, 3, 0]);
        assert_eq!(groups[2], [13, 14, 15]);
    }
}
