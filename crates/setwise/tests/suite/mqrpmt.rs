//! The mqRPMT core: the server's membership bits against the plain computation.

use crate::common::items;
use setwise::crypto::dst::SessionId;
use setwise::net::{Channel, MemoryChannel};
use setwise::protocols::mqrpmt::{self, Construction, LastMove, MqrpmtParams};
use setwise::protocols::{Context, Role};
use std::collections::HashSet;

/// Every construction with every last move it has.
fn all_params() -> [MqrpmtParams; 3] {
    let cwprf = |last_move| MqrpmtParams { construction: Construction::Cwprf, last_move };
    [cwprf(LastMove::Bloom), cwprf(LastMove::Shuffle), MqrpmtParams::of(Construction::Poprf)]
}

/// Runs server (Y) and client (X); checks e_i = [x_i ∈ Y] for every x_i; returns the
/// bytes the client sent.
fn check(y: &[Vec<u8>], x: &[Vec<u8>], params: MqrpmtParams) -> u64 {
    let id = SessionId([5; 32]);
    let server = Context { id, role: Role::Receiver, own_size: y.len(), peer_size: x.len() };
    let client = Context { id, role: Role::Sender, own_size: x.len(), peer_size: y.len() };
    let (mut a, mut b) = MemoryChannel::pair(1 << 26);
    let bits = std::thread::scope(|s| {
        s.spawn(move || mqrpmt::client(&mut b, &client, x, &params).unwrap());
        mqrpmt::server(&mut a, &server, y, &params).unwrap()
    });
    let sent = a.stats().bytes_received;
    let ys: HashSet<&Vec<u8>> = y.iter().collect();
    let plain: Vec<bool> = x.iter().map(|i| ys.contains(i)).collect();
    assert_eq!(bits, plain, "{params:?}, |Y| = {}, |X| = {}", y.len(), x.len());
    sent
}

#[test]
fn membership_bits_match_plain_for_every_construction_and_last_move() {
    for p in all_params() {
        check(&[], &[], p);
        check(&items("a", 0..10), &[], p);
        check(&[], &items("a", 0..10), p);
        check(&items("a", 0..100), &items("b", 0..100), p); // no overlap
        check(&items("a", 0..100), &items("a", 0..100), p); // full overlap
        check(&items("a", 0..3), &items("a", 0..5000), p); // very unequal, both ways
        check(&items("a", 0..5000), &items("a", 4990..5003), p);
        check(&items("a", 0..20_000), &items("a", 10_000..30_000), p); // several chunks
    }
}

#[test]
fn a_filter_over_several_frames() {
    // 150 000 server items: a 1.08 MB filter, more than one 1 MiB frame.
    check(&items("a", 0..150_000), &items("a", 149_990..150_010), MqrpmtParams::default());
}

#[test]
fn poprf_query_tags_over_many_records() {
    // 8-byte tags sent in four calls (3·2^14 + 5 items), the last record padded; then
    // 9-byte tags, which straddle records.
    let poprf = MqrpmtParams::of(Construction::Poprf);
    let (y, x) = (items("a", 0..100), items("a", 50..49_207));
    let sent = check(&y, &x, poprf);
    // 32 bytes per server item, 8 per client item (and 8 of padding), 9 bytes of frame
    // and chunk header in each of 5 frames; 32 per client item with cwPRF.
    assert_eq!(sent, 32 * 100 + 8 * 49_157 + 8 + 9 * 5);
    let cwprf = check(&y, &x, MqrpmtParams { construction: Construction::Cwprf, last_move: LastMove::Shuffle });
    assert_eq!(cwprf, 32 * 100 + 32 * 49_157 + 9 * 5);
    check(&items("a", 0..4096), &items("a", 4000..12_195), poprf);
}

#[test]
fn poprf_with_a_bloom_filter_is_refused_before_any_message() {
    let bad = MqrpmtParams { construction: Construction::Poprf, last_move: LastMove::Bloom };
    let id = SessionId([5; 32]);
    let ctx = Context { id, role: Role::Receiver, own_size: 1, peer_size: 1 };
    let (mut a, _b) = MemoryChannel::pair(1 << 10);
    let e = mqrpmt::server(&mut a, &ctx, &[b"a"], &bad).unwrap_err();
    assert!(e.to_string().contains("no Bloom-filter last move"), "{e}");
    assert_eq!(a.stats().messages_sent, 0);
}
