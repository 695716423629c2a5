//! One conformance suite for every protocol of the registry: each spec in
//! [`registry::ALL`], with each of its two-party operations, runs the same correctness,
//! edge-case and hostile-peer tests. The inputs each role brings come from the spec
//! ([`Spec::takes`]); what each side must learn comes from the plain set computation
//! ([`expect`]), the same function the per-family suites use for their own cases.
//!
//! A new protocol in the registry is tested here without a line of this file changing.

use crate::common::{binary_and_long, items};
use setwise::net::{Channel, Decorated, Decoration, MemoryChannel, NetError};
use setwise::protocols::authorized::{AllowList, Credentials, JudgeConfig, JudgeKey, Mode};
use setwise::protocols::mqrpmt::Shares;
use setwise::protocols::registry::ALL;
use setwise::protocols::spec::{Spec, Takes};
use setwise::protocols::unbalanced::SenderDb;
use setwise::protocols::{Operation, Outcome, Role};
use setwise::session::{self, Hello, Input, Job, handshake};
use setwise::{Error, Result};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::Duration;

/// The largest value of a `sum` (the paper's setting: 32-bit values).
const BOUND: u64 = u32::MAX as u64;

/// What the two sides of one run bring, built from the spec: the jobs (an authorised
/// intersection's jobs name the judge's key) and whatever a role takes beyond items.
struct Prepared {
    sender_job: Job,
    receiver_job: Job,
    values: Vec<u64>,
    database: Option<SenderDb>,
    credentials: Option<Credentials>,
}

/// A value per item derived from the item, up to 2^32 − 1.
pub fn values_of(x: &[Vec<u8>]) -> Vec<u64> {
    x.iter().map(|i| u64::from(u32::from_le_bytes(blake3::hash(i).as_bytes()[..4].try_into().unwrap()))).collect()
}

/// The operations of `spec` between two parties (an authorisation has a judge).
fn two_party_operations(spec: &Spec) -> impl Iterator<Item = Operation> + '_ {
    spec.operations.iter().copied().filter(|op| *op != Operation::Authorize)
}

/// Every spec with every two-party operation.
fn every_protocol_and_operation() -> Vec<(&'static Spec, Operation)> {
    ALL.iter().flat_map(|s| two_party_operations(s).map(move |op| (*s, op))).collect()
}

/// The authorisation mode whose protocol is `spec`'s, if it has one.
fn mode_of(spec: &'static Spec) -> Option<Mode> {
    Mode::of(spec.protocol())
}

/// Credentials from a judge that allows every item of `y`.
fn authorize(mode: Mode, key: &JudgeKey, y: &[Vec<u8>]) -> Credentials {
    let (mut a, mut b) = MemoryChannel::pair(1 << 24);
    let allow = AllowList::new(y);
    std::thread::scope(|s| {
        s.spawn(move || {
            let config = JudgeConfig { fraction: 1.0, strict: false };
            let input: Input = Input::Judge { key, policy: &allow, config };
            let _ = session::run(&mut a, &Job::new(mode.protocol(), Operation::Authorize), Role::Judge, input);
        });
        match session::run(&mut b, &Job::authorize(mode, b"client"), Role::Receiver, Input::Items(y)) {
            Ok((Outcome::Credentials { credentials, .. }, _)) => *credentials,
            other => panic!("authorisation: {other:?}"),
        }
    })
}

