//! Authorised PSI and Partial-APSI with a judge: the client (receiver) learns
//! (X_auth ∩ X) ∩ Y, where X_auth are the items a judge signed for it.
//!
//! Paper: Falzon and Markatou, *Re-visiting Authorized Private Set Intersection: A New
//! Privacy-Preserving Variant and Two Protocols* (shared/papers/authorized-psi-and-partial-apsi.txt),
//! Fig. 2 (APSI) and Fig. 3 (Partial-APSI), on BLS12-381. Security: APSI against a
//! malicious client (it cannot gain items the judge did not sign: BLS unforgeability),
//! Partial-APSI against an input-malicious client only (Thm 6: it may choose its input
//! but follows the protocol; the paper leaves the malicious upgrade open), semi-honest
//! server and judge. Each run samples a fresh server secret `s`, so credentials are reused
//! across runs without linkability. Wire: docs/wire-format.md#authorized.
//!
//! Authorize (client ↔ judge): full mode — the client sends its items, the judge signs
//! `σ = H1(x‖ID)^sk` for each item its [`Policy`] allows; partial mode — the client sends
//! commitments `H1(x‖ID)^r`, the judge opens ⌈p·n⌉ random ones with an exponent-equality
//! proof ([`eea`]) and signs `H2(commitment)^sk` for all.
//! Intersect (client ↔ server): the server sends `S = g2^s` and digests of
//! `e(H1(y‖ID), pk^s)` (partial: `e(H2(H1(y‖ID)^r), pk^s)` after a DH-OPRF with the client's
//! `r`), shuffled; the client computes `e(σ, S)` and matches.
//!
//! ```
//! use setwise::net::MemoryChannel;
//! use setwise::protocols::authorized::{AllowList, JudgeConfig, JudgeKey, Mode};
//! use setwise::{Input, Job, Operation, Outcome, Protocol, Role, run};
//!
//! let judge = JudgeKey::generate();
//! let allowed = AllowList::new(["a", "b", "c"]);
//! let client_items = ["a", "b", "x"]; // "x" is not allowed
//! // 1. The judge signs the client's allowed items.
//! let (mut j, mut c) = MemoryChannel::pair(1 << 20);
//! let credentials = std::thread::scope(|s| {
//!     let config = JudgeConfig { fraction: 1.0, strict: false };
//!     let judging: Input = Input::Judge { key: &judge, policy: &allowed, config };
//!     let job = Job::new(Protocol::Authorized, Operation::Authorize);
//!     let t = s.spawn(move || run(&mut j, &job, Role::Judge, judging));
//!     let got = run(&mut c, &Job::authorize(Mode::Full, b"client-7"), Role::Receiver, Input::Items(&client_items));
//!     t.join().unwrap().unwrap();
//!     match got.unwrap().0 {
//!         Outcome::Credentials { credentials, refused } => { assert_eq!(refused, [2]); credentials }
//!         other => panic!("{other:?}"),
//!     }
//! });
//! // 2. The client intersects with a server that trusts the judge's key.
//! let job = Job::authorized(Protocol::Authorized, b"client-7", *judge.public());
//! let server_items = ["b", "x", "y"];
//! let (mut a, mut b) = MemoryChannel::pair(1 << 20);
//! let got = std::thread::scope(|s| {
//!     let server = s.spawn(|| run(&mut a, &job, Role::Sender, Input::Items(&server_items)));
//!     let input = Input::Credentials { items: &client_items, credentials: &credentials };
//!     let got = run(&mut b, &job, Role::Receiver, input).unwrap();
//!     server.join().unwrap().unwrap();
//!     got
//! });
//! assert_eq!(got.0, Outcome::Intersection(vec![1])); // "b"; "x" is common but not authorised
//! ```

pub mod credentials;
pub mod eea;
mod intersect;
mod judge;
mod keys;
pub mod messages;

pub use credentials::Credentials;
pub use intersect::{receiver, sender, usable};
pub use judge::{JudgeConfig, JudgeOutcome, authorize, judge};
pub use keys::{JudgeKey, key_fingerprint, public_key_from_hex, public_key_hex, read_public_key};

use crate::crypto::bls12_381::{G1Affine, G1Projective, hash_to_g1};
use crate::crypto::dst::{self, Domain};
use crate::error::{Deviation, Result};
use crate::net::Channel;
use crate::protocols::Protocol;
use crate::protocols::params::{AuthorizedJob, Named, OptionDoc, ProtocolParams};
use crate::protocols::spec::{Leakage, Spec, Takes};
use crate::protocols::{Call, Input, Outcome, Report};
use crate::protocols::{Operation, Role, Security};
use crate::wire::text::{MAX_SHOWN, printable, printable_bytes};
use std::collections::{HashMap, HashSet};

/// Longest client identifier.
pub const MAX_CLIENT_ID: usize = 1024;
/// Longest item accepted by the judge.
pub const MAX_ITEM: usize = 1 << 16;

