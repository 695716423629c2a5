//! The mqRPMT operations end to end (hello, membership test, OT), each against the plain
//! set computation: intersection, cardinality, sum, shares, union and private-ID, with
//! either construction of the membership test (cwPRF, pOPRF).

use crate::common::{binary_and_long, items, overlapping_sets};
use crate::conformance::values_of;
use proptest::prelude::*;
use setwise::net::{Channel, DEFAULT_MAX_FRAME, Decorated, Decoration, MemoryChannel, NetError};
use setwise::protocols::Role;
use setwise::protocols::mqrpmt::{self, Construction, LastMove, MqrpmtParams, Values};
use setwise::session::{self, Hello, Input, ProtocolParams, handshake};
use setwise::{Error, Job, Operation, Outcome, Protocol, Result, SumTo};
use std::collections::BTreeSet;

/// Every operation of the protocol.
fn ops() -> &'static [Operation] {
    Protocol::Mqrpmt.operations()
}

/// cwPRF with the Bloom filter (the default) and pOPRF.
const CWPRF: MqrpmtParams = MqrpmtParams { construction: Construction::Cwprf, last_move: LastMove::Bloom };
const POPRF: MqrpmtParams = MqrpmtParams { construction: Construction::Poprf, last_move: LastMove::Shuffle };

fn job(op: Operation, params: MqrpmtParams) -> Job {
    Job::new(Protocol::Mqrpmt, op).with_params(ProtocolParams::Mqrpmt(params))
}

/// Runs sender (X, optional values) and receiver (Y); returns both outcomes.
fn run(
    op: Operation,
    params: MqrpmtParams,
    x: &[Vec<u8>],
    y: &[Vec<u8>],
    values: Option<Values<'_>>,
) -> (Result<Outcome>, Result<Outcome>) {
    run_tampered(job(op, params), x, y, values, Role::Receiver, |_| {})
}

/// Rewrites every frame a channel end sends: a hostile peer that otherwise follows the
/// protocol.
struct Edit<F>(F);

impl<F: FnMut(&mut Vec<u8>) + Send> Decoration for Edit<F> {
    fn send<C: Channel + ?Sized>(&mut self, inner: &mut C, frame: &[u8]) -> std::result::Result<(), NetError> {
        let mut f = frame.to_vec();
        (self.0)(&mut f);
        inner.send(&f)
    }
}

/// `job` as [`run`] runs it, with `edit` applied to every frame that `cheat` (the
/// sender or the receiver) sends.
fn run_tampered(
    job: Job,
    x: &[Vec<u8>],
    y: &[Vec<u8>],
    values: Option<Values<'_>>,
    cheat: Role,
    mut edit: impl FnMut(&mut Vec<u8>) + Send,
) -> (Result<Outcome>, Result<Outcome>) {
    let (a, b) = MemoryChannel::pair(DEFAULT_MAX_FRAME);
    let honest = |_: &mut Vec<u8>| {};
    let (mut a, mut b): (Box<dyn Channel>, Box<dyn Channel>) = if cheat == Role::Sender {
        (Box::new(Decorated::wrap(a, Edit(move |f: &mut Vec<u8>| edit(f)))), Box::new(Decorated::wrap(b, Edit(honest))))
    } else {
        (Box::new(Decorated::wrap(a, Edit(honest))), Box::new(Decorated::wrap(b, Edit(move |f: &mut Vec<u8>| edit(f)))))
    };
    std::thread::scope(|s| {
        let job = &job;
        let t = s.spawn(move || {
            let input = match values {
                Some(v) => Input::Values { items: x, values: v.values, bound: v.bound },
                None => Input::Items(x),
            };
            let r = session::run(&mut a, job, Role::Sender, input);
            drop(a);
            r.map(|(o, _)| o)
        });
        let r = session::run(&mut b, job, Role::Receiver, Input::Items(y));
        drop(b);
        (t.join().unwrap(), r.map(|(o, _)| o))
    })
}

/// Runs `op` and compares both parties' outputs with the plain computation
/// ([`crate::conformance::expect`], shared with every protocol's conformance suite).
fn check(op: Operation, params: MqrpmtParams, x: &[Vec<u8>], y: &[Vec<u8>]) {
    let values = values_of(x);
    let vals = (op == Operation::Sum).then_some(Values { values: &values, bound: u32::MAX as u64 });
    let (s, r) = run(op, params, x, y, vals);
    let what = format!("{op} {} {}, |X| = {}, |Y| = {}", params.construction, params.last_move, x.len(), y.len());
    let (s, r) = (s.unwrap_or_else(|e| panic!("{what}: sender: {e}")), r.unwrap_or_else(|e| panic!("{what}: {e}")));
    crate::conformance::expect(op, s, r, x, y, &values, &what);
}

