//! `--protocol auto`: both sides name `auto`, agree on one protocol from the operation and
//! the sizes, and the result is the plain computation's.

use crate::common::items;
use setwise::protocols::Reveal;
use setwise::protocols::mqrpmt::{Construction, MqrpmtParams};
use setwise::session::Input;
use setwise::session::ProtocolParams;
use setwise::testing::{plain_intersection, run_items, run_pair};
use setwise::{Error, Job, Operation, Outcome, Protocol, Report, Security, SumTo};
use std::collections::BTreeSet;

fn chosen(r: &Report) -> &str {
    &r.protocol
}

#[test]
fn intersection_picks_by_size_and_matches_the_plain_one() {
    for (x, y, want) in [
        (items("a", 0..300), items("a", 200..400), "ecdh"),
        (items("a", 0..9000), items("a", 8000..8500), "vole"),
        (items("a", 0..10), items("a", 0..10_000), "vole"),
    ] {
        let run = run_items(&Job::new(Protocol::Auto, Operation::Intersection), &x, &y);
        let (s_out, s_rep) = run.sender.unwrap();
        let (r_out, r_rep) = run.receiver.unwrap();
        assert_eq!(s_out, Outcome::Nothing);
        let Outcome::Intersection(got) = r_out else { panic!("{r_out:?}") };
        assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), plain_intersection(&x, &y));
        assert_eq!((chosen(&s_rep), chosen(&r_rep)), (want, want));
        assert!(r_rep.details["protocol"].starts_with(&format!("{want}, chosen by auto")));
    }
}

#[test]
fn other_operations_go_to_the_protocol_that_has_them() {
    let (x, y) = (items("c", 0..500), items("c", 400..700));
    let run = run_items(&Job::new(Protocol::Auto, Operation::Cardinality), &x, &y);
    let (r_out, r_rep) = run.receiver.unwrap();
    assert_eq!((r_out, chosen(&r_rep)), (Outcome::Cardinality(100), "ecdh"));

    let run = run_items(&Job::new(Protocol::Auto, Operation::Union), &x, &y);
    let (Outcome::Union(extra), r_rep) = run.receiver.unwrap() else { panic!("union") };
    assert_eq!((extra.len(), chosen(&r_rep)), (400, "mqrpmt"));

    let values: Vec<u64> = (0..500).collect();
    let run = run_pair(
        &Job::new(Protocol::Auto, Operation::Sum),
        Input::Values { items: &x, values: &values, bound: 1000 },
        Input::Items(&y),
        None,
    );
    let (s_out, s_rep) = run.sender.unwrap();
    assert_eq!(s_out, Outcome::CardinalitySum { cardinality: 100, sum: (400..500).sum() });
    assert_eq!(chosen(&s_rep), "mqrpmt");

    // The sum given to the receiver: auto keeps who learns it when it resolves.
    let run = run_pair(
        &Job::new(Protocol::Auto, Operation::Sum).with_sum_to(SumTo::Receiver),
        Input::Values { items: &x, values: &values, bound: 1000 },
        Input::Items(&y),
        None,
    );
    let ((s_out, _), (r_out, r_rep)) = (run.sender.unwrap(), run.receiver.unwrap());
    assert_eq!((s_out, chosen(&r_rep)), (Outcome::Nothing, "mqrpmt"));
    assert_eq!(r_out, Outcome::CardinalitySum { cardinality: 100, sum: (400..500).sum() });
}

#[test]
fn the_union_of_a_larger_sender_runs_the_permuted_oprf_test() {
    let (x, y) = (items("p", 0..900), items("p", 800..1000));
    let run = run_items(&Job::new(Protocol::Auto, Operation::Union), &x, &y);
    let (Outcome::Union(extra), r_rep) = run.receiver.unwrap() else { panic!("union") };
    let want: BTreeSet<Vec<u8>> = x.iter().filter(|i| !y.contains(i)).cloned().collect();
    assert_eq!(extra.into_iter().collect::<BTreeSet<_>>(), want);
    assert_eq!(chosen(&r_rep), "mqrpmt");
    assert!(r_rep.details["protocol"].contains("permuted OPRF"), "{}", r_rep.details["protocol"]);
}

