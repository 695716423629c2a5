//! Vector oblivious linear evaluation over GF(2^128), built up towards silent VOLE
//! (Boyle, Couteau, Gilboa, Ishai, Kohl, Scholl, CCS 2019; as in libOTe):
//!
//! - [`noisy`]: a short VOLE from 128 base OTs (Gilboa's multiplication): the sender
//!   holds Δ, the receiver values y_j, and they end with z'_j = z_j + y_j·Δ;
//! - [`pprf`]: punctured pseudorandom functions from GGM trees and random OTs: the
//!   receiver learns every leaf of each tree but one, where it gets the sender's leaf
//!   plus a value the sender chose.
//!
//! Together they give a VOLE with a sparse (regular-noise) input; compressing it with a
//! linear code (dual LPN) to a uniform one is the next step (docs/protocols/vole.md).
//! Roles are the VOLE's: the *sender* holds Δ, the *receiver* the input vector.

pub mod messages;
pub mod noisy;
pub mod pprf;
