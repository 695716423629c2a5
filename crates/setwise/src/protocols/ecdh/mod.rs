//! DH-PSI: the receiver learns X ∩ Y (or only |X ∩ Y|).
//!
//! Paper: Meadows 1986 / Huberman–Franklin–Hogg 1999, the baseline of Chen et al.,
//! *Private Set Operations from Multi-query Reverse Private Membership Test*, §7.
//! Security: semi-honest; DDH in ristretto255 with hash-to-group as a random oracle.
//! Leakage: both learn |X| and |Y|; with `intersection` the receiver learns which of
//! its items match, with `cardinality` only how many. Failure: a false match needs a
//! collision of two distinct items' points, probability ≤ |X|·|Y|·2^-252.
//! Wire: docs/wire-format.md#ecdh.
//!
//! Flow (receiver holds Y with key b, sender holds X with key a):
//! 1. receiver → sender: b·H(y) for each y, in the receiver's order, chunked;
//! 2. sender → receiver: a·H(x) for each x, sorted (the shuffle), chunked; meanwhile
//!    the sender computes a·b·H(y);
//! 3. sender → receiver: a·b·H(y) in the receiver's order (`intersection`) or sorted
//!    (`cardinality`); the receiver computes b·a·H(x) and matches.
//!
//! The same steps run without a channel in [`steps`], and staged (with keys from a
//! run seed) in `staged::ecdh`.
//!
//! ```
//! use setwise::net::MemoryChannel;
//! use setwise::protocols::{Context, Outcome, Report, Role, ecdh};
//! use setwise::{Operation, crypto::dst::SessionId};
//!
//! // Both roles over an in-memory channel, with a context as a hello would agree it.
//! let (x, y) = (["a", "b", "c"], ["b", "c", "d"]);
//! let ctx = |role, own, peer| Context { id: SessionId([7; 32]), role, own_size: own, peer_size: peer };
//! let (mut a, mut b) = MemoryChannel::pair(1 << 20);
//! let got = std::thread::scope(|s| {
//!     s.spawn(|| ecdh::sender(&mut a, &ctx(Role::Sender, 3, 3), Operation::Intersection, &x, &mut Report::default()));
//!     ecdh::receiver(&mut b, &ctx(Role::Receiver, 3, 3), Operation::Intersection, &y, &mut Report::default())
//! });
//! assert_eq!(got.unwrap(), Outcome::Intersection(vec![0, 1]));
//! ```

pub mod messages;
mod receiver;
mod sender;
pub mod steps;

pub use receiver::receiver;
pub use sender::sender;

use crate::crypto::dst::{self, Domain, SessionId};
use crate::crypto::ristretto::ItemHasher;
use crate::error::Result;
use crate::net::Channel;
use crate::protocols::params::no_params;
use crate::protocols::spec::{Leakage, Spec, items_only};
use crate::protocols::{Call, Input, Outcome, Report, Role};
use crate::protocols::{Operation, Protocol, Security};

/// H: items to ristretto255 in `session`, as every DH-PSI step hashes them (staged runs
/// use it too, so their points equal a single-machine run's).
pub fn item_hasher(session: SessionId) -> ItemHasher {
    ItemHasher::new(&Domain::new(dst::ECDH_ITEM_TO_GROUP, session))
}

/// Its roles ([`Spec::roles`]): the sender and the receiver, each with its items.
fn roles(mut ch: &mut dyn Channel, call: Call<'_>, report: &mut Report) -> Result<Outcome> {
    match (call.ctx.role, &call.input) {
        (Role::Sender, &Input::Items(x)) => {
            sender(&mut ch, call.ctx, call.operation, x, report).map(|()| Outcome::Nothing)
        }
        (Role::Receiver, &Input::Items(y)) => receiver(&mut ch, call.ctx, call.operation, y, report),
        _ => Err(call.unsupported()),
    }
}

// Named like the variants these constants replaced, so callers' `Protocol::Ecdh` reads
// as before.
#[allow(non_upper_case_globals)]
impl Protocol {
    /// Diffie–Hellman PSI over ristretto255.
    pub const Ecdh: Protocol = Protocol::declared_by(&SPEC);
}

/// The registry's facts about DH-PSI.
pub static SPEC: Spec = Spec {
    name: "ecdh",
    operations: &[Operation::Intersection, Operation::Cardinality],
    security: Security::SemiHonest,
    reveal_both: &[Operation::Intersection, Operation::Cardinality],
    staged: &[Operation::Intersection, Operation::Cardinality],
    own_stages: true,
    live_role_bytes: 0,
    takes: items_only,
    leakage: Leakage {
        model: "semi-honest",
        text: "Both parties learn how many items the other holds. With intersection the receiver \
               learns which of its own items the sender also holds; with cardinality only how many. \
               The sender learns nothing about the receiver's items beyond their number. A party \
               that cheats can make the result wrong; the protocol assumes both follow it.",
        doc: "docs/protocols/ecdh.md",
    },
    page: include_str!("../../../../../docs/protocols/ecdh.md"),
    demo_items: 1 << 20,
    options: &[],
    params: no_params,
    roles,
};
