//! Compact malicious PSI (Rosulek–Trieu): against the plain intersection, and against a
//! cheating peer.

use crate::common::{binary_and_long, items, overlapping_sets};
use proptest::prelude::*;
use setwise::crypto::elligator::{Coins, representative, uniform_point};
use setwise::error::Deviation;
use setwise::net::{Channel, MemoryChannel};
use setwise::protocols::Role;
use setwise::session::{self, Hello, Input, handshake};
use setwise::testing::run_items;
use setwise::{Error, Job, Operation, Outcome, Protocol};
use std::time::Duration;

fn job() -> Job {
    Job::new(Protocol::Compact, Operation::Intersection)
}

fn check(sender: &[Vec<u8>], receiver: &[Vec<u8>]) {
    crate::common::check_intersection(&job(), sender, receiver);
}

#[test]
fn edge_cases() {
    // Includes n = 1, where the receiver pads its polynomial with a random point.
    for (x, y) in crate::common::edge_cases() {
        check(&x, &y);
    }
    check(&items("a", 0..2), &items("a", 1..2));
}

#[test]
fn unequal_sizes_both_ways() {
    check(&items("x", 0..4096), &items("x", 4000..4256)); // the paper's (2^12 sender, 2^8 receiver)
    check(&items("x", 0..3), &items("x", 0..700));
}