/// Reverse PSI-card-sum: the receiver learns |X ∩ Y| and the sum of the sender's values
/// over it, the sender nothing; against the plain computation.
fn check_reverse_sum(params: MqrpmtParams, x: &[Vec<u8>], y: &[Vec<u8>]) {
    let values = values_of(x);
    let job = job(Operation::Sum, params).with_sum_to(SumTo::Receiver);
    let input = Some(Values { values: &values, bound: u32::MAX as u64 });
    let (s, r) = run_tampered(job, x, y, input, Role::Receiver, |_| {});
    let what = format!("reverse sum {}, |X| = {}, |Y| = {}", params.label(), x.len(), y.len());
    let ys: BTreeSet<&[u8]> = y.iter().map(Vec::as_slice).collect();
    let common: Vec<usize> = (0..x.len()).filter(|&i| ys.contains(x[i].as_slice())).collect();
    let sum: u128 = common.iter().map(|&i| u128::from(values[i])).sum();
    let want = Outcome::CardinalitySum { cardinality: common.len() as u64, sum };
    assert_eq!((s.unwrap(), r.unwrap()), (Outcome::Nothing, want), "{what}");
}

/// Every operation with each construction (cwPRF with its default Bloom filter, pOPRF),
/// and the sum given to the receiver.
fn check_all(x: &[Vec<u8>], y: &[Vec<u8>]) {
    for params in [CWPRF, POPRF] {
        for &op in ops() {
            check(op, params, x, y);
        }
        check_reverse_sum(params, x, y);
    }
}

#[test]
fn edge_cases_every_operation() {
    assert_eq!(ops().len(), 6, "Fig. 7 and §6.2: six operations");
    for (x, y) in crate::common::edge_cases() {
        check_all(&x, &y);
    }
}

#[test]
fn shuffle_last_move_every_operation() {
    for &op in ops() {
        check(op, MqrpmtParams { last_move: LastMove::Shuffle, ..CWPRF }, &items("a", 0..300), &items("a", 200..700));
    }
}

#[test]
fn very_unequal_sizes_both_ways() {
    check_all(&items("a", 0..3), &items("a", 0..5000));
    check_all(&items("a", 0..5000), &items("a", 4990..5003));
}

#[test]
fn several_chunks() {
    // Beyond one 2^14-item chunk and one OT-extension chunk on each side.
    check_all(&items("a", 0..20_000), &items("a", 15_000..35_000));
}

#[test]
fn binary_and_long_items() {
    let (x, y) = binary_and_long(40, 2_000);
    check_all(&x, &y);
    // Items on both sides of the one-byte length prefix.
    check_all(&[vec![1u8; 255], vec![2u8; 256], vec![3]], &[vec![2u8; 256], vec![3], vec![4; 300]]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]
    #[test]
    fn every_operation_matches_plain((x, y) in overlapping_sets()) {
        check_all(&x, &y);
    }
}

#[test]
fn sum_never_wraps_at_the_bound() {
    // Every value at the bound: the sum is n·bound, and the modulus must hold it.
    for bound in [1u64, 255, 256, u32::MAX as u64, u64::MAX] {
        let x = items("v", 0..1000);
        let values = vec![bound; x.len()];
        let (s, r) = run(Operation::Sum, CWPRF, &x, &x, Some(Values { values: &values, bound }));
        let want = Outcome::CardinalitySum { cardinality: 1000, sum: 1000 * bound as u128 };
        assert_eq!(s.unwrap(), want, "{bound}");
        assert_eq!(r.unwrap(), Outcome::Cardinality(1000));
        // Given to the receiver: the zero-sum masks wrap, the sum does not.
        let reverse = job(Operation::Sum, CWPRF).with_sum_to(SumTo::Receiver);
        let (s, r) = run_tampered(reverse, &x, &x, Some(Values { values: &values, bound }), Role::Receiver, |_| {});
        assert_eq!((s.unwrap(), r.unwrap()), (Outcome::Nothing, want), "reverse, {bound}");
    }
    assert_eq!(mqrpmt::sum_width(1, 255), 1);
    assert_eq!(mqrpmt::sum_width(2, 255), 2);
    assert_eq!(mqrpmt::sum_width(1 << 20, u32::MAX as u64), 7);
}

