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
//! 2. sender → receiver: a·H(x) for each x, shuffled, chunked; meanwhile the sender
//!    computes a·b·H(y);
//! 3. sender → receiver: a·b·H(y) in the receiver's order (`intersection`) or shuffled
//!    (`cardinality`); the receiver computes b·a·H(x) and matches.

mod receiver;
mod sender;

pub use receiver::receiver;
pub use sender::sender;

/// Receiver → sender: a chunk of b·H(y).
pub(crate) const TAG_RECEIVER_BLINDED: u8 = 0x10;
/// Sender → receiver: a chunk of a·H(x), shuffled.
pub(crate) const TAG_SENDER_BLINDED: u8 = 0x11;
/// Sender → receiver: a chunk of a·b·H(y).
pub(crate) const TAG_DOUBLE_BLINDED: u8 = 0x12;

use crate::group::ItemHasher;
use crate::hash::{Domain, dst};
use crate::session::Session;

fn item_hasher(session: &Session) -> ItemHasher {
    ItemHasher::new(&Domain::new(dst::ECDH_ITEM_TO_GROUP, session.id))
}