fn prepare(spec: &'static Spec, op: Operation, x: &[Vec<u8>], y: &[Vec<u8>]) -> Prepared {
    let (mut sender_job, mut receiver_job) = (Job::new(spec.protocol(), op), Job::new(spec.protocol(), op));
    let mut prepared = Prepared {
        sender_job: sender_job.clone(),
        receiver_job: receiver_job.clone(),
        values: vec![],
        database: None,
        credentials: None,
    };
    for role in [Role::Sender, Role::Receiver] {
        match spec.takes(op, role) {
            Takes::Items => {}
            Takes::Values => prepared.values = values_of(if role == Role::Sender { x } else { y }),
            Takes::Database => {
                let db = SenderDb::build(x, setwise::testing::small_unbalanced_params(), "conformance");
                prepared.database =
                    Some(db.unwrap_or_else(|e| panic!("{}: database of {} items: {e}", spec.name, x.len())));
            }
            Takes::Credentials => {
                let mode = mode_of(spec).expect("a protocol whose client brings credentials has a mode");
                let key = JudgeKey::generate();
                let credentials = authorize(mode, &key, y);
                sender_job = Job::authorized(spec.protocol(), b"client", *key.public());
                receiver_job = Job::authorized(spec.protocol(), &credentials.client_id, credentials.judge_pk);
                prepared.credentials = Some(credentials);
            }
            Takes::Judge => panic!("{}: {op} has a judge, not two parties", spec.name),
        }
    }
    prepared.sender_job = sender_job;
    prepared.receiver_job = receiver_job;
    prepared
}

impl Prepared {
    fn job(&self, role: Role) -> &Job {
        if role == Role::Sender { &self.sender_job } else { &self.receiver_job }
    }

    fn input<'a>(&'a self, spec: &'static Spec, op: Operation, role: Role, items: &'a [Vec<u8>]) -> Input<'a> {
        match spec.takes(op, role) {
            Takes::Items => Input::Items(items),
            Takes::Values => Input::Values { items, values: &self.values, bound: BOUND },
            Takes::Database => Input::Database(self.database.as_ref().expect("prepared")),
            Takes::Credentials => {
                Input::Credentials { items, credentials: self.credentials.as_ref().expect("prepared") }
            }
            Takes::Judge => unreachable!("refused in prepare"),
        }
    }
}

/// Both roles of `op` over the channel ends `a` (sender, holding `x`) and `b` (receiver,
/// holding `y`); each side's outcome with what `look` reads off its channel end before
/// the end is dropped (which tells the peer the run is over).
fn pair<C: Channel, T: Send>(
    spec: &'static Spec,
    op: Operation,
    p: &Prepared,
    (mut a, mut b): (C, C),
    x: &[Vec<u8>],
    y: &[Vec<u8>],
    look: impl Fn(&C) -> T + Sync,
) -> ((Result<Outcome>, T), (Result<Outcome>, T)) {
    let side = |ch: &mut C, role: Role, items: &[Vec<u8>]| {
        let r = session::run(ch, p.job(role), role, p.input(spec, op, role, items)).map(|(o, _)| o);
        (r, look(ch))
    };
    std::thread::scope(|s| {
        let sender = s.spawn(|| {
            let out = side(&mut a, Role::Sender, x);
            drop(a);
            out
        });
        let out = side(&mut b, Role::Receiver, y);
        drop(b);
        (sender.join().expect("the sender never panics"), out)
    })
}

/// Two in-memory channel ends that give up after `secs` seconds of silence.
fn channel_pair(secs: u64) -> (MemoryChannel, MemoryChannel) {
    let (a, b) = MemoryChannel::pair(64 << 20);
    (a.with_timeout(Duration::from_secs(secs)), b.with_timeout(Duration::from_secs(secs)))
}

/// Runs `op` of `spec`: the sender holds `x`, the receiver `y`.
fn run(spec: &'static Spec, op: Operation, x: &[Vec<u8>], y: &[Vec<u8>]) -> (Result<Outcome>, Result<Outcome>) {
    let p = prepare(spec, op, x, y);
    let ((s, ()), (r, ())) = pair(spec, op, &p, channel_pair(60), x, y, |_| ());
    (s, r)
}

fn set(v: &[Vec<u8>]) -> HashSet<&[u8]> {
    v.iter().map(Vec::as_slice).collect()
}