#[test]
fn sum_refuses_bad_values() {
    let x = items("v", 0..10);
    let values = vec![5u64; 10];
    let (s, r) = run(Operation::Sum, CWPRF, &x, &x, Some(Values { values: &values, bound: 4 }));
    assert!(s.unwrap_err().to_string().contains("exceeds the declared bound 4"));
    assert!(matches!(r.unwrap_err(), Error::PeerAborted(_)));
    let (s, _) = run(Operation::Sum, CWPRF, &x, &x, Some(Values { values: &values[..3], bound: 9 }));
    assert!(s.unwrap_err().to_string().contains("3 values for 10 items"));
}

/// A single share is uniformly random: every bit of the receiver's and the sender's
/// shares is set about half the time, in member and non-member rows alike (the items
/// themselves are all-ASCII, so a share that leaked them would fail).
#[test]
fn one_share_alone_looks_uniform() {
    let x = items("user", 0..4000);
    let y = items("user", 2000..6000);
    let (s, r) = run(Operation::Shares, POPRF, &x, &y, None);
    let (Outcome::Shares(ss), Outcome::Shares(rs)) = (s.unwrap(), r.unwrap()) else { panic!() };
    for (who, sh) in [("sender", &ss), ("receiver", &rs)] {
        let w = sh.codec.width();
        for member in [true, false] {
            let rows: Vec<usize> = (0..sh.rows()).filter(|&i| rs.members[i] == member).collect();
            assert_eq!(rows.len(), 2000);
            for bit in 0..8 * w {
                let ones = rows.iter().filter(|&&i| sh.share(i)[bit / 8] >> (bit % 8) & 1 == 1).count();
                // Binomial(2000, 1/2): sd ≈ 22.4; 6 sd over 8·w bits fails by chance < 10^-6.
                assert!((1000i64 - ones as i64).abs() < 135, "{who}, member {member}, bit {bit}: {ones} ones");
            }
        }
    }
}

/// Private-ID keys are fresh per session: the same items get unrelated IDs next time.
#[test]
fn private_ids_are_fresh_per_session() {
    let x = items("a", 0..50);
    let ids = || match run(Operation::PrivateId, CWPRF, &x, &x, None).0.unwrap() {
        Outcome::PrivateIds { own, .. } => own,
        o => panic!("{o:?}"),
    };
    let (a, b) = (ids(), ids());
    assert!(a.iter().all(|id| !b.contains(id)));
}

/// A hostile client: after a correct hello, it announces an impossible message width.
#[test]
fn receiver_refuses_bad_widths() {
    for (op, width) in [(Operation::Union, 0u32), (Operation::Shares, 257), (Operation::Sum, 17), (Operation::Sum, 0)] {
        let job = job(op, CWPRF);
        let (mut a, mut b) = MemoryChannel::pair(DEFAULT_MAX_FRAME);
        let err = std::thread::scope(|s| {
            let job = &job;
            s.spawn(move || {
                let hello = Hello::new("mqrpmt", op.name(), job.hello_params(), Role::Sender, 10);
                handshake(&mut a, &hello, u64::MAX).unwrap();
                let mut frame = vec![0x74];
                frame.extend_from_slice(&width.to_le_bytes());
                a.send(&frame).unwrap();
                let _ = a.recv(); // the abort
            });
            session::run(&mut b, job, Role::Receiver, Input::Items(&items("a", 0..10))).unwrap_err()
        });
        assert!(err.to_string().contains("MqrpmtWidth"), "{op} width {width}: {err}");
    }
}

