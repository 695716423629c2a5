//! Authorised PSI and Partial-APSI: judge, client and server over in-memory channels,
//! against the plain computation (X_auth ∩ X) ∩ Y, and against a cheating client.

use crate::common::items;
use group::Curve;
use setwise::crypto::bls12_381::{G1Affine, G1Projective, G2Affine, Secret, hash_to_g1};
use setwise::crypto::dst::Domain;
use setwise::error::Deviation;
use setwise::net::{Channel, Decorated, Decoration, MemoryChannel, NetError, Stats};
use setwise::protocols::authorized::messages::{
    AuthHeader, COMMITMENTS, Challenge, JudgeKeyMessage, Opening, ServerKey,
};
use setwise::protocols::authorized::{AllowList, Credentials, JudgeConfig, JudgeKey, JudgeOutcome, Mode, eea, h1};
use setwise::session::{self, Hello, Input, Job, handshake};
use setwise::wire::msg::Message;
use setwise::{Error, Operation, Outcome, Protocol, Role};
use std::collections::BTreeSet;

type AuthResult = Result<(Credentials, Vec<usize>), Error>;

/// Runs an authorisation; returns the judge's outcome and the client's credentials.
fn authorize_pair(
    key: &JudgeKey,
    allow: &AllowList,
    config: JudgeConfig,
    xs: &[Vec<u8>],
    id: &[u8],
    mode: Mode,
) -> (Result<JudgeOutcome, Error>, AuthResult) {
    let (mut a, mut b) = MemoryChannel::pair(1 << 24);
    std::thread::scope(|s| {
        let t = s.spawn(move || {
            let job = Job::new(Protocol::Authorized, Operation::Authorize);
            let input: Input = Input::Judge { key, policy: allow, config };
            session::run(&mut a, &job, Role::Judge, input).map(|(o, _)| match o {
                Outcome::Judged(j) => j,
                other => panic!("{other:?}"),
            })
        });
        let r = session::run(&mut b, &Job::authorize(mode, id), Role::Receiver, Input::Items(xs));
        drop(b);
        let creds = r.map(|(o, _)| match o {
            Outcome::Credentials { credentials, refused } => (*credentials, refused),
            other => panic!("{other:?}"),
        });
        (t.join().unwrap(), creds)
    })
}

/// Runs an intersection; returns the client's matching indices into `xs`, and the
/// frames the client received.
fn intersect_pair(
    creds: &Credentials,
    xs: &[Vec<u8>],
    ys: &[Vec<u8>],
    server_id: &[u8],
    pk: &G2Affine,
) -> (Result<Vec<usize>, Error>, Vec<Vec<u8>>) {
    let (mut a, b) = MemoryChannel::pair(1 << 24);
    let mut b = Decorated::wrap(b, Frames(Vec::new()));
    let protocol = creds.mode.protocol();
    let r = std::thread::scope(|s| {
        s.spawn(move || {
            let job = Job::authorized(protocol, server_id, *pk);
            let _ = session::run(&mut a, &job, Role::Sender, Input::Items(ys));
        });
        let job = Job::authorized(protocol, &creds.client_id, creds.judge_pk);
        let r = session::run(&mut b, &job, Role::Receiver, Input::Credentials { items: xs, credentials: creds });
        r.map(|(o, _)| match o {
            Outcome::Intersection(v) => v,
            other => panic!("{other:?}"),
        })
    });
    (r, b.decoration.0)
}

/// Keeps every frame the channel receives.
struct Frames(Vec<Vec<u8>>);

impl Decoration for Frames {
    fn received(&mut self, f: Vec<u8>) -> Result<Vec<u8>, NetError> {
        self.0.push(f.clone());
        Ok(f)
    }
}

