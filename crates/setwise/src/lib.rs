//! setwise: private set operations between parties who do not trust each other.
//!
//! Layers, top to bottom (data flows down, never up):
//! - [`session`]: the hello negotiation, running a role, reports;
//! - [`protocols`]: one module per protocol family, each role a function over a
//!   [`net::Channel`];
//! - building blocks: [`group`] (ristretto255), [`hash`] (domain separation),
//!   [`rng`] (OS randomness, shuffling);
//! - [`io`]: items from users' files, matching rows back out;
//! - [`net`] and [`wire`]: framed, metered, bounded channels and message codecs.
//!
//! See `docs/` for each protocol's security model, leakage and wire format.

#![forbid(unsafe_code)]

pub mod bloom;
pub mod elligator;
pub mod error;
pub mod fp128;
pub mod group;
pub mod hash;
pub mod hashing;
pub mod he;
pub mod io;
pub mod net;
pub mod oprf;
pub mod ot;
pub mod pairing;
pub mod poly;
pub mod protocols;
pub mod rng;
pub mod session;
pub mod testing;
pub mod wideperm;
pub mod wire;

pub use error::{Error, Result};
pub use protocols::{Operation, Outcome, Protocol};
pub use session::{Job, Report, Role};