/// A hostile server: the client's checks catch what they can see.
#[test]
fn clients_refuse_what_a_cheating_server_sends() {
    let (x, y) = (items("a", 0..300), items("a", 100..400));
    type Edit = Box<dyn FnMut(&mut Vec<u8>) + Send>;
    let cases: Vec<(Operation, &str, Edit)> = vec![
        // The union list out of order.
        (
            Operation::PrivateId,
            "not sorted",
            Box::new(|f: &mut Vec<u8>| {
                if f[0] == 0x78 && f.len() > 100 {
                    f[5..37].fill(0xff);
                }
            }),
        ),
        // A union count beyond |X| + |Y|.
        (
            Operation::PrivateId,
            "the union's size: 601 is outside the possible range 300..=600",
            Box::new(|f: &mut Vec<u8>| {
                if f[0] == 0x7a && f.len() == 9 {
                    f[1..9].copy_from_slice(&601u64.to_le_bytes());
                }
            }),
        ),
        // The store of OPRF A (the server evaluates its items) cut short.
        (
            Operation::PrivateId,
            "VolePsiStoreSeed",
            Box::new(|f: &mut Vec<u8>| {
                if f[0] == 0x93 {
                    f.pop();
                }
            }),
        ),
        // A cardinality larger than the client's set.
        (
            Operation::Sum,
            "the cardinality: 301 is outside the possible range 0..=300",
            Box::new(|f: &mut Vec<u8>| {
                if f[0] == 0x75 {
                    let n = f.len();
                    f[n - 8..].copy_from_slice(&301u64.to_le_bytes());
                }
            }),
        ),
        // A first-round point that is not a point.
        (
            Operation::Cardinality,
            "MqrpmtServerItems",
            Box::new(|f: &mut Vec<u8>| {
                if f[0] == 0x70 {
                    f[5..37].fill(0xff);
                }
            }),
        ),
    ];
    let values = vec![1u64; x.len()];
    for (op, want, edit) in cases {
        let v = (op == Operation::Sum).then_some(Values { values: &values, bound: 1 });
        let (s, _) = run_tampered(job(op, CWPRF), &x, &y, v, Role::Receiver, edit);
        let e = s.unwrap_err().to_string();
        assert!(e.contains(want), "{op}: {e}");
    }
}

/// A hostile client under pOPRF: the receiver checks the permuted points and the query
/// tags before it uses them.
#[test]
fn receiver_refuses_what_a_cheating_poprf_sender_sends() {
    // 301 client items: 8-byte tags, and the last record half padding.
    let (x, y) = (items("a", 0..301), items("a", 100..400));
    let count = |f: &[u8]| u32::from_le_bytes(f[1..5].try_into().unwrap());
    type Edit = Box<dyn FnMut(&mut Vec<u8>) + Send>;
    let cases: Vec<(&str, Edit)> = vec![
        // A permuted point that is not a point.
        (
            "MqrpmtShuffled",
            Box::new(|f: &mut Vec<u8>| {
                if f[0] == 0x71 {
                    f[5..37].fill(0xff);
                }
            }),
        ),
        // One record more than the tags fill.
        (
            "MqrpmtQueryTags",
            Box::new(move |f: &mut Vec<u8>| {
                if f[0] == 0x7b {
                    let n = count(f) + 1;
                    f[1..5].copy_from_slice(&n.to_le_bytes());
                    f.extend_from_slice(&[0; 16]);
                }
            }),
        ),
        // A record cut short.
        (
            "MqrpmtQueryTags",
            Box::new(|f: &mut Vec<u8>| {
                if f[0] == 0x7b {
                    f.pop();
                }
            }),
        ),
        // Bytes after the last tag.
        (
            "MqrpmtQueryTags: invalid value (non-zero padding after the last tag)",
            Box::new(|f: &mut Vec<u8>| {
                if f[0] == 0x7b {
                    *f.last_mut().unwrap() = 1;
                }
            }),
        ),
    ];
    for (want, edit) in cases {
        let (_, r) = run_tampered(job(Operation::Cardinality, POPRF), &x, &y, None, Role::Sender, edit);
        let e = r.unwrap_err().to_string();
        assert!(e.contains(want), "{want}: {e}");
    }
    // Tags that match nothing are no error: they only make the membership bits wrong.
    let (_, r) = run_tampered(job(Operation::Cardinality, POPRF), &x, &y, None, Role::Sender, |f: &mut Vec<u8>| {
        if f[0] == 0x7b {
            f[5..].iter_mut().for_each(|b| *b ^= 0x5a);
            let n = f.len();
            f[n - 8..].fill(0); // keep the padding
        }
    });
    assert_eq!(r.unwrap(), Outcome::Cardinality(0));
}