/// Full APSI (the judge sees every item) or Partial-APSI (the judge sees a fraction).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Mode {
    /// Paper §4: the judge sees and signs every item.
    Full,
    /// Paper §5: the judge sees ⌈p·n⌉ items chosen by itself and signs all commitments.
    Partial,
}

impl Mode {
    /// The mode of an authorised protocol (`authorized` is full, `partial` partial).
    pub fn of(protocol: Protocol) -> Option<Self> {
        [Mode::Full, Mode::Partial].into_iter().find(|m| m.protocol() == protocol)
    }

    /// The protocol of intersections in this mode.
    pub fn protocol(self) -> Protocol {
        match self {
            Mode::Full => Protocol::Authorized,
            Mode::Partial => Protocol::Partial,
        }
    }

    fn code(self) -> u8 {
        match self {
            Mode::Full => 1,
            Mode::Partial => 2,
        }
    }

    fn from_code(c: u8) -> Option<Self> {
        match c {
            1 => Some(Mode::Full),
            2 => Some(Mode::Partial),
            _ => None,
        }
    }
}

/// Decides which items the judge authorises, for which client.
pub trait Policy: Sync {
    /// True if the judge may sign `item` for the client `client_id` (the identity in the
    /// client's TLS certificate under mutual TLS, else the ID its request states).
    fn allows(&self, client_id: &[u8], item: &[u8]) -> bool;

    /// True if what it allows depends on who the client is: then the judge serves only
    /// clients whose identity a verified certificate names (mutual TLS), since a stated
    /// ID is whatever the client says.
    fn names_clients(&self) -> bool {
        true
    }
}

/// A policy that allows listed items: to every client, or to named clients only.
#[derive(Debug, Clone, Default)]
pub struct AllowList {
    any: HashSet<Vec<u8>>,
    /// Client → the items allowed to it alone.
    per_client: HashMap<Vec<u8>, HashSet<Vec<u8>>>,
}

impl AllowList {
    /// An allow-list of these items, for every client.
    pub fn new<I: AsRef<[u8]>>(items: impl IntoIterator<Item = I>) -> Self {
        Self { any: items.into_iter().map(|i| i.as_ref().to_vec()).collect(), per_client: HashMap::new() }
    }

    /// An allow-list of (client, item) pairs: each item only for its client.
    pub fn per_client<C: AsRef<[u8]>, I: AsRef<[u8]>>(pairs: impl IntoIterator<Item = (C, I)>) -> Self {
        let mut per_client: HashMap<Vec<u8>, HashSet<Vec<u8>>> = HashMap::new();
        for (c, i) in pairs {
            per_client.entry(c.as_ref().to_vec()).or_default().insert(i.as_ref().to_vec());
        }
        Self { any: HashSet::new(), per_client }
    }
}

impl Policy for AllowList {
    fn allows(&self, client_id: &[u8], item: &[u8]) -> bool {
        self.any.contains(item) || self.per_client.get(client_id).is_some_and(|items| items.contains(item))
    }

    fn names_clients(&self) -> bool {
        !self.per_client.is_empty()
    }
}

/// Under TLS with a client certificate, the client ID of the session must be the
/// identity in the peer's certificate: the judge signs for that identity only and the
/// server serves credentials only to their holder. A certificate that names nothing is
/// refused (all such certificates would share one identity). Without a client
/// certificate the stated ID is trusted here; a judge whose policy names clients refuses
/// that case first ([`Policy::names_clients`]).
pub(crate) fn check_identity(ch: &impl Channel, client_id: &[u8]) -> Result<()> {
    match ch.peer_identity() {
        Some(certified) if certified.as_bytes() != client_id => Err(Deviation::IdentityMismatch {
            claimed: printable_bytes(client_id, MAX_SHOWN),
            certified: printable(&certified, MAX_SHOWN),
        }
        .into()),
        None if ch.peer_certified() => Err(Deviation::UnnamedCertificate.into()),
        _ => Ok(()),
    }
}

/// `H1(x ‖ ID)`: length-prefixed item, then the client identifier.
pub fn h1(item: &[u8], client_id: &[u8]) -> G1Projective {
    let mut msg = Vec::with_capacity(8 + item.len() + client_id.len());
    msg.extend_from_slice(&(item.len() as u64).to_le_bytes());
    msg.extend_from_slice(item);
    msg.extend_from_slice(client_id);
    hash_to_g1(&Domain::fixed(dst::AUTHORIZED_H1), &msg)
}

/// `H2(P)` for a G1 point (Partial-APSI signs `H2(commitment)`).
pub fn h2(p: &G1Affine) -> G1Projective {
    hash_to_g1(&Domain::fixed(dst::AUTHORIZED_H2), &p.to_compressed())
}

