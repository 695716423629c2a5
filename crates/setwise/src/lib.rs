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

#![deny(unsafe_code)]

pub mod crypto;
pub mod error;
pub mod hashing;
pub mod he;
pub mod io;
pub mod math;
pub mod net;
pub mod ot;
pub mod protocols;
pub mod session;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod wire;

pub use error::{Error, Result};
pub use protocols::{Operation, Outcome, Protocol, Report, Role};
pub use session::Job;
