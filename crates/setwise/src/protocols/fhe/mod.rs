//! FHE-PSI with depth-bounded BFV: the receiver learns X ∩ Y.
//!
//! Paper: Chang et al. as tuned by Saldamli–Acuña, *FRP-39: Even Faster Private Set
//! Intersection* (shared/papers/fhe-psi-depth-bounded-bfv.txt). Security: semi-honest;
//! the receiver's set is protected by BFV (RLWE), the sender's by fresh random non-zero
//! multipliers; no circuit privacy (see docs/protocols/fhe.md). Failure: a false match
//! with probability ≤ 2^-40 per run ([`params::false_match_log2`]).
//! Wire: docs/wire-format.md#fhe.
//!
//! Each item is hashed to `felts` field elements of F_t, one per slot. The receiver
//! (the paper's Alice) encrypts its items, batched, replicated across unused slots,
//! as the source powers of [`params::FheParams`]; the sender (Bob) derives every power
//! `c^1..c^D` once per receiver ciphertext, and for each group of chunks of D of its
//! items evaluates `r ⊙ ∏(c − b)` as `Σ (r·a_i) c^i` with plaintext coefficients `a_i`
//! (ct×pt only), `r` fresh uniformly random non-zero per slot. Results are switched to
//! the last level and sent back; an item matches when all its slots decrypt to zero.
//!
//! ```
//! use setwise::net::MemoryChannel;
//! use setwise::{Input, Job, Operation, Outcome, Protocol, Role, run};
//!
//! let job = Job::new(Protocol::Fhe, Operation::Intersection);
//! let x: Vec<String> = (0..200).map(|i| format!("item{i}")).collect();
//! let y: Vec<String> = (150..170).map(|i| format!("item{i}")).collect();
//! let (mut a, mut b) = MemoryChannel::pair(64 << 20);
//! let got = std::thread::scope(|s| {
//!     let sender = s.spawn(|| run(&mut a, &job, Role::Sender, Input::Items(&x)));
//!     let got = run(&mut b, &job, Role::Receiver, Input::Items(&y)).unwrap();
//!     sender.join().unwrap().unwrap();
//!     got
//! });
//! assert_eq!(got.0, Outcome::Intersection((0..20).collect()));
//! assert!(got.1.details["fhe"].starts_with("N=")); // the parameters chosen from the sizes
//! ```

pub mod messages;
pub mod params;
mod receiver;
pub mod sender;

pub use params::FheParams;
pub use receiver::receiver;
pub use sender::sender;

use crate::crypto::dst::{self, Domain};
use crate::error::Result;
use crate::net::Channel;
use crate::protocols::Context;
use crate::protocols::params::no_params;
use crate::protocols::spec::{Leakage, Spec, items_only};
use crate::protocols::{Call, Input, Outcome, Report, Role};
use crate::protocols::{Operation, Protocol, Security};
use rayon::prelude::*;

/// Each item's `felts` field elements, flattened: hash the item in this session's
/// domain and reduce 64-bit words mod t (bias ≤ t/2^64).
pub(crate) fn item_felts<I: AsRef<[u8]> + Sync>(ctx: &Context, items: &[I], felts: usize, t: u64) -> Vec<u64> {
    let domain = Domain::new(dst::FHE_ITEM_TO_FIELD, ctx.id);
    items
        .par_iter()
        .flat_map_iter(|item| {
            let mut h = domain.hasher();
            h.update(item.as_ref());
            let mut xof = h.finalize_xof();
            (0..felts).map(move |_| {
                let mut w = [0u8; 8];
                xof.fill(&mut w);
                u64::from_le_bytes(w) % t
            })
        })
        .collect()
}

/// The slot of piece `felt` of item `item` in replica `replica`.
pub(crate) fn slot(p: &FheParams, replica: usize, item: usize, felt: usize) -> usize {
    (replica * p.items_per_ct + item) * p.felts + felt
}

/// Its roles ([`Spec::roles`]): the sender and the receiver, each with its items.
fn roles(mut ch: &mut dyn Channel, call: Call<'_>, report: &mut Report) -> Result<Outcome> {
    match (call.ctx.role, &call.input) {
        (Role::Sender, &Input::Items(x)) => sender(&mut ch, call.ctx, x, report).map(|()| Outcome::Nothing),
        (Role::Receiver, &Input::Items(y)) => receiver(&mut ch, call.ctx, y, report),
        _ => Err(call.unsupported()),
    }
}

// Named like the variants these constants replaced, so callers' `Protocol::Fhe` reads
// as before.
#[allow(non_upper_case_globals)]
impl Protocol {
    /// FHE-PSI with depth-bounded BFV.
    pub const Fhe: Protocol = Protocol::declared_by(&SPEC);
}

/// The registry's facts about FHE-PSI.
pub static SPEC: Spec = Spec {
    name: "fhe",
    operations: &[Operation::Intersection],
    security: Security::SemiHonest,
    reveal_both: &[Operation::Intersection],
    // Not staged: the fhe crate draws each ciphertext's seed from its own thread RNG
    // (fhe 0.1.1, SecretKey::try_encrypt), so a replay cannot repeat its messages.
    staged: &[],
    own_stages: false,
    live_role_bytes: 0,
    takes: items_only,
    leakage: Leakage {
        model: "semi-honest",
        text: "Both parties learn how many items the other holds, and so the parameters chosen. The \
               receiver learns which of its items match, and, rarely, that some unknown sender item \
               shares a few bits of hash with one of its own. There is no circuit privacy: the noise \
               in the encrypted results depends on the sender's data, which a receiver studying it \
               could in principle exploit.",
        doc: "docs/protocols/fhe.md",
    },
    page: include_str!("../../../../../docs/protocols/fhe.md"),
    demo_items: 1 << 14,
    options: &[],
    params: no_params,
    roles,
};
