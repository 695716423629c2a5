//! The mqRPMT framework (Yu Chen, Min Zhang, Cong Zhang, Minglang Dong, Weiran Liu,
//! *Private Set Operations from Multi-query Reverse Private Membership Test*, PKC 2024,
//! Fig. 3, Figs. 5–6, Fig. 7 and §6.2): one membership test plus OT gives intersection,
//! cardinality, sum, secret shares, union and private-ID. The membership test comes
//! from a commutative weak PRF (`cwprf`, the default) or a permuted OPRF (`poprf`):
//! [`Construction`].
//!
//! Roles: the hello's *receiver* is the paper's P1, the mqRPMT server, holding Y; the
//! *sender* is P2, the client, holding X (and, for `sum`, a value per item). The client
//! shuffles X, the server learns the bits e_i = [x_i ∈ Y] in that shuffled order, and
//! OT turns the bits into the operation's output:
//! - `cardinality`: the receiver outputs Σe_i;
//! - `intersection`: one-sided OT of a 128-bit tag of x_i where e_i = 1; the receiver
//!   looks the tags up among its own items;
//! - `union`: one-sided OT of x_i where e_i = 0; the receiver outputs Y ∪ {those};
//! - `sum`: chosen OT of (r_i, r_i + v_i) mod q; the receiver returns Σ and Σe to the
//!   sender, who removes Σr_i; or, reverse ([`SumTo::Receiver`]), the masks sum to zero
//!   and the receiver's Σ is the sum, which it keeps;
//! - `shares`: chosen OT of (r_i, r_i ⊕ x̄_i); row i's shares XOR to x̄_i (the padded item)
//!   if x_i ∈ Y and to zero otherwise;
//! - `private-id`: two VOLE OPRFs, one keyed by each party, give every item the ID
//!   F_A(z) ⊕ F_B(z); then the union's transfer on the IDs (`private_id.rs`).
//!
//! Security: semi-honest, DDH in ristretto255 with hash-to-group (and, for `poprf`, the
//! query tags' hash) as a random oracle,
//! IKNP OT with a fixed-key-AES correlation-robust hash; `private-id` also rests on the
//! silent VOLE's dual-LPN assumption (docs/protocols/vole.md). What each party learns and the
//! failure probabilities: docs/protocols/mqrpmt.md. Wire: docs/wire-format.md#mqrpmt.
//!
//! ```
//! use setwise::net::MemoryChannel;
//! use setwise::{Input, Job, Operation, Outcome, Protocol, Role, run};
//!
//! // `sum`: the sender holds a value per item and learns their sum over X ∩ Y.
//! let job = Job::new(Protocol::Mqrpmt, Operation::Sum);
//! let (x, values) = (["ann", "bob", "cid"], [250u64, 100, 75]);
//! let y = ["bob", "cid", "dan"];
//! let (mut a, mut b) = MemoryChannel::pair(1 << 20);
//! let (sender, receiver) = std::thread::scope(|s| {
//!     let input = Input::Values { items: &x, values: &values, bound: 1000 };
//!     let sender = s.spawn(|| run(&mut a, &job, Role::Sender, input));
//!     let receiver = run(&mut b, &job, Role::Receiver, Input::Items(&y)).unwrap();
//!     (sender.join().unwrap().unwrap(), receiver)
//! });
//! assert_eq!(sender.0, Outcome::CardinalitySum { cardinality: 2, sum: 175 });
//! assert_eq!(receiver.0, Outcome::Cardinality(2));
//! ```

mod codec;
pub mod messages;
mod operations;
mod private_id;
mod rpmt;

pub use codec::ItemCodec;
pub use operations::{Shares, Values, sum_width};
pub use rpmt::{Construction, LastMove, client, server};

use crate::crypto::rng::shuffle;
use crate::error::Result;
use crate::net::Channel;
use crate::protocols::params::{Named, OptionDoc, ProtocolParams};
use crate::protocols::spec::{Leakage, Spec, values_for_sum};
use crate::protocols::{Call, Input, Role};
use crate::protocols::{Context, Operation, Outcome, Report};
use crate::protocols::{Protocol, Security, SumTo};

pub use crate::protocols::params::mqrpmt::MqrpmtParams;

/// mqrpmt's options: the membership test's construction and its last move.
pub const OPTIONS: &[OptionDoc] = &[
    OptionDoc { name: "rpmt", values: &["cwprf", "poprf"], help: "the membership test's construction (default cwprf)" },
    OptionDoc {
        name: "last_move",
        values: &["bloom", "shuffle"],
        help: "how the sender returns the receiver's keyed items (default: the construction's)",
    },
];