fn plain(xs: &[Vec<u8>], allowed: &BTreeSet<Vec<u8>>, ys: &[Vec<u8>]) -> Vec<usize> {
    let y: BTreeSet<&Vec<u8>> = ys.iter().collect();
    xs.iter().enumerate().filter(|(_, x)| allowed.contains(*x) && y.contains(x)).map(|(i, _)| i).collect()
}

const LENIENT: JudgeConfig = JudgeConfig { fraction: 1.0, strict: false };

#[test]
fn full_mode_gives_authorised_items_only() {
    let key = JudgeKey::generate();
    let xs = items("x", 0..60);
    let allowed: BTreeSet<Vec<u8>> = items("x", 0..40).into_iter().collect();
    let policy = AllowList::new(&allowed);
    let (j, c) = authorize_pair(&key, &policy, LENIENT, &xs, b"alice", Mode::Full);
    let (creds, refused) = c.unwrap();
    assert_eq!(refused, (40..60).collect::<Vec<_>>());
    assert_eq!(j.unwrap().signed, 40);
    // The server holds authorised and unauthorised client items and others.
    let ys = [items("x", 20..55), items("y", 0..30)].concat();
    let (got, _) = intersect_pair(&creds, &xs, &ys, b"alice", key.public());
    assert_eq!(got.unwrap(), plain(&xs, &allowed, &ys), "items 40..55 are at the server but never authorised");
    // Strict mode: all or nothing.
    let (_, c) = authorize_pair(&key, &policy, JudgeConfig { strict: true, ..LENIENT }, &xs, b"alice", Mode::Full);
    assert!(c.unwrap().0.entries.is_empty());
}

#[test]
fn forged_or_other_client_credentials_yield_nothing() {
    let key = JudgeKey::generate();
    let xs = items("x", 0..20);
    let policy = AllowList::new(&xs);
    let (_, c) = authorize_pair(&key, &policy, LENIENT, &xs, b"alice", Mode::Full);
    let creds = c.unwrap().0;
    let ys = items("x", 0..20);
    // Alice's signatures presented as Bob's: bound to another identity, so nothing matches.
    let mut stolen = creds.clone();
    stolen.client_id = b"bob".to_vec();
    assert_eq!(intersect_pair(&stolen, &xs, &ys, b"bob", key.public()).0.unwrap(), Vec::<usize>::new());
    // Forged signatures: random group elements.
    let mut forged = creds.clone();
    for (_, s) in forged.entries.iter_mut() {
        *s = (hash_to_g1(&Domain::fixed("forge"), b"x") * Secret::random().scalar()).to_affine();
    }
    assert_eq!(intersect_pair(&forged, &xs, &ys, b"alice", key.public()).0.unwrap(), Vec::<usize>::new());
    // Another judge's key in the server's hello: a parameter mismatch, named.
    let other = JudgeKey::generate();
    let e = intersect_pair(&creds, &xs, &ys, b"alice", other.public()).0.unwrap_err().to_string();
    assert!(e.contains("parameters") && e.contains("judge="), "{e}");
}

#[test]
fn credentials_for_another_job_are_a_local_error() {
    let key = JudgeKey::generate();
    let xs = items("x", 0..5);
    let (_, c) = authorize_pair(&key, &AllowList::new(&xs), LENIENT, &xs, b"a", Mode::Full);
    let creds = c.unwrap().0;
    let (mut a, _b) = MemoryChannel::pair(1 << 20);
    // Full credentials in a partial job, and a job for another client.
    for job in [
        Job::authorized(Protocol::Partial, b"a", *key.public()),
        Job::authorized(Protocol::Authorized, b"b", *key.public()),
    ] {
        let input = Input::Credentials { items: &xs, credentials: &creds };
        let e = session::run(&mut a, &job, Role::Receiver, input).unwrap_err();
        assert!(e.is_local() && e.to_string().contains("credentials"), "{e}");
    }
}

