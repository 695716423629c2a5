//! Compact malicious PSI for small sets (Rosulek–Trieu, CCS 2021): the receiver learns
//! X ∩ Y; communication is about 64 bytes per item and one and a half round trips.
//!
//! Paper: Rosulek, Trieu, *Compact and Malicious Private Set Intersection for Small Sets*,
//! reviewed in `papers/compact-malicious-psi-small-sets-study.txt` §3.4.
//! Security: malicious, in the random-oracle and ideal-permutation models, under CDH on
//! Curve25519; see docs/protocols/compact.md for what that covers and what leaks.
//! Wire: docs/wire-format.md#compact.
//!
//! Flow (sender holds X with key a = 8·a₀, receiver holds Y):
//! 1. sender → receiver: A = 8·a₀·G;
//! 2. receiver: per y a fresh b, an Elligator 2 representative m of b·G + T (T a random
//!    8-torsion point, resampled until one exists), f = Π⁻¹(m); interpolates P with
//!    P(H1(y)) = f over GF(2^128 − 159)² and sends its coefficients;
//! 3. sender: checks P, then per x: m = Π(P(H1(x))), K = a₀·8·decode(m), sends the
//!    shuffled tags H2(x, u(K)); the receiver matches them against H2(y, u(b·A)).
//!
//! ```
//! use setwise::net::MemoryChannel;
//! use setwise::{Input, Job, Operation, Outcome, Protocol, Role, run};
//!
//! let job = Job::new(Protocol::Compact, Operation::Intersection);
//! let (x, y) = (["a", "b", "c", "d"], ["d", "e", "b"]);
//! let (mut a, mut b) = MemoryChannel::pair(1 << 20);
//! let got = std::thread::scope(|s| {
//!     let sender = s.spawn(|| run(&mut a, &job, Role::Sender, Input::Items(&x)));
//!     let got = run(&mut b, &job, Role::Receiver, Input::Items(&y)).unwrap();
//!     sender.join().unwrap().unwrap();
//!     got
//! });
//! assert_eq!(got.0, Outcome::Intersection(vec![0, 2]));
//! ```

pub mod messages;
mod receiver;
mod sender;

pub use receiver::receiver;
pub use sender::sender;

use crate::crypto::dst::{self, Domain};
use crate::crypto::wideperm::WidePermutation;
use crate::error::Result;
use crate::math::fp128::F128;
use crate::net::Channel;
use crate::protocols::Context;
use crate::protocols::params::no_params;
use crate::protocols::spec::{Leakage, Spec, items_only};
use crate::protocols::{Call, Input, Outcome, Report, Role};
use crate::protocols::{Operation, Protocol, Security};

/// Largest set either side may hold: 2^20. Interpolation and evaluation are O(n log² n)
/// ([`fastpoly`](crate::math::fastpoly)); at 2^20 the receiver's polynomial is a 32 MiB
/// message, half the default frame limit, and the receiver's peak memory about 1 GB.
pub const MAX_SET: usize = 1 << 20;

/// Points from which the receiver interpolates with the O(n log² n) code rather than the
/// quadratic one (`cargo run --release -p setwise --example interpolation-speed`: the
/// fast code is even at 2^8 and ahead from 2^9).
const FAST_INTERPOLATION_FROM: usize = 1 << 9;

/// Polynomial length and item count from which the sender evaluates with the
/// O(n log² n) code rather than by Horner's rule on every item (even at 2^10, ahead
/// above it in the same example).
const FAST_EVALUATION_FROM: usize = 1 << 10;

/// Coefficients of the receiver's polynomial for `n` items: n, but at least 2. A constant
/// polynomial would give every sender item the same key (the sender rejects it), so a
/// receiver with one item adds a random point.
pub fn polynomial_len(n: usize) -> usize {
    n.max(2)
}

/// A 32-byte tag H2(item, key).
pub(crate) type Tag = [u8; 32];

/// The session's hash functions and permutation.
pub(crate) struct Hashes {
    h1: blake3::Hasher,
    h2: blake3::Hasher,
    pub(crate) perm: WidePermutation,
}

