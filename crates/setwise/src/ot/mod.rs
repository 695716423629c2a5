//! Oblivious transfer: base OT over ristretto255 (Chou–Orlandi), IKNP OT extension to
//! any number of random OTs with a fixed-key-AES correlation-robust hash, and on top of
//! them chosen-message 1-out-of-2 OT and one-sided OT. Semi-honest.
//!
//! Roles follow the OT, not the PSI: the *OT sender* ends with two messages per OT, the
//! *OT receiver* with the one its choice bit selects. Every function runs over a
//! [`Channel`](crate::net::Channel) and is domain-separated by the session id.

mod base;
mod iknp;
mod transfer;

pub use base::{base_receive, base_send};
pub use iknp::{extend_receive, extend_send, transpose128};
pub use transfer::{receive_chosen, receive_one_sided, send_chosen, send_one_sided};

/// A 128-bit OT message or key.
pub type Block = u128;

/// Base OTs behind an extension: the computational security parameter κ.
pub const KAPPA: usize = 128;

/// Base OT: the base sender's point A.
pub(crate) const TAG_BASE_A: u8 = 0x60;
/// Base OT: the base receiver's points B_i.
pub(crate) const TAG_BASE_B: u8 = 0x61;
/// IKNP: a chunk of the receiver's correction matrix u.
pub(crate) const TAG_IKNP_U: u8 = 0x62;
/// Chosen-message / one-sided OT: a chunk of masked messages.
pub(crate) const TAG_MASKED: u8 = 0x63;
