//! `reveal = both`: the sender learns the same result as the receiver, as the plain set
//! computation gives it, and a receiver that lies about it is caught where the sender
//! can check.

use setwise::net::{Channel, MemoryChannel};
use setwise::protocols::reveal::{REVEALED_DIGESTS, Revealed, digests};
use setwise::protocols::{Reveal, Role, ecdh};
use setwise::session::{self, Hello, Input, handshake};
use setwise::testing::{plain_intersection, run_items};
use setwise::wire::msg::Message;
use setwise::{Error, Job, Operation, Outcome, Protocol};
use std::collections::BTreeSet;

fn items(range: std::ops::Range<u32>) -> Vec<Vec<u8>> {
    range.map(|i| format!("row {i}, \"quoted\" ü").into_bytes()).collect()
}

#[test]
fn both_parties_learn_the_plain_result() {
    let (x, y) = (items(0..300), items(180..400));
    let want_sender = plain_intersection(&y, &x);
    let want_receiver = plain_intersection(&x, &y);
    let cases = [
        (Protocol::Ecdh, Operation::Intersection),
        (Protocol::Ecdh, Operation::Cardinality),
        (Protocol::Mqrpmt, Operation::Intersection),
        (Protocol::Mqrpmt, Operation::Cardinality),
        (Protocol::Fhe, Operation::Intersection),
        (Protocol::Compact, Operation::Intersection),
    ];
    for (p, op) in cases {
        // compact is for small sets.
        let (x, y) = if p == Protocol::Compact { (&x[..60], &y[..40]) } else { (&x[..], &y[..]) };
        let (want_s, want_r) = if p == Protocol::Compact {
            (plain_intersection(y, x), plain_intersection(x, y))
        } else {
            (want_sender.clone(), want_receiver.clone())
        };
        let job = Job::new(p, op).with_reveal(Reveal::Both);
        let run = run_items(&job, x, y);
        let (sender, report) = run.sender.unwrap_or_else(|e| panic!("{p} {op} sender: {e}"));
        let (receiver, _) = run.receiver.unwrap_or_else(|e| panic!("{p} {op} receiver: {e}"));
        match (sender, receiver) {
            (Outcome::Intersection(s), Outcome::Intersection(r)) => {
                assert_eq!(s.into_iter().collect::<BTreeSet<_>>(), want_s, "{p} sender");
                assert_eq!(r.into_iter().collect::<BTreeSet<_>>(), want_r, "{p} receiver");
            }
            (Outcome::Cardinality(s), Outcome::Cardinality(r)) => {
                assert_eq!((s, r), (want_s.len() as u64, want_r.len() as u64), "{p} {op}");
            }
            other => panic!("{p} {op}: {other:?}"),
        }
        assert!(report.phases.iter().any(|ph| ph.name == "learn the result"), "{p} {op}: the phase is reported");
    }
}

#[test]
fn the_sender_learns_nothing_unless_both_agree() {
    let (x, y) = (items(0..20), items(10..30));
    let run = run_items(&Job::new(Protocol::Ecdh, Operation::Intersection), &x, &y);
    assert_eq!(run.sender.unwrap().0, Outcome::Nothing);
    // One side asking for both is a parameter mismatch on both sides.
    let (mut a, mut b) = MemoryChannel::pair(1 << 20);
    let both = Job::new(Protocol::Ecdh, Operation::Intersection).with_reveal(Reveal::Both);
    let (s, r) = std::thread::scope(|sc| {
        let s = sc.spawn(|| session::run(&mut a, &both, Role::Sender, Input::Items(&x)));
        let r =
            session::run(&mut b, &Job::new(Protocol::Ecdh, Operation::Intersection), Role::Receiver, Input::Items(&y));
        (s.join().unwrap(), r)
    });
    for e in [s.unwrap_err(), r.unwrap_err()] {
        assert!(matches!(e, Error::Mismatch { field: "parameters", .. }), "{e}");
    }
}

/// A receiver that runs ecdh honestly, then sends what `lie` writes instead of the
/// result; returns the honest sender's error.
fn lying_receiver(
    op: Operation,
    lie: impl FnOnce(&mut MemoryChannel, &setwise::protocols::Context, &[Vec<u8>]),
) -> Error {
    let (x, y) = (items(0..50), items(40..60));
    let job = Job::new(Protocol::Ecdh, op).with_reveal(Reveal::Both);
    let (mut a, mut b) = MemoryChannel::pair(1 << 20);
    std::thread::scope(|s| {
        let sender = s.spawn(|| session::run(&mut a, &job, Role::Sender, Input::Items(&x)));
        let (p, o) = job.hello_names();
        let hello = Hello::new(p, o, job.hello_params(), Role::Receiver, y.len());
        let ctx = handshake(&mut b, &hello, u64::MAX).unwrap();
        ecdh::receiver(&mut b, &ctx, op, &y, &mut Default::default()).unwrap();
        lie(&mut b, &ctx, &y);
        let e = sender.join().unwrap().unwrap_err();
        drop(b);
        e
    })
}

#[test]
fn a_lying_receiver_is_caught_where_the_sender_can_check() {
    // An item the sender does not hold.
    let e = lying_receiver(Operation::Intersection, |ch, ctx, y| {
        Revealed(1).send(ch, "t").unwrap();
        REVEALED_DIGESTS.send(ch, &digests(ctx, y, &[19]), "t").unwrap();
    });
    assert!(e.to_string().contains("RevealedDigests: digest 0 is not an item"), "{e}");
    // The same item twice.
    let e = lying_receiver(Operation::Intersection, |ch, ctx, y| {
        let d = digests(ctx, y, &[0])[0];
        Revealed(2).send(ch, "t").unwrap();
        REVEALED_DIGESTS.send(ch, &[d, d], "t").unwrap();
    });
    assert!(e.to_string().contains("distinct"), "{e}");
    // More than the smaller set.
    let e = lying_receiver(Operation::Cardinality, |ch, _, _| Revealed(21).send(ch, "t").unwrap());
    assert!(e.to_string().contains("outside the possible range 0..=20"), "{e}");
    // Fewer digests than announced, then hanging up.
    let e = lying_receiver(Operation::Intersection, |ch, ctx, y| {
        Revealed(3).send(ch, "t").unwrap();
        REVEALED_DIGESTS.send(ch, &digests(ctx, y, &[0, 1]), "t").unwrap();
        ch.send(&[]).ok();
    });
    assert!(matches!(e, Error::Net { .. } | Error::Malformed(_) | Error::PeerMisbehaved(_)), "{e}");
}