#[test]
fn runs_are_unlinkable() {
    let key = JudgeKey::generate();
    let xs = items("x", 0..10);
    let (_, c) = authorize_pair(&key, &AllowList::new(&xs), LENIENT, &xs, b"a", Mode::Full);
    let creds = c.unwrap().0;
    let s_frame = |frames: Vec<Vec<u8>>| frames.into_iter().find(|f| f[0] == ServerKey::TAG).unwrap();
    let (r1, f1) = intersect_pair(&creds, &xs, &xs, b"a", key.public());
    let (r2, f2) = intersect_pair(&creds, &xs, &xs, b"a", key.public());
    assert_eq!(r1.unwrap().len(), 10);
    assert_eq!(r2.unwrap().len(), 10);
    assert_ne!(s_frame(f1), s_frame(f2), "a fresh S each run");
}

#[test]
fn partial_mode_opens_exactly_the_fraction_and_intersects() {
    let key = JudgeKey::generate();
    let xs = items("x", 0..50);
    let allowed: BTreeSet<Vec<u8>> = xs.iter().cloned().collect();
    let config = JudgeConfig { fraction: 0.25, strict: false };
    let (j, c) = authorize_pair(&key, &AllowList::new(&allowed), config, &xs, b"carol", Mode::Partial);
    let j = j.unwrap();
    assert_eq!(j.opened, 13, "⌈0.25 × 50⌉");
    assert_eq!(j.signed, 50);
    let creds = c.unwrap().0;
    let ys = [items("x", 30..70), items("z", 0..5)].concat();
    assert_eq!(intersect_pair(&creds, &xs, &ys, b"carol", key.public()).0.unwrap(), plain(&xs, &allowed, &ys));
    // One refused opening refuses all.
    let policy = AllowList::new(&xs[1..]);
    let (j, c) = authorize_pair(&key, &policy, LENIENT, &xs, b"carol", Mode::Partial);
    assert_eq!(j.unwrap().signed, 0);
    assert!(c.unwrap().0.entries.is_empty());
}

/// A client that commits to one item and opens another, or sends a bad proof.
#[test]
fn wrong_openings_and_proofs_are_rejected() {
    for cheat in ["swap", "proof"] {
        let key = JudgeKey::generate();
        let policy = AllowList::new(items("x", 0..10));
        let (mut a, mut b) = MemoryChannel::pair(1 << 20);
        let (judged, told) = std::thread::scope(|s| {
            let t = s.spawn(|| {
                let job = Job::new(Protocol::Partial, Operation::Authorize);
                let input: Input = Input::Judge { key: &key, policy: &policy, config: LENIENT };
                session::run(&mut a, &job, Role::Judge, input)
            });
            let job = Job::authorize(Mode::Partial, b"eve");
            let hello = Hello::new("judge", "authorize", job.hello_params(), Role::Receiver, 2);
            handshake(&mut b, &hello, u64::MAX).unwrap();
            JudgeKeyMessage::recv(&mut b, "t", ()).unwrap();
            AuthHeader { mode: Mode::Partial, client_id: b"eve".to_vec() }.send(&mut b, "t").unwrap();
            let r = Secret::random();
            let secret_items = [b"forbidden".to_vec(), b"x1".to_vec()];
            let bases: Vec<G1Affine> = secret_items.iter().map(|x| h1(x, b"eve").to_affine()).collect();
            let commits: Vec<G1Affine> =
                bases.iter().map(|h| (G1Projective::from(h) * r.scalar()).to_affine()).collect();
            let enc: Vec<[u8; 48]> = commits.iter().map(|c| c.to_compressed()).collect();
            COMMITMENTS.send(&mut b, &enc, "t").unwrap();
            let Challenge(challenge) = Challenge::recv(&mut b, "t", 2).unwrap();
            assert_eq!(challenge, [0, 1], "a fraction of 1 opens both");
            // Open commitment 0 as an allowed item ("swap"), or send a bad proof.
            let mut proof = eea::prove(&r, &bases, &commits);
            if cheat == "proof" {
                proof[50] ^= 1;
            }
            let shown = if cheat == "swap" { [b"x0".to_vec(), b"x1".to_vec()] } else { secret_items.clone() };
            Opening { items: shown.into_iter().enumerate().collect(), proof }.send(&mut b, "t").unwrap();
            let told = setwise::wire::msg::recv_message(&mut b, 0x45, "AuthSignatures", "t").unwrap_err();
            (t.join().unwrap(), told)
        });
        let e = judged.unwrap_err();
        assert!(matches!(e, Error::PeerMisbehaved(Deviation::Unverified { .. })), "{cheat}: {e}");
        assert!(matches!(told, Error::PeerAborted(ref m) if m.contains("exponent-equality proof")), "{told}");
    }
}