/// Given to the receiver, the sum never reaches the sender: the receiver sends no masked
/// sum (tag 0x75) back, and a sender that meets a peer giving the sum the other way is
/// refused before any item is touched, by both sides.
#[test]
fn the_reverse_sum_stays_with_the_receiver_and_both_must_ask_for_it() {
    let (x, y) = (items("a", 0..300), items("a", 100..400));
    let values = values_of(&x);
    let v = Some(Values { values: &values, bound: u32::MAX as u64 });
    let mut tags = Vec::new();
    let reverse = job(Operation::Sum, POPRF).with_sum_to(SumTo::Receiver);
    let (s, r) = run_tampered(reverse.clone(), &x, &y, v, Role::Receiver, |f: &mut Vec<u8>| tags.push(f[0]));
    assert_eq!(s.unwrap(), Outcome::Nothing);
    assert!(matches!(r.unwrap(), Outcome::CardinalitySum { cardinality: 200, .. }));
    assert!(!tags.is_empty() && !tags.contains(&0x75), "{tags:x?}");
    for (sender, receiver) in [(job(Operation::Sum, POPRF), reverse.clone()), (reverse, job(Operation::Sum, POPRF))] {
        let (mut a, mut b) = MemoryChannel::pair(DEFAULT_MAX_FRAME);
        let (s, r) = std::thread::scope(|sc| {
            let input = Input::Values { items: &x, values: &values, bound: u32::MAX as u64 };
            let t = sc.spawn(|| session::run(&mut a, &sender, Role::Sender, input));
            let r = session::run(&mut b, &receiver, Role::Receiver, Input::Items(&y));
            (t.join().unwrap(), r)
        });
        for e in [s.unwrap_err().to_string(), r.unwrap_err().to_string()] {
            assert!(e.contains("sum_to=receiver"), "{e}");
        }
    }
}

/// A reverse sum whose messages were damaged on the way is refused by the receiver,
/// naming the sum and the largest an honest sender's values could add up to: here every
/// message's top bit is flipped, which adds 2^(8w−1) to an odd number of messages' total.
#[test]
fn a_reverse_sum_beyond_what_the_values_allow_is_refused() {
    let (x, y) = (items("a", 0..1001), items("a", 1000..2000));
    let values = values_of(&x);
    let w = mqrpmt::sum_width(x.len(), u32::MAX as u64);
    let flip = move |f: &mut Vec<u8>| {
        if f[0] == 0x63 {
            for record in f[5..].chunks_mut(2 * w) {
                record[w - 1] ^= 0x80;
                record[2 * w - 1] ^= 0x80;
            }
        }
    };
    let reverse = job(Operation::Sum, CWPRF).with_sum_to(SumTo::Receiver);
    let v = Some(Values { values: &values, bound: u32::MAX as u64 });
    let (s, r) = run_tampered(reverse, &x, &y, v, Role::Sender, flip);
    assert_eq!(s.unwrap(), Outcome::Nothing, "the sender's part ends with the OT");
    let e = r.unwrap_err().to_string();
    let max = (u128::MAX >> (128 - 8 * w)) / 1001;
    assert!(e.contains("the sum") && e.contains(&format!("0..={max}")), "{e}");
}

/// The two constructions do not meet: the hello names each side's.
#[test]
fn both_sides_must_name_the_same_construction() {
    let (x, y) = (items("a", 0..10), items("a", 5..15));
    let (mut a, mut b) = MemoryChannel::pair(DEFAULT_MAX_FRAME);
    let (s, r) = std::thread::scope(|sc| {
        let t = sc.spawn(|| session::run(&mut a, &job(Operation::Cardinality, CWPRF), Role::Sender, Input::Items(&x)));
        let r = session::run(&mut b, &job(Operation::Cardinality, POPRF), Role::Receiver, Input::Items(&y));
        (t.join().unwrap(), r)
    });
    for e in [s.unwrap_err().to_string(), r.unwrap_err().to_string()] {
        assert!(e.contains("rpmt=poprf") && e.contains("rpmt=cwprf"), "{e}");
    }
}

/// `--reveal both` with pOPRF: the sender learns the receiver's result too.
#[test]
fn reveal_both_with_poprf() {
    use setwise::protocols::Reveal;
    use setwise::testing::{plain_intersection, run_items};
    let (x, y) = (items("a", 0..300), items("a", 180..400));
    for op in [Operation::Intersection, Operation::Cardinality] {
        let run = run_items(&job(op, POPRF).with_reveal(Reveal::Both), &x, &y);
        let (s, r) = (run.sender.unwrap().0, run.receiver.unwrap().0);
        let (want_s, want_r) = (plain_intersection(&y, &x), plain_intersection(&x, &y));
        match (s, r) {
            (Outcome::Intersection(s), Outcome::Intersection(r)) => {
                assert_eq!(s.into_iter().collect::<BTreeSet<_>>(), want_s);
                assert_eq!(r.into_iter().collect::<BTreeSet<_>>(), want_r);
            }
            (Outcome::Cardinality(s), Outcome::Cardinality(r)) => assert_eq!((s, r), (120, 120)),
            other => panic!("{op}: {other:?}"),
        }
    }
}
