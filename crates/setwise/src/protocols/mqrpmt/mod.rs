//! The mqRPMT framework (Chen–Zhang–Wang–Yu, *Private Set Operations from Multi-query
//! Reverse Private Membership Test*, PKC 2024, Fig. 3, Fig. 7 and §6.2): one membership
//! test plus OT gives intersection, cardinality, sum, secret shares, union and
//! private-ID.
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
//!   sender, who removes Σr_i;
//! - `shares`: chosen OT of (r_i, r_i ⊕ x̄_i); row i's shares XOR to x̄_i (the padded item)
//!   if x_i ∈ Y and to zero otherwise;
//! - `private-id`: a DH distributed OPRF k1·k2·H(z) whose messages double as the
//!   membership test, then the union's transfer on the IDs.
//!
//! Security: semi-honest, DDH in ristretto255 with hash-to-group as a random oracle,
//! IKNP OT with a fixed-key-AES correlation-robust hash. What each party learns and the
//! failure probabilities: docs/protocols/mqrpmt.md. Wire: docs/wire-format.md#mqrpmt.

mod codec;
mod operations;
mod private_id;
mod rpmt;

pub use codec::ItemCodec;
pub use operations::{Shares, Values, receiver, sender, sum_width};
pub use rpmt::{LastMove, client, server};

/// Server → client: a chunk of F_k1(H(y)).
pub(crate) const TAG_SERVER_ITEMS: u8 = 0x70;
/// Client → server: a chunk of F_k2(F_k1(H(y))), shuffled (explicit-shuffle last move).
pub(crate) const TAG_SHUFFLED: u8 = 0x71;
/// Client → server: the Bloom filter of F_k2(F_k1(H(y))) (Bloom last move).
pub(crate) const TAG_FILTER: u8 = 0x72;
/// Client → server: a chunk of F_k2(H(x)), in the client's order.
pub(crate) const TAG_CLIENT_ITEMS: u8 = 0x73;
/// Client → server: the width in bytes of the OT messages (union, shares, sum).
pub(crate) const TAG_WIDTH: u8 = 0x74;
/// Server → client (sum): the masked sum S' and the cardinality.
pub(crate) const TAG_SUM: u8 = 0x75;
/// Private-ID: a chunk of blinded points s·H(z).
pub(crate) const TAG_BLINDED: u8 = 0x76;
/// Private-ID: a chunk of the peer's blinded points under the own key, in order.
pub(crate) const TAG_EVALUATED: u8 = 0x77;
/// Private-ID, client → server: the shuffled set r·k2·s·H(y) the server tests against.
pub(crate) const TAG_TEST_SET: u8 = 0x79;
/// Private-ID, server → client: the count, then chunks, of the sorted union IDs.
pub(crate) const TAG_UNION_IDS: u8 = 0x78;