/// Checks both parties' outcomes of `op` against the plain set computation: the sender
/// holds `x` (with `values` for `sum`), the receiver `y`.
pub fn expect(op: Operation, s: Outcome, r: Outcome, x: &[Vec<u8>], y: &[Vec<u8>], values: &[u64], what: &str) {
    let (xs, ys) = (set(x), set(y));
    let plain: Vec<usize> = (0..y.len()).filter(|&j| xs.contains(y[j].as_slice())).collect();
    match op {
        Operation::Intersection => {
            assert_eq!((s, r), (Outcome::Nothing, Outcome::Intersection(plain)), "{what}");
        }
        Operation::Cardinality => {
            assert_eq!((s, r), (Outcome::Nothing, Outcome::Cardinality(plain.len() as u64)), "{what}");
        }
        Operation::Sum => {
            let sum: u128 =
                x.iter().zip(values).filter(|(i, _)| ys.contains(i.as_slice())).map(|(_, &v)| v as u128).sum();
            let c = plain.len() as u64;
            assert_eq!((s, r), (Outcome::CardinalitySum { cardinality: c, sum }, Outcome::Cardinality(c)), "{what}");
        }
        Operation::Union => {
            assert_eq!(s, Outcome::Nothing, "{what}");
            let Outcome::Union(extra) = r else { panic!("{what}: {r:?}") };
            let got: BTreeSet<&[u8]> = extra.iter().map(Vec::as_slice).collect();
            assert_eq!(got.len(), extra.len(), "{what}: repeated items");
            let want: BTreeSet<&[u8]> = x.iter().map(Vec::as_slice).filter(|i| !ys.contains(i)).collect();
            assert_eq!(got, want, "{what}");
        }
        Operation::Shares => {
            let (Outcome::Shares(ss), Outcome::Shares(rs)) = (s, r) else { panic!("{what}") };
            let got = recombine(&ss, &rs, x);
            let want: BTreeSet<&[u8]> = x.iter().map(Vec::as_slice).filter(|i| ys.contains(i)).collect();
            assert_eq!(got, want.into_iter().map(<[u8]>::to_vec).collect(), "{what}");
        }
        Operation::PrivateId => check_private_ids(s, r, x, y, what),
        other => panic!("{what}: no plain computation for {other}"),
    }
}

/// Recombines row-aligned shares; checks rows, member bits and zero rows; returns the
/// items of X ∩ Y.
fn recombine(ss: &Shares, rs: &Shares, x: &[Vec<u8>]) -> BTreeSet<Vec<u8>> {
    assert_eq!((ss.codec, ss.rows(), rs.rows()), (rs.codec, x.len(), x.len()));
    assert_eq!((ss.items.len(), rs.members.len()), (x.len(), x.len()));
    let mut out = BTreeSet::new();
    for i in 0..x.len() {
        match ss.recombine(rs, i).expect("a recombined row is an encoding") {
            Some(item) => {
                assert!(rs.members[i], "row {i} recombines to an item but is no member");
                assert_eq!(item, x[ss.items[i]], "row {i} is the sender's item behind it");
                out.insert(item);
            }
            None => assert!(!rs.members[i], "member row {i} recombines to nothing"),
        }
    }
    out
}

fn check_private_ids(s: Outcome, r: Outcome, x: &[Vec<u8>], y: &[Vec<u8>], what: &str) {
    let Outcome::PrivateIds { own: sx, union: su } = s else { panic!("{what}: {s:?}") };
    let Outcome::PrivateIds { own: ry, union: ru } = r else { panic!("{what}: {r:?}") };
    assert_eq!((sx.len(), ry.len()), (x.len(), y.len()), "{what}");
    assert_eq!(su, ru, "{what}: both parties see the same union list");
    let mut id_of: HashMap<&[u8], [u8; 32]> = HashMap::new();
    for (item, id) in x.iter().zip(&sx).chain(y.iter().zip(&ry)) {
        // Equal items get equal IDs across the two parties.
        assert_eq!(*id_of.entry(item.as_slice()).or_insert(*id), *id, "{what}: two IDs for one item");
    }
    let distinct: HashSet<[u8; 32]> = id_of.values().copied().collect();
    assert_eq!(distinct.len(), id_of.len(), "{what}: distinct items share an ID");
    let mut all: Vec<[u8; 32]> = distinct.into_iter().collect();
    all.sort_unstable();
    assert_eq!(su, all, "{what}: the union list is exactly the IDs of X ∪ Y");
}

