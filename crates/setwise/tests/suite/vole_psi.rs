//! PSI from silent VOLE and OKVS: against the plain intersection, with `--reveal both`,
//! and against a peer that sends damaged messages.

use crate::common::{binary_and_long, items, overlapping_sets};
use proptest::prelude::*;
use setwise::error::Deviation;
use setwise::net::{Channel, MemoryChannel};
use setwise::protocols::vole::{MAX_SET, store_params, tag_bytes};
use setwise::protocols::{Context, Reveal, Role, Security, Security::SemiHonest};
use setwise::session::{self, Hello, Input, handshake};
use setwise::testing::{Tampering, run_items, run_over};
use setwise::{Error, Job, Operation, Outcome, Protocol};
use std::time::Duration;

fn job() -> Job {
    Job::new(Protocol::Vole, Operation::Intersection)
}

fn check(sender: &[Vec<u8>], receiver: &[Vec<u8>]) {
    crate::common::check_intersection(&job(), sender, receiver);
}

#[test]
fn edge_cases() {
    for (x, y) in crate::common::edge_cases() {
        check(&x, &y);
    }
}

#[test]
fn unequal_sizes_both_ways() {
    check(&items("x", 0..20_000), &items("x", 19_000..19_300));
    check(&items("x", 0..3), &items("x", 0..5_000));
}

#[test]
fn a_larger_run_matches_exactly() {
    // 2^17 each with half in common: enough rows for several GGM levels, OKVS chunks and
    // tag chunks that straddle records (10-byte tags).
    let (x, y) = (items("i", 0..1 << 17), items("i", 1 << 16..3 << 16));
    assert_eq!(tag_bytes(x.len(), y.len()), 10);
    check(&x, &y);
}

#[test]
fn binary_and_long_items() {
    let (x, y) = binary_and_long(30, 3_000);
    check(&x, &y);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn matches_plain((x, y) in overlapping_sets()) {
        check(&x, &y);
    }
}

#[test]
fn reveal_both_gives_the_sender_its_rows() {
    let (x, y) = (items("r", 0..3000), items("r", 2500..4000));
    let run = run_items(&job().with_reveal(Reveal::Both), &x, &y);
    let (Outcome::Intersection(s), _) = run.sender.unwrap() else { panic!("sender outcome") };
    let (Outcome::Intersection(r), _) = run.receiver.unwrap() else { panic!("receiver outcome") };
    assert_eq!(s, (2500..3000).collect::<Vec<_>>());
    assert_eq!(r, (0..500).collect::<Vec<_>>());
}

fn malicious() -> Job {
    job().with_security(Security::Malicious)
}

#[test]
fn the_malicious_variant_matches_the_plain_intersection() {
    for (x, y) in crate::common::edge_cases() {
        crate::common::check_intersection(&malicious(), &x, &y);
    }
    crate::common::check_intersection(&malicious(), &items("m", 0..20_000), &items("m", 19_000..19_300));
    crate::common::check_intersection(&malicious(), &items("m", 0..3), &items("m", 0..5_000));
    let (x, y) = binary_and_long(30, 3_000);
    crate::common::check_intersection(&malicious(), &x, &y);
    let run = run_items(&malicious().with_reveal(Reveal::Both), &items("r", 0..3000), &items("r", 2500..4000));
    let (Outcome::Intersection(s), _) = run.sender.unwrap() else { panic!("sender outcome") };
    assert_eq!(s, (2500..3000).collect::<Vec<_>>());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]
    #[test]
    fn the_malicious_variant_matches_plain((x, y) in overlapping_sets()) {
        crate::common::check_intersection(&malicious(), &x, &y);
    }
}

/// A malicious run where one side damages its first frame tagged `tag`: the error of
/// the side that refuses it.
fn damaged(role: Role, tag: u8) -> Error {
    let (x, y) = (items("d", 0..2000), items("d", 1000..3000));
    let (a, b) = MemoryChannel::pair(1 << 26);
    let nth = |r: Role| if r == role { 0 } else { usize::MAX };
    let run = run_over(
        &malicious(),
        Tampering::new(a, tag, nth(Role::Sender)),
        Tampering::new(b, tag, nth(Role::Receiver)),
        Input::Items(&x),
        Input::Items(&y),
    );
    match role {
        Role::Sender => run.receiver.unwrap_err(),
        _ => run.sender.unwrap_err(),
    }
}