/// mqrpmt's parameters from its options: the last move defaults to the construction's.
pub fn params_of_options(named: &Named) -> Result<ProtocolParams> {
    let construction: Construction = named.parse("rpmt")?.unwrap_or_default();
    let last_move = named.parse("last_move")?.unwrap_or(construction.default_last_move());
    Ok(ProtocolParams::Mqrpmt(MqrpmtParams { construction, last_move }))
}

/// The client P2 (the hello's sender) with its items X and, for `sum`, its values.
///
/// Learns nothing, except with `sum` given to the sender, [`SumTo::Sender`] (|X ∩ Y| and
/// the sum of its values over X ∩ Y), `shares` (its shares) and `private-id` (the IDs).
#[allow(clippy::too_many_arguments)] // one per fact of the run; `roles` is the caller
pub fn sender<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    ctx: &Context,
    op: Operation,
    items: &[I],
    values: Option<Values<'_>>,
    sum_to: SumTo,
    params: &MqrpmtParams,
    report: &mut Report,
) -> Result<Outcome> {
    match op {
        Operation::PrivateId => private_id::client(ch, ctx, items, params, report),
        _ => operations::sender(ch, ctx, op, items, values, sum_to, params, report),
    }
}

/// The server P1 (the hello's receiver) with its items Y; learns the operation's output
/// (with `sum` given to the receiver, [`SumTo::Receiver`], the sum of the sender's values
/// over X ∩ Y too).
pub fn receiver<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    ctx: &Context,
    op: Operation,
    items: &[I],
    sum_to: SumTo,
    params: &MqrpmtParams,
    report: &mut Report,
) -> Result<Outcome> {
    match op {
        Operation::PrivateId => private_id::server(ch, ctx, items, params, report),
        _ => operations::receiver(ch, ctx, op, items, sum_to, params, report),
    }
}

/// Paper Fig. 7 step 0: a uniformly random order of the client's items, and the items
/// in it, so the server learns its bits in an order that says nothing.
fn shuffled<I: AsRef<[u8]>>(items: &[I]) -> (Vec<usize>, Vec<&[u8]>) {
    let mut order: Vec<usize> = (0..items.len()).collect();
    shuffle(&mut order);
    let xs = order.iter().map(|&i| items[i].as_ref()).collect();
    (order, xs)
}

/// Its roles ([`Spec::roles`]): the sender with its items (and, for `sum`, its values),
/// the receiver with its items.
fn roles(mut ch: &mut dyn Channel, call: Call<'_>, report: &mut Report) -> Result<Outcome> {
    let (ProtocolParams::Mqrpmt(m), ctx, op, to) = (call.params, call.ctx, call.operation, call.sum_to) else {
        return Err(call.unsupported());
    };
    match (ctx.role, &call.input) {
        (Role::Sender, &Input::Items(x)) => sender(&mut ch, ctx, op, x, None, to, m, report),
        (Role::Sender, &Input::Values { items, values, bound }) => {
            sender(&mut ch, ctx, op, items, Some(Values { values, bound }), to, m, report)
        }
        (Role::Receiver, &Input::Items(y)) => receiver(&mut ch, ctx, op, y, to, m, report),
        _ => Err(call.unsupported()),
    }
}

// Named like the variants these constants replaced, so callers' `Protocol::Mqrpmt` reads
// as before.
#[allow(non_upper_case_globals)]
impl Protocol {
    /// The mqRPMT framework: intersection, cardinality, sum, secret shares, union and
    /// private-ID from one membership test plus OT.
    pub const Mqrpmt: Protocol = Protocol::declared_by(&SPEC);
}

/// The registry's facts about the mqRPMT framework.
pub static SPEC: Spec = Spec {
    name: "mqrpmt",
    operations: Operation::OF_TWO_PARTIES,
    security: Security::SemiHonest,
    reveal_both: &[Operation::Intersection, Operation::Cardinality],
    staged: &[Operation::Intersection, Operation::Cardinality, Operation::Sum, Operation::Union, Operation::PrivateId],
    own_stages: false,
    // Peak RSS of the larger role of a one-bucket `setwise stage run` ÷ its items (2^20;
    // compact 2^15), an upper bound (docs/scale-out.md, "Memory").
    live_role_bytes: 344,
    takes: values_for_sum,
    leakage: Leakage {
        model: "semi-honest",
        text: "Both parties learn how many items the other holds. The receiver learns which of the \
               sender's (shuffled) items are in its set without knowing which item each is, and so \
               always learns the size of the intersection, even when the operation's output is \
               only a sum, secret shares, a union or private IDs. With the Bloom-filter last move a \
               false match has probability at most 2^-40 per item.",
        doc: "docs/protocols/mqrpmt.md",
    },
    page: include_str!("../../../../../docs/protocols/mqrpmt.md"),
    demo_items: 1 << 20,
    options: OPTIONS,
    params: params_of_options,
    roles,
};
