//! PSI from silent VOLE and an OKVS (Raghuraman–Rindal, "Blazing Fast PSI from Improved
//! OKVS and Subfield VOLE", CCS 2022, Fig. 11), semi-honest: the receiver learns X ∩ Y,
//! the sender nothing; each learns the other's set size.
//!
//! Flow (receiver holds Y, sender X; H gives each item an OKVS key k and a value h):
//! 1. a silent VOLE of length m (the store's size): the sender gets Δ and B, the
//!    receiver A′ and C = B + A′·Δ ([`crate::vole`]);
//! 2. receiver: P = Encode({k(y) ↦ h(y)}) (RB-OKVS, [`crate::okvs`]); sends the seed and
//!    A = P + A′;
//! 3. sender: K = B + A·Δ = C + P·Δ; for each x the tag
//!    H_o(k(x), Decode(K, k(x)) + h(x)·Δ), truncated to [`tag_bytes`], shuffled, sent;
//! 4. receiver: decoding is linear, so for y ∈ Y, where Decode(P, k(y)) = h(y), the
//!    sender's value is Decode(C, k(y)); the receiver keeps the y whose tag
//!    H_o(k(y), Decode(C, k(y))) came.
//!
//! For x ∉ Y, Decode(P, k(x)) + h(x) is unknown to the sender and nonzero except with
//! probability 2^-128, so its tag hides a uniform Δ multiple: the receiver sees random
//! strings. Docs: docs/protocols/vole.md (leakage, parameters, failure probability, wire).
//!
//! ```
//! use setwise::net::MemoryChannel;
//! use setwise::{Input, Job, Operation, Outcome, Protocol, Role, run};
//!
//! let job = Job::new(Protocol::Vole, Operation::Intersection);
//! let (x, y) = (["a", "b", "c", "d"], ["d", "e", "b"]);
//! let (mut a, mut b) = MemoryChannel::pair(1 << 24);
//! let got = std::thread::scope(|s| {
//!     let sender = s.spawn(|| run(&mut a, &job, Role::Sender, Input::Items(&x)));
//!     let got = run(&mut b, &job, Role::Receiver, Input::Items(&y)).unwrap();
//!     sender.join().unwrap().unwrap();
//!     got
//! });
//! assert_eq!(got.0, Outcome::Intersection(vec![0, 2]));
//! ```

mod mask;
pub mod messages;
pub(crate) mod oprf;
mod receiver;
mod sender;

pub use receiver::receiver;
pub use sender::sender;

use crate::crypto::dst::{self, Domain};
use crate::error::Result;
use crate::math::gf128::Gf128;
use crate::net::Channel;
use crate::okvs::OkvsParams;
use crate::protocols::params::no_params;
use crate::protocols::spec::{Leakage, Spec, items_only};
use crate::protocols::{Call, Input, Outcome, Report, Role};
use crate::protocols::{Context, Security};
use crate::protocols::{Operation, Protocol};
use rayon::prelude::*;

/// Largest set either side may hold: 2^26. Memory grows by about 0.5 GiB per 2^20
/// items on the receiver's side; larger sets are split into buckets (docs/scale-out.md).
pub const MAX_SET: usize = 1 << 26;

// The tags' statistical security (2^-40 per run) and length, shared with the other short
// tags on the wire.
pub use crate::wire::tags::{TAG_SECURITY, tag_bytes};

/// The store's shape for the receiver's set.
pub fn store_params(receiver: usize) -> OkvsParams {
    OkvsParams::for_items(receiver)
}

/// Checks both announced sizes against [`MAX_SET`] before anything is allocated.
pub(crate) fn check_sizes(ctx: &Context) -> Result<()> {
    ctx.check_sizes("vole PSI", MAX_SET, "split larger sets into buckets")
}

/// The item hash and the output hash of one OPRF session.
pub(crate) struct Hashes {
    // BLAKE3 keys of the two domains: `keyed_hash` of a short input is what a keyed
    // `Hasher` gives, without copying the hasher's 1.9 KB state per item.
    item: [u8; 32],
    output: [u8; 32],
    len: usize,
    // Whether H_o takes the item's whole 256-bit digest (k and h), as the malicious
    // variant needs, or its key k only.
    whole: bool,
}

