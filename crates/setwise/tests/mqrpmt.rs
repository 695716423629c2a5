//! The mqRPMT core: the server's membership bits against the plain computation.

mod common;

use common::items;
use setwise::crypto::dst::SessionId;
use setwise::net::MemoryChannel;
use setwise::protocols::mqrpmt::{self, LastMove};
use setwise::protocols::{Context, Role};
use std::collections::HashSet;

/// Runs server (Y) and client (X); checks e_i = [x_i ∈ Y] for every x_i.
fn check(y: &[Vec<u8>], x: &[Vec<u8>], last: LastMove) {
    let id = SessionId([5; 32]);
    let server = Context { id, role: Role::Receiver, own_size: y.len(), peer_size: x.len() };
    let client = Context { id, role: Role::Sender, own_size: x.len(), peer_size: y.len() };
    let (mut a, mut b) = MemoryChannel::pair(1 << 26);
    let bits = std::thread::scope(|s| {
        s.spawn(move || mqrpmt::client(&mut b, &client, x, last).unwrap());
        mqrpmt::server(&mut a, &server, y, last).unwrap()
    });
    let ys: HashSet<&Vec<u8>> = y.iter().collect();
    let plain: Vec<bool> = x.iter().map(|i| ys.contains(i)).collect();
    assert_eq!(bits, plain, "{last:?}, |Y| = {}, |X| = {}", y.len(), x.len());
}

#[test]
fn membership_bits_match_plain_for_both_last_moves() {
    for last in [LastMove::Bloom, LastMove::Shuffle] {
        check(&[], &[], last);
        check(&items("a", 0..10), &[], last);
        check(&[], &items("a", 0..10), last);
        check(&items("a", 0..100), &items("b", 0..100), last); // no overlap
        check(&items("a", 0..100), &items("a", 0..100), last); // full overlap
        check(&items("a", 0..3), &items("a", 0..5000), last); // very unequal, both ways
        check(&items("a", 0..5000), &items("a", 4990..5003), last);
        check(&items("a", 0..20_000), &items("a", 10_000..30_000), last); // several chunks
    }
}

#[test]
fn a_filter_over_several_frames() {
    // 150 000 server items: a 1.08 MB filter, more than one 1 MiB frame.
    check(&items("a", 0..150_000), &items("a", 149_990..150_010), LastMove::Bloom);
}