/// A channel whose peer presented a certificate naming `identity` (or naming nothing).
struct Certified(MemoryChannel, Option<String>);

impl Channel for Certified {
    fn send(&mut self, f: &[u8]) -> Result<(), NetError> {
        self.0.send(f)
    }
    fn recv(&mut self) -> Result<Vec<u8>, NetError> {
        self.0.recv()
    }
    fn stats(&self) -> Stats {
        self.0.stats()
    }
    fn peer_identity(&self) -> Option<String> {
        self.1.clone()
    }
    fn peer_certified(&self) -> bool {
        true
    }
}

/// The judge's outcome for a client stating `id`, on a channel whose peer is `certified`
/// (`None`: no certificate at all), under `policy`.
fn judged(policy: &AllowList, id: &[u8], certified: Option<Option<&str>>, xs: &[Vec<u8>]) -> Result<usize, Error> {
    let key = JudgeKey::generate();
    let (a, mut b) = MemoryChannel::pair(1 << 24);
    std::thread::scope(|s| {
        let t = s.spawn(move || {
            let job = Job::new(Protocol::Authorized, Operation::Authorize);
            let input: Input = Input::Judge { key: &key, policy, config: LENIENT };
            let r = match certified {
                None => session::run(&mut { a }, &job, Role::Judge, input),
                Some(name) => session::run(&mut Certified(a, name.map(str::to_string)), &job, Role::Judge, input),
            };
            r.map(|(o, _)| match o {
                Outcome::Judged(j) => j.signed,
                other => panic!("{other:?}"),
            })
        });
        let _ = session::run(&mut b, &Job::authorize(Mode::Full, id), Role::Receiver, Input::Items(xs));
        drop(b);
        t.join().unwrap()
    })
}

/// A policy that names clients signs only for identities a certificate proves: before,
/// an anonymous client that stated "carol" got carol's items signed. A certificate that
/// names nothing proves no identity (before, all such certificates shared one).
#[test]
fn a_policy_that_names_clients_trusts_certificates_not_statements() {
    let xs = items("x", 0..10);
    let per_client = AllowList::per_client(xs.iter().map(|x| ("carol", x)));
    let e = judged(&per_client, b"carol", None, &xs).unwrap_err();
    assert!(matches!(e, Error::PeerMisbehaved(Deviation::UnauthenticatedClient { .. })), "{e}");
    assert!(e.to_string().contains("only states it is carol"), "{e}");
    let e = judged(&per_client, b"carol", Some(None), &xs).unwrap_err();
    assert!(matches!(e, Error::PeerMisbehaved(Deviation::UnnamedCertificate)), "{e}");
    let e = judged(&per_client, b"carol", Some(Some("bob")), &xs).unwrap_err();
    assert!(matches!(e, Error::PeerMisbehaved(Deviation::IdentityMismatch { .. })), "{e}");
    assert_eq!(judged(&per_client, b"carol", Some(Some("carol")), &xs).unwrap(), 10);
    // A policy for everyone needs no identity: a stated ID only binds the credentials.
    assert_eq!(judged(&AllowList::new(&xs), b"carol", None, &xs).unwrap(), 10);
}
