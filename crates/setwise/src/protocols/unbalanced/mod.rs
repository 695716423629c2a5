//! Unbalanced PSI with a preprocessed sender database: the receiver learns X ∩ Y.
//!
//! Paper: Cong, Moreno, Nielsen, Pan, Rindal, Song et al., *Labeled PSI from
//! Homomorphic Encryption with Reduced Computation and Communication* (CCS'21), the
//! design behind Microsoft APSI (shared/papers/labeled-unbalanced-psi-from-he.txt).
//! Security: semi-honest; the receiver's query is protected by BFV, the sender's items
//! by the OPRF (the database holds only OPRF outputs). Failure: cuckoo insertion
//! failure (an error) and false matches, each ≤ 2^-40 ([`params`]).
//! Wire: docs/wire-format.md#unbalanced.
//!
//! Sender (once): OPRF each item, hash it into all `hash_func_count` candidate bins,
//! cut each bin into bundles of ≤ `max_items_per_bin` items, and keep per bundle the
//! coefficients of each slot's matching polynomial ∏(x − y) as plaintexts ([`SenderDb`]).
//! Query: OPRF of the receiver's items; cuckoo table; the receiver encrypts the
//! `query_powers` of each bundle index's ciphertext; the sender derives the needed
//! powers once per bundle index, evaluates every bundle (directly or with
//! Paterson–Stockmeyer), switches each result to the last level and streams it back;
//! the receiver's item matches when all its slots in some result are zero.
//!
//! ```
//! use setwise::net::MemoryChannel;
//! use setwise::protocols::unbalanced::{SenderDb, UnbalancedParams};
//! use setwise::{Input, Job, Operation, Outcome, Protocol, Role, run};
//!
//! // The sender preprocesses its set once; each query then costs little.
//! let x: Vec<String> = (0..2000).map(|i| format!("user{i}@example.org")).collect();
//! let (preset, params) = UnbalancedParams::preset_for(x.len(), 16).unwrap();
//! let mut db = SenderDb::build(&x, params, preset).unwrap();
//! db.prepare().unwrap(); // encode the plaintexts once, to serve fast
//! let y = ["user7@example.org", "nobody@example.net", "user1999@example.org"];
//! let job = Job::new(Protocol::Unbalanced, Operation::Intersection);
//! let (mut a, mut b) = MemoryChannel::pair(64 << 20);
//! let got = std::thread::scope(|s| {
//!     let sender = s.spawn(|| run(&mut a, &job, Role::Sender, Input::<Vec<u8>>::Database(&db)));
//!     let got = run(&mut b, &job, Role::Receiver, Input::Items(&y)).unwrap();
//!     sender.join().unwrap().unwrap();
//!     got
//! });
//! assert_eq!(got.0, Outcome::Intersection(vec![0, 2]));
//! ```

pub mod auto;
pub mod db;
pub mod eval;
pub mod labels;
pub mod messages;
pub mod params;
mod receiver;
mod sender;

pub use db::{BuildInto, DbInfo, SenderDb, UpdateStats};
pub use labels::{LabelLayout, decode_label, encode_label};
pub use params::UnbalancedParams;
pub use receiver::receiver;
pub use sender::sender;

use crate::crypto::dst::{self, Domain};
use crate::crypto::oprf::Output;
use crate::net::Channel;
use crate::protocols::params::{Named, OptionDoc, ProtocolParams, UnbalancedJob};
use crate::protocols::spec::{Leakage, Spec, Takes};
use crate::protocols::{Call, Input, Outcome, Report};
use crate::protocols::{Operation, Protocol, Role, Security};

/// Largest number of bundles at one bundle index a receiver accepts.
pub(crate) const MAX_BUNDLES_PER_INDEX: usize = 1 << 16;

/// What the database keeps of an item: a hash of its OPRF output. Bins and field
/// elements follow from it; the output itself (which keys the item's label) is known
/// only to whoever evaluated the OPRF on the item.
pub type Digest = [u8; 32];

/// The digest of an OPRF output.
pub(crate) fn digest(output: &Output) -> Digest {
    let mut h = Domain::fixed(dst::UNBALANCED_DIGEST).hasher();
    h.update(output);
    *h.finalize().as_bytes()
}

/// Where an item (by digest) goes: its candidate bins and its field elements.
pub(crate) fn locate(p: &UnbalancedParams, digest: &Digest, bins: &mut Vec<u32>, felts: &mut Vec<u64>) {
    let mut h = Domain::fixed(dst::UNBALANCED_ITEM).hasher();
    h.update(digest);
    let mut xof = h.finalize_xof();
    let mut w = [0u8; 8];
    bins.clear();
    for _ in 0..p.table_params.hash_func_count {
        xof.fill(&mut w);
        bins.push((u64::from_le_bytes(w) % p.table_params.table_size as u64) as u32);
    }
    let mask = (1u64 << p.felt_bits()) - 1;
    felts.clear();
    for _ in 0..p.item_params.felts_per_item {
        xof.fill(&mut w);
        felts.push(u64::from_le_bytes(w) & mask);
    }
}

/// unbalanced's options: the receiver's expected database fingerprint.
pub const OPTIONS: &[OptionDoc] = &[OptionDoc {
    name: "fingerprint",
    values: &[],
    help: "receiver: refuse a sender whose database parameters have another fingerprint",
}];

/// unbalanced's parameters from its options.
pub fn params_of_options(named: &Named) -> crate::error::Result<ProtocolParams> {
    Ok(ProtocolParams::Unbalanced(UnbalancedJob { fingerprint: named.get("fingerprint").map(str::to_string) }))
}

/// Its roles ([`Spec::roles`]): the sender with its database, the receiver with its items.
fn roles(mut ch: &mut dyn Channel, call: Call<'_>, report: &mut Report) -> crate::error::Result<Outcome> {
    match (call.ctx.role, &call.input, call.params) {
        (Role::Sender, &Input::Database(db), _) => sender(&mut ch, call.ctx, db, report).map(|()| Outcome::Nothing),
        (Role::Receiver, &Input::Items(y), ProtocolParams::Unbalanced(u)) => {
            receiver(&mut ch, call.ctx, y, u.fingerprint.as_deref(), report)
        }
        _ => Err(call.unsupported()),
    }
}

// Named like the variants these constants replaced, so callers' `Protocol::Unbalanced` reads
// as before.
#[allow(non_upper_case_globals)]
impl Protocol {
    /// Unbalanced PSI from HE with a preprocessed sender database (APSI design).
    pub const Unbalanced: Protocol = Protocol::declared_by(&SPEC);
}

/// The registry's facts about unbalanced PSI: the sender serves a database.
pub static SPEC: Spec = Spec {
    name: "unbalanced",
    operations: &[Operation::Intersection],
    security: Security::SemiHonest,
    reveal_both: &[],
    staged: &[],
    own_stages: false,
    live_role_bytes: 0,
    takes: |_, role| if role == Role::Sender { Takes::Database } else { Takes::Items },
    leakage: Leakage {
        model: "semi-honest sender, malicious receiver (no circuit privacy)",
        text: "The sender learns how many items the receiver queried and nothing about them. The \
               receiver learns which of its items are in the sender's database, the database's size \
               and its shape (bundles per index), and, rarely, that an unknown sender item shares a \
               few bits of a keyed hash with one of its own. As with fhe, there is no circuit privacy.",
        doc: "docs/protocols/unbalanced.md",
    },
    page: include_str!("../../../../../docs/protocols/unbalanced.md"),
    demo_items: 1 << 16,
    options: OPTIONS,
    params: params_of_options,
    roles,
};