#[test]
fn malicious_security_runs_compact_or_vole_or_is_refused_on_both_sides() {
    let malicious = |op| Job::new(Protocol::Auto, op).with_security(Security::Malicious);
    for (n, protocol) in [(400, "compact"), (3000, "compact"), (5000, "vole")] {
        let (x, y) = (items("s", 0..n - 100), items("s", 250..n));
        let run = run_items(&malicious(Operation::Intersection), &x, &y);
        let (Outcome::Intersection(got), r_rep) = run.receiver.unwrap() else { panic!("intersection") };
        assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), plain_intersection(&x, &y));
        assert_eq!(chosen(&r_rep), protocol);
    }
    let (x, y) = (items("s", 0..300), items("s", 250..400));

    let run = run_items(&malicious(Operation::Union), &x, &y);
    for e in [run.sender.unwrap_err(), run.receiver.unwrap_err()] {
        assert!(e.to_string().contains("union with malicious security"), "{e}");
    }
    // One side asking for malicious security and the other not: refused in the hello.
    let (s, r) = run_jobs(&malicious(Operation::Intersection), &Job::new(Protocol::Auto, Operation::Intersection));
    for e in [s.unwrap_err(), r.unwrap_err()] {
        assert!(matches!(&e, Error::Mismatch { field: "parameters", .. }), "{e}");
    }
}

/// What one role's run gives.
type RoleResult = setwise::Result<(Outcome, Report)>;

/// A sender and a receiver of ten common items, each with its own job.
fn run_jobs(sender: &Job, receiver: &Job) -> (RoleResult, RoleResult) {
    let (x, y) = (items("m", 0..10), items("m", 0..10));
    let (mut a, mut b) = setwise::net::MemoryChannel::pair(1 << 20);
    std::thread::scope(|sc| {
        let s = sc.spawn(move || setwise::run(&mut a, sender, setwise::Role::Sender, Input::Items(&x)));
        let r = setwise::run(&mut b, receiver, setwise::Role::Receiver, Input::Items(&y));
        (s.join().unwrap(), r)
    })
}

#[test]
fn reveal_both_works_through_auto() {
    let (x, y) = (items("r", 0..9000), items("r", 8990..9100));
    let run = run_items(&Job::new(Protocol::Auto, Operation::Intersection).with_reveal(Reveal::Both), &x, &y);
    let (Outcome::Intersection(s), s_rep) = run.sender.unwrap() else { panic!("sender") };
    assert_eq!((s, chosen(&s_rep)), ((8990..9000).collect(), "vole"));
}

/// An `auto` side runs the protocol the peer names, with the peer's parameters, and its
/// report says so; the named side's report names its own protocol.
#[test]
fn auto_meets_a_peer_that_names_its_protocol() {
    let (x, y) = (items("m", 0..10), items("m", 0..10));
    let auto = |op| Job::new(Protocol::Auto, op);
    let poprf = Job::new(Protocol::Mqrpmt, Operation::Cardinality)
        .with_params(ProtocolParams::Mqrpmt(MqrpmtParams::of(Construction::Poprf)));
    let cases = [
        (auto(Operation::Intersection), Job::new(Protocol::Ecdh, Operation::Intersection), "ecdh"),
        (Job::new(Protocol::Vole, Operation::Intersection), auto(Operation::Intersection), "vole"),
        (poprf, auto(Operation::Cardinality), "mqrpmt"),
        (
            auto(Operation::Intersection).with_security(Security::Malicious),
            Job::new(Protocol::Compact, Operation::Intersection).with_security(Security::Malicious),
            "compact",
        ),
    ];
    for (sender, receiver, named) in cases {
        let (s, r) = run_jobs(&sender, &receiver);
        let ((_, s_rep), (out, r_rep)) = (s.unwrap(), r.unwrap());
        let want = plain_intersection(&x, &y);
        match out {
            Outcome::Intersection(got) => assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), want),
            Outcome::Cardinality(c) => assert_eq!(c, want.len() as u64),
            other => panic!("{other:?}"),
        }
        assert_eq!((chosen(&s_rep), chosen(&r_rep)), (named, named));
        let auto_report = if sender.protocol == Protocol::Auto { &s_rep } else { &r_rep };
        assert!(auto_report.details["protocol"].contains("named by the peer"), "{:?}", auto_report.details);
    }
}

/// Parameters that differ beyond the protocol's own (here the security) are a mismatch
/// on both sides, whichever side says `auto`.
#[test]
fn auto_and_a_named_protocol_must_agree_on_the_rest() {
    let malicious_auto = Job::new(Protocol::Auto, Operation::Intersection).with_security(Security::Malicious);
    let ecdh = Job::new(Protocol::Ecdh, Operation::Intersection);
    for (s, r) in [run_jobs(&malicious_auto, &ecdh), run_jobs(&ecdh, &malicious_auto)] {
        for e in [s.unwrap_err(), r.unwrap_err()] {
            assert!(matches!(&e, Error::Mismatch { field: "parameters", .. }), "{e}");
        }
    }
}
