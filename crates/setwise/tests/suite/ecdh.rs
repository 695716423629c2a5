//! DH-PSI against the plain set computation, over the in-memory channel.

use crate::common::{binary_and_long, items, overlapping_sets};
use proptest::prelude::*;
use setwise::testing::run_items;
use setwise::{Job, Operation, Protocol};

/// Runs both roles and checks both outputs against the plain computation.
fn check(sender: &[Vec<u8>], receiver: &[Vec<u8>]) {
    for op in [Operation::Intersection, Operation::Cardinality] {
        let run = run_items(&Job::new(Protocol::Ecdh, op), sender, receiver);
        let (s_out, s_rep) = run.sender.unwrap();
        let (r_out, r_rep) = run.receiver.unwrap();
        crate::conformance::expect(op, s_out, r_out, sender, receiver, &[], &format!("ecdh {op}"));
        assert_eq!(r_rep.traffic.bytes_sent, s_rep.traffic.bytes_received);
        assert_eq!(r_rep.peer_set_size, sender.len());
    }
}

#[test]
fn edge_cases() {
    for (x, y) in crate::common::edge_cases() {
        check(&x, &y);
    }
    check(&items("a", 0..1), &items("a", 0..10_000));
    check(&items("a", 0..10_000), &items("a", 9_999..10_000));
}

#[test]
fn more_than_one_chunk_each_way() {
    check(&items("x", 0..40_000), &items("x", 20_000..60_000));
}

#[test]
fn binary_and_long_items() {
    let (x, y) = binary_and_long(50, 5_000);
    check(&x, &y);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn matches_plain((x, y) in overlapping_sets()) {
        check(&x, &y);
    }
}