/// Runs `op` of `spec` and checks it against the plain computation.
fn check(spec: &'static Spec, op: Operation, x: &[Vec<u8>], y: &[Vec<u8>]) {
    let what = format!("{} {op}, |X| = {}, |Y| = {}", spec.name, x.len(), y.len());
    let (s, r) = run(spec, op, x, y);
    let (s, r) = (s.unwrap_or_else(|e| panic!("{what}: sender: {e}")), r.unwrap_or_else(|e| panic!("{what}: {e}")));
    expect(op, s, r, x, y, &values_of(x), &what);
}

#[test]
fn every_protocol_and_operation_matches_the_plain_computation_on_the_edge_cases() {
    let cases = every_protocol_and_operation();
    for spec in ALL {
        assert!(cases.iter().any(|(s, _)| s.name == spec.name), "{}: no two-party operation tested", spec.name);
    }
    for (spec, op) in cases {
        for (x, y) in crate::common::edge_cases() {
            check(spec, op, &x, &y);
        }
    }
}

#[test]
fn every_protocol_and_operation_takes_binary_long_and_unequal_sets() {
    let (bx, by) = binary_and_long(20, 600);
    for (spec, op) in every_protocol_and_operation() {
        check(spec, op, &bx, &by);
        check(spec, op, &items("a", 0..3), &items("a", 0..300));
        check(spec, op, &items("a", 0..300), &items("a", 297..303));
    }
}

/// How a hostile peer behaves once the hellos are exchanged.
#[derive(Debug, Clone, Copy)]
enum Hostile {
    /// It closes the connection.
    Vanishes,
    /// It sends a frame no protocol has (an unknown tag and a few bytes).
    Garbage,
    /// It sends an empty frame.
    Empty,
}

/// The honest `role` of `op` (with ten items) against a peer that exchanges a matching
/// hello and then behaves as `hostile`.
/// Returns the outcome and the number of frames the honest side read (the hello included).
fn against(spec: &'static Spec, op: Operation, role: Role, hostile: Hostile) -> (Result<Outcome>, u64) {
    let mine = items("i", 0..10);
    let p = prepare(spec, op, &mine, &mine);
    let peer_role = if role == Role::Sender { Role::Receiver } else { Role::Sender };
    let (a, b) = MemoryChannel::pair(1 << 24);
    let (mut a, mut b) = (a.with_timeout(Duration::from_secs(30)), b.with_timeout(Duration::from_secs(30)));
    let peer_job = p.job(peer_role).clone();
    std::thread::scope(|s| {
        s.spawn(move || {
            let hello = Hello::new(spec.name, op.name(), peer_job.hello_params(), peer_role, 10);
            if handshake(&mut b, &hello, u64::MAX).is_err() {
                return;
            }
            match hostile {
                Hostile::Vanishes => return,
                Hostile::Garbage => drop(b.send(&[0xee, 1, 2, 3, 4, 5, 6, 7])),
                Hostile::Empty => drop(b.send(&[])),
            }
            // Read until the honest side gives up, so it meets the frame, not a closed pipe.
            while b.recv().is_ok() {}
        });
        let r = session::run(&mut a, p.job(role), role, p.input(spec, op, role, &mine)).map(|(o, _)| o);
        let read = a.stats().messages_received;
        drop(a);
        (r, read)
    })
}

/// The frames `role` reads in an honest run of ten items a side (the hello included).
fn frames_read_honestly(spec: &'static Spec, op: Operation, role: Role) -> u64 {
    let mine = items("i", 0..10);
    let p = prepare(spec, op, &mine, &mine);
    let ((s, s_read), (r, r_read)) =
        pair(spec, op, &p, channel_pair(60), &mine, &mine, |ch: &MemoryChannel| ch.stats().messages_received);
    s.unwrap();
    r.unwrap();
    if role == Role::Sender { s_read } else { r_read }
}