#[test]
fn each_malicious_check_refuses_a_damaged_message() {
    for (role, tag, what) in [
        (Role::Sender, 0x96, "the sender's mask share failed its consistency check"),
        (Role::Sender, 0x97, "the sender's mask share failed its consistency check"),
        (Role::Sender, 0x92, "the sparse VOLE (punctured PRFs) failed its consistency check"),
        (Role::Sender, 0x9a, "the sparse VOLE (punctured PRFs) failed its consistency check"),
        (Role::Receiver, 0x98, "the noisy VOLE failed its consistency check"),
        (Role::Receiver, 0x65, "the OT extension matrix (KOS) failed its consistency check"),
        (Role::Sender, 0x61, "BaseOtPoints"),
    ] {
        let e = damaged(role, tag);
        assert!(e.to_string().contains(what), "{role} damaging {tag:#x}: {e}");
    }
}

#[test]
fn malicious_tags_are_16_bytes_and_the_protocol_claims_malicious_security() {
    assert_eq!(Protocol::Vole.security(), Security::Malicious);
    let (x, y) = (items("t", 0..1000), items("t", 0..1000));
    let semi = run_items(&job(), &x, &y);
    let mal = run_items(&malicious(), &x, &y);
    let bytes = |r: &setwise::testing::PairRun| r.sender.as_ref().unwrap().1.traffic.bytes_sent;
    // 1000 tags of 16 bytes against 8 (40 + 10 + 10 bits), plus the checks' few KiB.
    assert_eq!(tag_bytes(1000, 1000), 8);
    assert!(bytes(&mal) >= bytes(&semi) + 1000 * 8, "{} vs {}", bytes(&mal), bytes(&semi));
}

#[test]
fn tags_are_long_enough_for_the_sizes() {
    assert_eq!(tag_bytes(1, 1), 5); // 40 bits
    assert_eq!(tag_bytes(1 << 20, 1 << 20), 10); // 80 bits
    assert_eq!(tag_bytes(1 << 24, 1 << 24), 11); // 88 bits
    assert_eq!(tag_bytes(1 << 20, (1 << 20) + 1), 11); // rounded up
}

/// Scripted peer: the hello as `role` with `size` items, then `peer` with the agreed
/// context; the honest party (the other role, 10 items) runs against it.
fn against(role: Role, size: usize, peer: impl FnOnce(&mut MemoryChannel, Context) + Send) -> Error {
    let (a, b) = MemoryChannel::pair(1 << 26);
    let (mut a, mut b) = (a.with_timeout(Duration::from_secs(30)), b.with_timeout(Duration::from_secs(30)));
    let honest = if role == Role::Receiver { Role::Sender } else { Role::Receiver };
    std::thread::scope(|s| {
        s.spawn(move || {
            let hello = Hello::new("vole", "intersection", job().hello_params(), role, size);
            let Ok(ctx) = handshake(&mut b, &hello, u64::MAX) else { return };
            peer(&mut b, ctx); // then the channel closes
        });
        session::run(&mut a, &job(), honest, Input::Items(&items("h", 0..10))).unwrap_err()
    })
}

fn frame(tag: u8, records: &[[u8; 16]]) -> Vec<u8> {
    let mut m = vec![tag];
    m.extend_from_slice(&(records.len() as u32).to_le_bytes());
    records.iter().for_each(|r| m.extend_from_slice(r));
    m
}

/// A receiver of `n` items that runs the VOLE honestly, then sends the seed and `store`.
fn receiver_sending(n: usize, store: Vec<Vec<u8>>) -> Error {
    receiver_sending_seed(n, |_| [5; 16], store)
}

/// [`receiver_sending`] with the store's seed of `seed`.
fn receiver_sending_seed(n: usize, seed: impl FnOnce(&Context) -> [u8; 16] + Send, store: Vec<Vec<u8>>) -> Error {
    against(Role::Receiver, n, move |ch, ctx| {
        let m = store_params(n).columns;
        setwise::vole::silent_receive(ch, ctx.id, m).unwrap();
        let mut message = vec![0x93];
        message.extend_from_slice(&seed(&ctx));
        ch.send(&message).unwrap();
        for f in store {
            if ch.send(&f).is_err() {
                return;
            }
        }
    })
}

#[test]
fn a_store_of_the_wrong_size_is_refused() {
    let m = store_params(50).columns;
    let e = receiver_sending(50, vec![frame(0x94, &vec![[1; 16]; m + 1])]);
    assert!(e.to_string().contains("VolePsiStore"), "{e}");
    // Too few: the sender waits for the rest and then sees the peer go.
    let e = receiver_sending(50, vec![frame(0x94, &vec![[1; 16]; m - 1])]);
    assert!(matches!(e, Error::Net { .. } | Error::PeerAborted(_)), "{e}");
}