/// What each role of an authorised protocol brings: the intersection's client its items
/// with credentials, an authorisation's judge its key and policy, everyone else items.
fn authorized_takes(op: Operation, role: Role) -> Takes {
    match (op, role) {
        (Operation::Intersection, Role::Receiver) => Takes::Credentials,
        (Operation::Authorize, Role::Judge) => Takes::Judge,
        _ => Takes::Items,
    }
}

/// authorized's and partial's options: the client served and the judge's key.
pub const OPTIONS: &[OptionDoc] = &[
    OptionDoc { name: "client_id", values: &[], help: "the identity of the client the judge authorised" },
    OptionDoc { name: "judge_key", values: &[], help: "sender: the judge's public key, in hex" },
];

/// authorized's and partial's parameters from their options.
pub fn params_of_options(named: &Named) -> Result<ProtocolParams> {
    let judge_key = named.get("judge_key").map(public_key_from_hex).transpose()?;
    let client_id = named.get("client_id").unwrap_or_default().as_bytes().to_vec();
    Ok(ProtocolParams::Authorized(AuthorizedJob { client_id, judge_key }))
}

/// Its roles ([`Spec::roles`]), in both modes: the server with its items and the client
/// with its credentials (intersection); the client with its items and the judge
/// (authorisation).
fn roles(mut ch: &mut dyn Channel, call: Call<'_>, report: &mut Report) -> Result<Outcome> {
    let (ProtocolParams::Authorized(a), Some(mode)) = (call.params, Mode::of(call.protocol)) else {
        return Err(call.unsupported());
    };
    let ch = &mut ch;
    match (call.operation, call.ctx.role, &call.input, &a.judge_key) {
        (Operation::Intersection, Role::Sender, &Input::Items(y), Some(pk)) => {
            sender(ch, call.ctx, mode, pk, &a.client_id, y, report).map(|()| Outcome::Nothing)
        }
        (Operation::Intersection, Role::Receiver, &Input::Credentials { credentials, .. }, _) => {
            receiver(ch, call.ctx, credentials, call.usable.unwrap_or_default(), report)
        }
        (Operation::Authorize, Role::Judge, &Input::Judge { key, policy, ref config }, _) => {
            judge(ch, call.ctx, key, policy, config, report).map(Outcome::Judged)
        }
        (Operation::Authorize, Role::Receiver, &Input::Items(x), _) => {
            let (credentials, refused) = authorize(ch, x, &a.client_id, mode, report)?;
            Ok(Outcome::Credentials { credentials: Box::new(credentials), refused })
        }
        _ => Err(call.unsupported()),
    }
}

// Named like the variants these constants replaced, so callers' `Protocol::Authorized`
// reads as before.
#[allow(non_upper_case_globals)]
impl Protocol {
    /// Authorised PSI: the client's items carry a judge's BLS signatures.
    pub const Authorized: Protocol = Protocol::declared_by(&SPEC);
    /// Partial-APSI: the judge saw only a fraction of the client's items.
    pub const Partial: Protocol = Protocol::declared_by(&PARTIAL_SPEC);
}

/// The registry's facts about authorised PSI (full mode, paper §4).
pub static SPEC: Spec = Spec {
    name: "authorized",
    operations: &[Operation::Intersection, Operation::Authorize],
    // A malicious client, not a malicious sender: semi-honest in both roles.
    security: Security::SemiHonest,
    reveal_both: &[],
    staged: &[],
    own_stages: false,
    live_role_bytes: 0,
    takes: authorized_takes,
    leakage: Leakage {
        model: "malicious client",
        text: "The judge learns the client's identity, how many items it asked to have signed, and \
               the items themselves. The client learns the intersection of its signed items with the \
               server's set and the server's set size. The server learns how many signed items the \
               client queried, nothing else.",
        doc: "docs/protocols/authorized.md",
    },
    page: include_str!("../../../../../docs/protocols/authorized.md"),
    demo_items: 1 << 16,
    options: OPTIONS,
    params: params_of_options,
    roles,
};

/// The registry's facts about Partial-APSI (paper §5).
pub static PARTIAL_SPEC: Spec = Spec {
    name: "partial",
    operations: &[Operation::Intersection, Operation::Authorize],
    security: Security::SemiHonest,
    reveal_both: &[],
    staged: &[],
    own_stages: false,
    live_role_bytes: 0,
    takes: authorized_takes,
    leakage: Leakage {
        model: "input-malicious client (it chooses its input, follows the protocol)",
        text: "The judge learns the client's identity, how many items it asked to have signed, and \
               the fraction of them it opened. The client learns the intersection of its signed \
               items with the server's set and the server's set size. The server learns how many \
               signed items the client queried, nothing else.",
        doc: "docs/protocols/authorized.md",
    },
    page: include_str!("../../../../../docs/protocols/authorized.md"),
    demo_items: 1 << 16,
    options: OPTIONS,
    params: params_of_options,
    roles,
};