#[test]
fn every_role_of_every_protocol_names_the_peer_when_it_vanishes_or_sends_garbage() {
    for (spec, op) in every_protocol_and_operation() {
        for role in [Role::Sender, Role::Receiver] {
            for hostile in [Hostile::Vanishes, Hostile::Garbage, Hostile::Empty] {
                let what = format!("{} {op}, honest {role}, a peer that {hostile:?}", spec.name);
                let e: Error = match against(spec, op, role, hostile) {
                    (Err(e), _) => e,
                    // A role that reads nothing after the hello in an honest run either
                    // (authorised PSI's server only sends) may finish; one that read the
                    // peer's frame may not.
                    (Ok(_), 1) if frames_read_honestly(spec, op, role) == 1 => continue,
                    (Ok(o), read) => panic!("{what}: the honest side read {read} frames and finished with {o:?}"),
                };
                // The peer's fault or the network's, never the caller's; and not a timeout:
                // a peer that left or sent garbage is named at once.
                assert!(!e.is_local(), "{what}: counted as a local mistake: {e}");
                assert!(!timed_out(&e), "{what}: waited for the timeout: {e}");
            }
        }
    }
}

/// Flips the last byte of the `nth` frame (from 0) a channel end sends after its hello;
/// `None`: an honest end that only counts.
struct FlipNth {
    nth: Option<usize>,
    sent: usize,
}

impl Decoration for FlipNth {
    fn send<C: Channel + ?Sized>(&mut self, inner: &mut C, frame: &[u8]) -> std::result::Result<(), NetError> {
        self.sent += 1;
        // Frame 1 is the hello.
        if self.sent.checked_sub(2) == self.nth && !frame.is_empty() {
            let mut bad = frame.to_vec();
            *bad.last_mut().expect("not empty") ^= 0x80;
            return inner.send(&bad);
        }
        inner.send(frame)
    }
}

/// Whether the error is a wait that ran out (a hang cut short), not a named failure.
fn timed_out(e: &Error) -> bool {
    matches!(e, Error::Net { source: NetError::Timeout(_) | NetError::SessionDeadline(_), .. })
}

/// More messages than any run of the damaged-message test sends.
const MAX_MESSAGES: usize = 64;

#[test]
fn a_damaged_message_anywhere_ends_in_an_error_or_a_result_never_a_panic_or_a_hang() {
    let (x, y) = (items("a", 0..40), items("a", 20..60));
    let mut damaged_runs = 0;
    for (spec, op) in every_protocol_and_operation() {
        for damaged in [Role::Sender, Role::Receiver] {
            // Every message the damaged side sends after its hello, one at a time, until
            // the run has fewer messages than the index.
            let mut swept = false;
            for nth in 0..MAX_MESSAGES {
                let p = prepare(spec, op, &x, &y);
                let (a, b) = channel_pair(30);
                let flip = |side: Role| FlipNth { nth: (side == damaged).then_some(nth), sent: 0 };
                let ends = (Decorated::wrap(a, flip(Role::Sender)), Decorated::wrap(b, flip(Role::Receiver)));
                let ((s, sent_a), (r, sent_b)) =
                    pair(spec, op, &p, ends, &x, &y, |ch: &Decorated<MemoryChannel, FlipNth>| ch.decoration.sent);
                let flipped = if damaged == Role::Sender { sent_a } else { sent_b } >= nth + 2;
                if !flipped {
                    swept = true;
                    break;
                }
                damaged_runs += 1;
                let what = format!("{} {op}, the {damaged}'s message {nth} damaged", spec.name);
                // The honest side, if it fails, names the peer or the network.
                let honest = if damaged == Role::Sender { &r } else { &s };
                if let Err(e) = honest {
                    assert!(!e.is_local(), "{what}: the honest side counted it as its own mistake: {e}");
                    assert!(!timed_out(e), "{what}: the honest side waited for the timeout: {e}");
                }
            }
            assert!(swept, "{} {op}: the {damaged} sends more than {MAX_MESSAGES} messages", spec.name);
        }
    }
    // Each protocol's messages were damaged one by one; the test must have done so.
    assert!(damaged_runs > 100, "only {damaged_runs} runs had a damaged message");
}
