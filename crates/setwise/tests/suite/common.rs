//! Inputs shared by the protocol tests.

use proptest::prelude::*;

/// A pair of (sender, receiver) item lists.
pub type SetPair = (Vec<Vec<u8>>, Vec<Vec<u8>>);

/// `prefix` followed by each number of `range`.
pub fn items(prefix: &str, range: std::ops::Range<usize>) -> Vec<Vec<u8>> {
    range.map(|i| format!("{prefix}{i}").into_bytes()).collect()
}

/// The cases every two-party protocol must get right: empty sides, one item each (equal
/// and different), no overlap, full overlap.
pub fn edge_cases() -> Vec<SetPair> {
    vec![
        (vec![], vec![]),
        (items("a", 0..5), vec![]),
        (vec![], items("a", 0..5)),
        (items("a", 0..1), items("a", 0..1)),
        (items("a", 0..1), items("b", 0..1)),
        (items("a", 0..100), items("b", 0..100)),
        (items("a", 0..100), items("a", 0..100)),
    ]
}

/// `count` items of `len` bytes and `count` short binary items (with 0x00 and 0xff),
/// overlapping in part.
pub fn binary_and_long(count: u8, len: usize) -> SetPair {
    let long: Vec<Vec<u8>> = (0..count).map(|i| vec![i; len]).collect();
    let bin: Vec<Vec<u8>> = (0..count).map(|i| vec![0, i, 0xff]).collect();
    let half = usize::from(count / 2);
    ([long.clone(), bin[..half].to_vec()].concat(), [long[10.min(long.len())..].to_vec(), bin].concat())
}

/// Two sets of short lowercase strings around a shared part (up to 80 items each).
pub fn overlapping_sets() -> impl Strategy<Value = SetPair> {
    let set = |max| prop::collection::btree_set("[a-z]{1,6}", 0..max);
    (set(20), set(60), set(60)).prop_map(|(shared, xs, ys)| {
        let bytes = |s: &std::collections::BTreeSet<String>| -> Vec<Vec<u8>> {
            shared.union(s).map(|v| v.clone().into_bytes()).collect()
        };
        (bytes(&xs), bytes(&ys))
    })
}

/// Runs `job` (an intersection) on the two sets over the in-memory channel and checks
/// that the sender learns nothing, that the receiver's rows are the plain intersection,
/// and that the two sides count the same bytes.
pub fn check_intersection(job: &setwise::Job, sender: &[Vec<u8>], receiver: &[Vec<u8>]) {
    use setwise::Outcome;
    let run = setwise::testing::run_items(job, sender, receiver);
    let (s_out, s_rep) = run.sender.unwrap();
    let (r_out, r_rep) = run.receiver.unwrap();
    assert_eq!(s_out, Outcome::Nothing);
    let Outcome::Intersection(got) = r_out else { panic!("unexpected outcome {r_out:?}") };
    let got: std::collections::BTreeSet<usize> = got.into_iter().collect();
    assert_eq!(got, setwise::testing::plain_intersection(sender, receiver), "{r_rep}");
    assert_eq!(r_rep.traffic.bytes_sent, s_rep.traffic.bytes_received);
}