/// A seed equal to the value hash's AES key would make each key's OKVS row a function of
/// its value h(k) = AES(k) ⊕ k: the key holder refuses it before the store.
#[test]
fn a_store_seed_that_keys_the_value_hash_is_refused() {
    use setwise::crypto::dst::{self, Domain};
    let m = store_params(50).columns;
    let value_key =
        |ctx: &Context| Domain::new(dst::VOLE_PSI_VALUE, ctx.id).hash32(b"AES key")[..16].try_into().unwrap();
    let e = receiver_sending_seed(50, value_key, vec![frame(0x94, &vec![[1; 16]; m])]);
    assert!(e.to_string().contains("the store's seed failed its consistency check"), "{e}");
    assert!(matches!(e, Error::PeerMisbehaved(Deviation::FailedCheck { .. })), "{e}");
}

#[test]
fn a_truncated_or_mistagged_store_is_refused() {
    let m = store_params(50).columns;
    let mut f = frame(0x94, &vec![[1; 16]; m]);
    f.truncate(f.len() - 5);
    let e = receiver_sending(50, vec![f]);
    assert!(matches!(e, Error::Malformed(_)), "{e}");
    let e = receiver_sending(50, vec![frame(0x52, &vec![[1; 16]; m])]);
    assert!(matches!(e, Error::Malformed(_) | Error::PeerMisbehaved(_)), "{e}");
}

#[test]
fn a_damaged_pprf_message_is_refused() {
    // A sender that runs the noisy VOLE and the OT extension honestly, then sends one
    // punctured-PRF level sum more than the agreed trees and depth call for.
    use setwise::crypto::dst::{self, Domain, SessionId};
    use setwise::vole::{SilentParams, noisy};
    let e = against(Role::Sender, 10, |ch, ctx| {
        let sub = |w: &[u8]| SessionId(Domain::new(dst::VOLE_SUBSESSION, ctx.id).hash32(w));
        let p = SilentParams::for_outputs(store_params(10).columns).unwrap();
        noisy::noisy_send(ch, sub(b"noisy"), setwise::math::gf128::Gf128::ONE, p.trees, SemiHonest).unwrap();
        setwise::ot::extend_send(ch, sub(b"pprf"), p.trees * p.depth, SemiHonest).unwrap();
        ch.send(&frame(0x91, &vec![[0; 16]; 2 * p.trees * p.depth + 1])).unwrap();
    });
    assert!(e.to_string().contains("PprfLevelSums"), "{e}");
}

#[test]
fn too_many_tags_are_refused() {
    let e = against(Role::Sender, 10, |ch, ctx| {
        let vole = setwise::vole::silent_send(ch, ctx.id, store_params(10).columns).unwrap();
        drop(vole);
        let _seed = ch.recv().unwrap();
        let _store = ch.recv().unwrap();
        let due = (10 * tag_bytes(10, 10)).div_ceil(16);
        ch.send(&frame(0x95, &vec![[7; 16]; due + 1])).unwrap();
    });
    assert!(e.to_string().contains("VolePsiTags"), "{e}");
}

#[test]
fn announced_sizes_above_the_limit_are_refused_before_any_work() {
    let e = against(Role::Receiver, MAX_SET + 1, |_, _| {});
    // The peer's size, so the peer's doing (it was reported as a local Params error).
    let beyond = matches!(&e, Error::PeerMisbehaved(Deviation::BeyondLimit { limit: 67108864, .. }));
    assert!(beyond && !e.is_local(), "{e}");
}

#[test]
fn a_side_refuses_a_peer_above_its_cap_before_any_work() {
    // The server's cap: the receiver's 101 items are one more than the sender accepts.
    let (x, y) = (items("c", 0..10), items("c", 0..101));
    let (mut a, mut b) = MemoryChannel::pair(1 << 20);
    let (s, r) = std::thread::scope(|sc| {
        let s = sc.spawn(|| session::run(&mut a, &job().with_max_peer_size(100), Role::Sender, Input::Items(&x)));
        let r = session::run(&mut b, &job(), Role::Receiver, Input::Items(&y));
        (s.join().unwrap(), r)
    });
    let e = s.unwrap_err();
    assert!(
        matches!(&e, Error::PeerMisbehaved(setwise::error::Deviation::SetTooLarge { announced: 101, limit: 100 })),
        "{e}"
    );
    assert!(r.is_err());
    // At the cap, the run goes through.
    let y = items("c", 0..100);
    let (mut a, mut b) = MemoryChannel::pair(1 << 24);
    let (s, r) = std::thread::scope(|sc| {
        let s = sc.spawn(|| session::run(&mut a, &job().with_max_peer_size(100), Role::Sender, Input::Items(&x)));
        let r = session::run(&mut b, &job(), Role::Receiver, Input::Items(&y));
        (s.join().unwrap(), r)
    });
    s.unwrap();
    assert_eq!(r.unwrap().0, Outcome::Intersection((0..10).collect()));
}
