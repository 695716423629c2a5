//! Which of one party's pseudorandom tags are among the tags a peer sends: a
//! partitioned join.
//!
//! A hash table of 2^24 tags is larger than the caches, so every look-up of a peer's tag
//! misses them. Instead both sides' tags are grouped by their low bits into groups of a
//! few thousand (the own tags once, the peer's as they arrive), and each group is sorted
//! and merged with its counterpart in the caches, the groups on all threads. Tags must be
//! uniformly random in their low bits (hash outputs), or the groups are uneven.

use rayon::prelude::*;

/// Own tags per group on average.
const GROUP: usize = 1 << 12;

/// The own tags, grouped, and the peer's tags gathered so far.
pub struct TagJoin {
    /// Groups are the low `bits` bits of a tag.
    bits: u32,
    /// Own tags, group after group.
    own: Vec<u128>,
    /// The index of each of `own` (tags and indices apart: a pair would pad to 32 bytes).
    index: Vec<u32>,
    /// Where each group of `own` starts (groups + 1 entries).
    starts: Vec<usize>,
    /// The peer's tags, per group.
    theirs: Vec<Vec<u128>>,
}

impl TagJoin {
    /// Groups the own `tags` (tag j reported as index `ids[j]`) for about `peer` tags of
    /// the peer's to be matched against.
    pub fn new(tags: Vec<u128>, ids: Vec<u32>, peer: usize) -> Self {
        assert_eq!(tags.len(), ids.len(), "an index per tag");
        let bits = (tags.len() / GROUP).max(1).next_power_of_two().ilog2();
        let group_of: Vec<u32> = tags.par_iter().map(|&t| (t & ((1 << bits) - 1)) as u32).collect();
        let (starts, mut index) = super::buckets::group_by_bucket(&group_of, 1 << bits);
        drop(group_of);
        let own = index.par_iter().map(|&j| tags[j as usize]).collect();
        drop(tags);
        index.par_iter_mut().for_each(|j| *j = ids[*j as usize]);
        // Room for a group's share of the peer's tags and a few σ more, so that groups
        // rarely grow while tags arrive.
        let share = peer >> bits;
        let room = share + 4 * share.isqrt() + 16;
        Self { bits, own, index, starts, theirs: (0..1 << bits).map(|_| Vec::with_capacity(room)).collect() }
    }

    /// Adds one of the peer's tags.
    pub fn add(&mut self, tag: u128) {
        self.theirs[(tag & ((1 << self.bits) - 1)) as usize].push(tag);
    }

    /// The indices of the own tags that the peer sent, in increasing order.
    pub fn matches(self) -> Vec<usize> {
        let Self { own, index, starts, theirs, .. } = self;
        let mut found: Vec<usize> = theirs
            .into_par_iter()
            .enumerate()
            .flat_map_iter(|(g, mut theirs)| {
                let span = starts[g]..starts[g + 1];
                let mut mine: Vec<(u128, u32)> =
                    own[span.clone()].iter().copied().zip(index[span].iter().copied()).collect();
                mine.sort_unstable();
                theirs.sort_unstable();
                let mut hits = Vec::new();
                let (mut i, mut j) = (0, 0);
                while i < mine.len() && j < theirs.len() {
                    match mine[i].0.cmp(&theirs[j]) {
                        std::cmp::Ordering::Less => i += 1,
                        std::cmp::Ordering::Greater => j += 1,
                        std::cmp::Ordering::Equal => {
                            hits.push(mine[i].1 as usize);
                            i += 1;
                        }
                    }
                }
                hits
            })
            .collect();
        found.par_sort_unstable();
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_exactly_the_own_tags_the_peer_sent() {
        let mut state = 0x2545_f491_4f6c_dd1du128;
        let mut next = || {
            state = state.wrapping_mul(0x2360_ed05_1fc6_5da4_4385_df64_9fcc_f645).wrapping_add(1);
            state ^ (state >> 67)
        };
        for n in [0, 1, 100, 5 * GROUP + 3] {
            let own: Vec<u128> = (0..n).map(|_| next()).collect();
            // Reported by their position in a reversed list: the indices are the caller's.
            let ids = (0..n as u32).rev().collect();
            let mut join = TagJoin::new(own.iter().rev().copied().collect(), ids, 3 * n);
            let mut want = Vec::new();
            for (i, t) in own.iter().enumerate() {
                if i % 3 == 0 {
                    join.add(*t);
                    join.add(*t); // a repeated tag matches once
                    want.push(i);
                }
                join.add(next());
            }
            assert_eq!(join.matches(), want, "n = {n}");
        }
    }
}
