//! DH-PSI against the plain set computation, over the in-memory channel.

use proptest::prelude::*;
use setwise::testing::{plain_intersection, run_pair};
use setwise::{Job, Operation, Outcome, Protocol};
use std::collections::BTreeSet;

fn items(prefix: &str, range: std::ops::Range<usize>) -> Vec<Vec<u8>> {
    range.map(|i| format!("{prefix}{i}").into_bytes()).collect()
}

/// Runs both roles and checks the receiver's output against the plain computation.
fn check(sender: &[Vec<u8>], receiver: &[Vec<u8>]) {
    let plain = plain_intersection(sender, receiver);
    for op in [Operation::Intersection, Operation::Cardinality] {
        let run = run_pair(&Job::new(Protocol::Ecdh, op), sender, receiver, None);
        let (s_out, s_rep) = run.sender.unwrap();
        let (r_out, r_rep) = run.receiver.unwrap();
        assert_eq!(s_out, Outcome::Nothing);
        match r_out {
            Outcome::Intersection(got) => {
                assert_eq!(op, Operation::Intersection);
                assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), plain);
            }
            Outcome::Cardinality(c) => {
                assert_eq!(op, Operation::Cardinality);
                assert_eq!(c as usize, plain.len());
            }
            other => panic!("unexpected outcome {other:?}"),
        }
        assert_eq!(r_rep.traffic.bytes_sent, s_rep.traffic.bytes_received);
        assert_eq!(r_rep.peer_set_size, sender.len());
    }
}

#[test]
fn edge_cases() {
    check(&[], &[]);
    check(&items("a", 0..5), &[]);
    check(&[], &items("a", 0..5));
    check(&items("a", 0..1), &items("a", 0..1));
    check(&items("a", 0..1), &items("b", 0..1));
    check(&items("a", 0..100), &items("b", 0..100)); // no overlap
    check(&items("a", 0..100), &items("a", 0..100)); // full overlap
    check(&items("a", 0..1), &items("a", 0..10_000));
    check(&items("a", 0..10_000), &items("a", 9_999..10_000));
}

#[test]
fn more_than_one_chunk_each_way() {
    check(&items("x", 0..40_000), &items("x", 20_000..60_000));
}

#[test]
fn binary_and_long_items() {
    let long: Vec<Vec<u8>> = (0..50u8).map(|i| vec![i; 5_000]).collect();
    let bin: Vec<Vec<u8>> = (0..50u8).map(|i| vec![0, i, 0xff]).collect();
    check(&[long.clone(), bin[..25].to_vec()].concat(), &[long[10..].to_vec(), bin.clone()].concat());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn matches_plain(shared in prop::collection::btree_set("[a-z]{1,6}", 0..20),
                     xs in prop::collection::btree_set("[a-z]{1,6}", 0..60),
                     ys in prop::collection::btree_set("[a-z]{1,6}", 0..60)) {
        let x: Vec<Vec<u8>> = shared.union(&xs).map(|s| s.clone().into_bytes()).collect();
        let y: Vec<Vec<u8>> = shared.union(&ys).map(|s| s.clone().into_bytes()).collect();
        check(&x, &y);
    }
}