/// Past the thresholds of the O(n log² n) interpolation (2^9 points) and evaluation (2^10),
/// with the sender's points in one group and in several (a polynomial shorter than its
/// item list).
#[test]
fn sets_past_the_fast_polynomial_thresholds() {
    check(&items("x", 0..3000), &items("x", 1000..4200));
    check(&items("x", 0..5000), &items("x", 4000..5100));
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

/// The encoding a receiver sends for its keys: each bit of the 32-byte representatives
/// is set about half the time, and the decoded points are spread over the 8 cosets of the
/// prime-order subgroup (not all inside it, which would give the receiver away).
#[test]
fn encodings_look_uniform() {
    use curve25519_dalek::edwards::EdwardsPoint;
    use curve25519_dalek::scalar::Scalar;
    let (mut counts, mut samples, mut in_subgroup) = ([0u32; 256], 0u32, 0u32);
    for i in 0u64..6000 {
        let h = blake3::hash(&i.to_le_bytes());
        let b = Scalar::from_bytes_mod_order(*h.as_bytes());
        let coins = h.as_bytes()[31];
        let point = uniform_point(&EdwardsPoint::mul_base(&b), coins >> 3);
        let Some(rep) = representative(&point, Coins(coins)) else { continue };
        samples += 1;
        for (bit, c) in counts.iter_mut().enumerate() {
            *c += u32::from((rep[bit / 8] >> (bit % 8)) & 1);
        }
        let decoded = setwise::crypto::elligator::point_of(&rep).to_edwards(0).unwrap();
        in_subgroup += u32::from(decoded.is_torsion_free());
    }
    assert!(samples > 2500, "about half the points have representatives: {samples}");
    // Each bit: binomial(samples, 1/2); 5 standard deviations.
    let (mean, sd) = (f64::from(samples) / 2.0, (f64::from(samples) / 4.0).sqrt());
    for (bit, &c) in counts.iter().enumerate() {
        assert!((f64::from(c) - mean).abs() < 5.0 * sd, "bit {bit}: {c} of {samples}");
    }
    // 1/8 of uniform curve points lie in the subgroup.
    let frac = f64::from(in_subgroup) / f64::from(samples);
    assert!((0.09..0.16).contains(&frac), "fraction in the prime-order subgroup {frac}");
}

/// Runs an honest sender of 10 items against a scripted receiver of `receiver_size`
/// items that gets the frames after the hello.
fn against_receiver(receiver_size: usize, peer: impl FnOnce(&mut MemoryChannel) + Send) -> Error {
    let (a, b) = MemoryChannel::pair(1 << 24);
    let (mut a, mut b) = (a.with_timeout(Duration::from_secs(20)), b.with_timeout(Duration::from_secs(20)));
    std::thread::scope(|s| {
        s.spawn(move || {
            let hello = Hello::new("compact", "intersection", job().hello_params(), Role::Receiver, receiver_size);
            handshake(&mut b, &hello, u64::MAX).unwrap();
            if b.recv().unwrap()[0] == 0xff {
                return; // the sender refused before sending its key
            }
            peer(&mut b);
            let _ = b.recv(); // the sender's abort
        });
        session::run(&mut a, &job(), Role::Sender, Input::Items(&items("s", 0..10))).unwrap_err()
    })
}

fn polynomial(coeffs: &[[u8; 32]]) -> Vec<u8> {
    let mut m = vec![0x51];
    m.extend_from_slice(&(coeffs.len() as u32).to_le_bytes());
    coeffs.iter().for_each(|c| m.extend_from_slice(c));
    m
}

#[test]
fn a_constant_polynomial_is_rejected() {
    let mut c = [[0u8; 32]; 5];
    c[0] = [7; 32];
    c[0][15] = 0;
    c[0][31] = 0;
    let e = against_receiver(5, |ch| ch.send(&polynomial(&c)).unwrap());
    assert!(matches!(&e, Error::PeerMisbehaved(Deviation::ConstantPolynomial)), "{e}");
    // n = 1 still needs a non-constant polynomial of 2 coefficients.
    let e = against_receiver(1, |ch| ch.send(&polynomial(&c[..2])).unwrap());
    assert!(matches!(&e, Error::PeerMisbehaved(Deviation::ConstantPolynomial)), "{e}");
}

#[test]
fn a_short_or_long_polynomial_is_rejected() {
    for (announced, sent) in [(5, 4), (5, 6), (1, 1), (100, 1000)] {
        let c = vec![[1u8; 32]; sent];
        let e = against_receiver(announced, |ch| ch.send(&polynomial(&c)).unwrap());
        let want = Deviation::Count { what: "CompactPolynomial", got: sent as u64, expected: announced.max(2) as u64 };
        assert!(matches!(&e, Error::PeerMisbehaved(d) if *d == want), "{e}");
    }
}

#[test]
fn a_non_canonical_coefficient_is_rejected() {
    let mut c = vec![[1u8; 32]; 5];
    c[3] = [0xff; 32];
    let e = against_receiver(5, |ch| ch.send(&polynomial(&c)).unwrap());
    assert!(matches!(&e, Error::PeerMisbehaved(Deviation::NotCanonical { index: 3, .. })), "{e}");
}

#[test]
fn a_truncated_polynomial_is_rejected() {
    let mut m = polynomial(&[[1u8; 32]; 5]);
    m.truncate(m.len() - 3);
    let e = against_receiver(5, |ch| ch.send(&m).unwrap());
    assert!(matches!(e, Error::Malformed(_)), "{e}");
}

#[test]
fn announced_sizes_above_the_limit_are_refused_before_any_work() {
    let e = against_receiver(setwise::protocols::compact::MAX_SET + 1, |_| {});
    // The peer's size, so the peer's doing (it was reported as a local Params error).
    let beyond = matches!(&e, Error::PeerMisbehaved(Deviation::BeyondLimit { limit: 1_048_576, .. }));
    assert!(beyond && !e.is_local(), "{e}");
}

/// Runs an honest receiver of 10 items against a sender that sends `key` as its A.
fn receiver_against_key(key: [u8; 32]) -> Error {
    let (a, b) = MemoryChannel::pair(1 << 24);
    let (mut a, mut b) = (a.with_timeout(Duration::from_secs(20)), b.with_timeout(Duration::from_secs(20)));
    std::thread::scope(|s| {
        s.spawn(move || {
            let hello = Hello::new("compact", "intersection", job().hello_params(), Role::Sender, 10);
            handshake(&mut b, &hello, u64::MAX).unwrap();
            let mut m = vec![0x50];
            m.extend_from_slice(&key);
            b.send(&m).unwrap();
            let _ = b.recv();
        });
        session::run(&mut a, &job(), Role::Receiver, Input::Items(&items("r", 0..10))).unwrap_err()
    })
}

#[test]
fn bad_sender_keys_are_rejected() {
    use curve25519_dalek::constants::{ED25519_BASEPOINT_POINT, EIGHT_TORSION};
    let identity = EIGHT_TORSION[0].compress().0;
    let torsion = EIGHT_TORSION[1].compress().0;
    let mixed = (ED25519_BASEPOINT_POINT + EIGHT_TORSION[2]).compress().0;
    let mut not_on_curve = [0u8; 32];
    not_on_curve[0] = 2; // y = 2 has no x
    for key in [identity, torsion, mixed, not_on_curve] {
        let e = receiver_against_key(key);
        assert!(matches!(e, Error::InvalidPoint { what: "CompactKey", index: 0 }), "{e}");
    }
}

#[test]
fn wrong_number_of_tags_is_rejected() {
    // A sender that announces 10 items but sends 11 tags in one chunk.
    let (a, b) = MemoryChannel::pair(1 << 24);
    let (mut a, mut b) = (a.with_timeout(Duration::from_secs(20)), b.with_timeout(Duration::from_secs(20)));
    let e = std::thread::scope(|s| {
        s.spawn(move || {
            let hello = Hello::new("compact", "intersection", job().hello_params(), Role::Sender, 10);
            handshake(&mut b, &hello, u64::MAX).unwrap();
            let mut m = vec![0x50];
            m.extend_from_slice(curve25519_dalek::constants::ED25519_BASEPOINT_COMPRESSED.as_bytes());
            b.send(&m).unwrap();
            let _poly = b.recv().unwrap();
            let mut t = vec![0x52];
            t.extend_from_slice(&11u32.to_le_bytes());
            t.extend_from_slice(&[9u8; 11 * 32]);
            b.send(&t).unwrap();
            let _ = b.recv();
        });
        session::run(&mut a, &job(), Role::Receiver, Input::Items(&items("r", 0..10))).unwrap_err()
    });
    assert!(matches!(e, Error::Malformed(_)), "{e}");
}

#[test]
fn an_empty_side_stops_after_the_hello() {
    // A receiver that announces no items must not get the sender's key or tags: it could
    // otherwise send a 2-coefficient polynomial and test two items.
    for (x, y) in [(items("a", 0..5), vec![]), (vec![], items("a", 0..5))] {
        let run = run_items(&job(), &x, &y);
        let (_, s_rep) = run.sender.unwrap();
        let (r_out, r_rep) = run.receiver.unwrap();
        assert_eq!(r_out, Outcome::Intersection(vec![]));
        assert_eq!((s_rep.traffic.messages_sent, r_rep.traffic.messages_sent), (1, 1), "hello only");
    }
}