impl Hashes {
    /// The hashes of VOLE-PSI in session `ctx` at `security`: tags of [`tag_bytes`]
    /// (semi-honest), or 16 bytes of H_o over the whole item digest (malicious: the
    /// receiver's store may hold more keys than it announced, so the tag length cannot
    /// count on its size).
    pub(crate) fn new(ctx: &Context, security: Security) -> Self {
        match security {
            Security::SemiHonest => Self::of(
                ctx.id,
                [dst::VOLE_PSI_ITEM, dst::VOLE_PSI_TAG],
                tag_bytes(ctx.sender_size(), ctx.receiver_size()),
            ),
            Security::Malicious => {
                Self { whole: true, ..Self::of(ctx.id, [dst::VOLE_PSI_ITEM, dst::VOLE_PSI_TAG_MALICIOUS], 16) }
            }
        }
    }

    /// The hashes of session `sid` under the labels `[item, output]`, tags of `len`
    /// bytes (at most 16), H_o over an item's key.
    pub(crate) fn of(sid: crate::crypto::dst::SessionId, labels: [&'static str; 2], len: usize) -> Self {
        Self { item: Domain::new(labels[0], sid).key(), output: Domain::new(labels[1], sid).key(), len, whole: false }
    }

    /// Each item's OKVS key and value.
    pub(crate) fn items<I: AsRef<[u8]> + Sync>(&self, items: &[I]) -> Vec<(u128, Gf128)> {
        items
            .par_iter()
            .map(|x| {
                let out = blake3::keyed_hash(&self.item, x.as_ref());
                let b = out.as_bytes();
                let half = |i: usize| u128::from_le_bytes(b[16 * i..16 * i + 16].try_into().expect("16 bytes"));
                (half(0), Gf128(half(1)))
            })
            .collect()
    }

    /// The OPRF output of a hashed item and its value: H_o(k, v), or H_o(k, h, v) over
    /// the whole digest, 32 bytes.
    pub(crate) fn output(&self, (key, h): (u128, Gf128), value: Gf128) -> [u8; 32] {
        let mut input = [0u8; 48];
        input[..16].copy_from_slice(&key.to_le_bytes());
        let at = if self.whole {
            input[16..32].copy_from_slice(&h.to_bytes());
            32
        } else {
            16
        };
        input[at..at + 16].copy_from_slice(&value.to_bytes());
        *blake3::keyed_hash(&self.output, &input[..at + 16]).as_bytes()
    }

    /// The tag of a hashed item and its OPRF value: the first [`Hashes::len`] bytes of
    /// [`Hashes::output`], the rest zero.
    pub(crate) fn tag(&self, item: (u128, Gf128), value: Gf128) -> u128 {
        let t = u128::from_le_bytes(self.output(item, value)[..16].try_into().expect("16 bytes"));
        if self.len == 16 { t } else { t & ((1u128 << (8 * self.len)) - 1) }
    }

    /// Bytes per tag on the wire (at most 16).
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

/// Its roles ([`Spec::roles`]): the sender and the receiver, each with its items.
fn roles(mut ch: &mut dyn Channel, call: Call<'_>, report: &mut Report) -> Result<Outcome> {
    match (call.ctx.role, &call.input) {
        (Role::Sender, &Input::Items(x)) => {
            sender(&mut ch, call.ctx, call.security, x, report).map(|()| Outcome::Nothing)
        }
        (Role::Receiver, &Input::Items(y)) => receiver(&mut ch, call.ctx, call.security, y, report),
        _ => Err(call.unsupported()),
    }
}

// Named like the variants these constants replaced, so callers' `Protocol::Vole` reads
// as before.
#[allow(non_upper_case_globals)]
impl Protocol {
    /// PSI from silent VOLE and an OKVS (Raghuraman–Rindal): fast for large sets.
    pub const Vole: Protocol = Protocol::declared_by(&SPEC);
}

/// The registry's facts about PSI from silent VOLE.
pub static SPEC: Spec = Spec {
    name: "vole",
    operations: &[Operation::Intersection],
    security: Security::Malicious,
    reveal_both: &[Operation::Intersection],
    staged: &[Operation::Intersection],
    own_stages: false,
    // Peak RSS of the larger role of a one-bucket `setwise stage run` ÷ its items (2^20;
    // compact 2^15), an upper bound (docs/scale-out.md, "Memory").
    live_role_bytes: 360,
    takes: items_only,
    leakage: Leakage {
        model: "semi-honest, or malicious with --security malicious",
        text: "Each party learns the other's set size. The receiver learns the intersection; the \
               sender learns nothing. The sender shuffles its tags, so their order tells the \
               receiver nothing about where the matches sit in the sender's list. Under \
               --security malicious, checks refuse a peer that deviates; a cheating receiver can \
               test up to the store's size (about 1.15 times its announced items) of its choice.",
        doc: "docs/protocols/vole.md",
    },
    page: include_str!("../../../../../docs/protocols/vole.md"),
    demo_items: 1 << 20,
    options: &[],
    params: no_params,
    roles,
};