impl Hashes {
    pub(crate) fn new(ctx: &Context) -> Self {
        Self {
            h1: Domain::new(dst::COMPACT_ITEM_TO_FIELD, ctx.id).hasher(),
            h2: Domain::new(dst::COMPACT_TAG, ctx.id).hasher(),
            perm: WidePermutation::new(&Domain::new(dst::COMPACT_PERMUTATION, ctx.id)),
        }
    }

    /// H1: the item's interpolation point.
    pub(crate) fn point(&self, item: &[u8]) -> F128 {
        let mut h = self.h1.clone();
        h.update(item);
        let bytes: [u8; 16] = h.finalize().as_bytes()[..16].try_into().expect("16 of 32 bytes");
        F128::reduce(u128::from_le_bytes(bytes))
    }

    /// H2: the tag of an item under an agreed key (the key has a fixed length, so the
    /// concatenation is unambiguous).
    pub(crate) fn tag(&self, item: &[u8], key: &[u8; 32]) -> Tag {
        let mut h = self.h2.clone();
        h.update(item);
        h.update(key);
        *h.finalize().as_bytes()
    }
}

/// A value of the vector polynomial (two field elements) as the 32 bytes Π acts on.
pub(crate) fn pair_to_bytes(v: [F128; 2]) -> [u8; 32] {
    let mut out = [0u8; 32];
    out[..16].copy_from_slice(&v[0].to_bytes());
    out[16..].copy_from_slice(&v[1].to_bytes());
    out
}

/// The inverse of [`pair_to_bytes`]; `None` if a half is not canonical.
pub(crate) fn pair_from_bytes(b: &[u8; 32]) -> Option<[F128; 2]> {
    let half = |i: usize| F128::from_bytes(b[i * 16..i * 16 + 16].try_into().expect("16 bytes"));
    Some([half(0)?, half(1)?])
}

/// Checks both announced sizes against [`MAX_SET`] before anything is allocated.
pub(crate) fn check_sizes(ctx: &Context) -> Result<()> {
    ctx.check_sizes("compact PSI", MAX_SET, "use --protocol vole --security malicious for larger sets")
}

/// Its roles ([`Spec::roles`]): the sender and the receiver, each with its items.
fn roles(mut ch: &mut dyn Channel, call: Call<'_>, report: &mut Report) -> Result<Outcome> {
    match (call.ctx.role, &call.input) {
        (Role::Sender, &Input::Items(x)) => sender(&mut ch, call.ctx, x, report).map(|()| Outcome::Nothing),
        (Role::Receiver, &Input::Items(y)) => receiver(&mut ch, call.ctx, y, report),
        _ => Err(call.unsupported()),
    }
}

// Named like the variants these constants replaced, so callers' `Protocol::Compact` reads
// as before.
#[allow(non_upper_case_globals)]
impl Protocol {
    /// Compact malicious PSI for small sets (Rosulek–Trieu).
    pub const Compact: Protocol = Protocol::declared_by(&SPEC);
}

/// The registry's facts about compact malicious PSI.
pub static SPEC: Spec = Spec {
    name: "compact",
    operations: &[Operation::Intersection],
    security: Security::Malicious,
    reveal_both: &[Operation::Intersection],
    staged: &[Operation::Intersection],
    own_stages: false,
    // Peak RSS of the larger role of a one-bucket `setwise stage run` ÷ its items (2^20;
    // compact 2^15), an upper bound (docs/scale-out.md, "Memory"). It holds past 2^16:
    // `setwise receiver` of 2^20 items against a sender of 2^16 peaks at 1.04 GB (990 bytes
    // an item), its sender at 0.63 GB.
    live_role_bytes: 1176,
    takes: items_only,
    leakage: Leakage {
        model: "malicious",
        text: "Both parties learn how many items the other holds. The receiver learns which of its \
               items the sender also holds. A cheating receiver can test at most as many items of \
               its choice as it announced; a cheating sender cannot make the receiver output an item \
               the sender does not hold, nor learn anything about the receiver's items.",
        doc: "docs/protocols/compact.md",
    },
    page: include_str!("../../../../../docs/protocols/compact.md"),
    // The browser demo stays at the sizes a page answers in seconds.
    demo_items: 1 << 16,
    options: &[],
    params: no_params,
    roles,
};
