//! Vector oblivious linear evaluation over GF(2^128): silent VOLE (Boyle, Couteau,
//! Gilboa, Ishai, Kohl, Scholl, CCS 2019; parameters as in libOTe), semi-honest.
//!
//! - [`noisy`]: a short VOLE from 128 base OTs (Gilboa's multiplication): the sender
//!   holds Δ, the receiver values y_j, and they end with z'_j = z_j + y_j·Δ;
//! - [`pprf`]: punctured pseudorandom functions from GGM trees and random OTs: the
//!   receiver learns every leaf of each tree but one, where it gets the sender's leaf
//!   plus a value the sender chose;
//! - [`code`]: the expand-convolute code that compresses a sparse VOLE (dual LPN);
//! - [`silent`]: the three put together: a VOLE of any length k with A pseudorandom,
//!   for about 128·⌈log2(2k/128)⌉ random OTs and 256 KiB of noisy VOLE.
//!
//! Roles are the VOLE's: the *sender* holds Δ, the *receiver* the input vector.

pub mod code;
pub mod messages;
pub mod noisy;
pub mod pprf;
pub mod silent;
#[cfg(test)]
mod splitting_attack;

pub use silent::{
    SilentParams, VoleReceiver, VoleSender, silent_receive, silent_receive_told, silent_send, silent_send_told,
};

/// Told how far a long step of a silent VOLE is: what it counts (plural), how many are
/// done, of how many. It may be called from worker threads, so it must return quickly.
pub type Tell<'a> = &'a (dyn Fn(&'static str, u64, u64) + Sync);

/// A [`Tell`] that tells nobody.
pub fn untold(_: &'static str, _: u64, _: u64) {}
