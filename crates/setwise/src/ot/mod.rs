//! Oblivious transfer: base OT over ristretto255 (Chou–Orlandi; Masny–Rindal when
//! malicious), IKNP OT extension to any number of random OTs with a fixed-key-AES
//! correlation-robust hash (with the KOS check when malicious), and on top of them
//! chosen-message 1-out-of-2 OT and one-sided OT (semi-honest).
//!
//! Roles follow the OT, not the PSI: the *OT sender* ends with two messages per OT, the
//! *OT receiver* with the one its choice bit selects. Every function runs over a
//! [`Channel`](crate::net::Channel) and is domain-separated by the session id.

mod base;
mod iknp;
pub mod messages;
mod transfer;

pub use base::{base_receive, base_send};
pub use iknp::{extend_receive, extend_send, transpose128};
pub use transfer::{receive_chosen, receive_one_sided, send_chosen, send_one_sided};

/// A 128-bit OT message or key.
pub type Block = u128;

/// Base OTs behind an extension: the computational security parameter κ.
pub const KAPPA: usize = 128;
