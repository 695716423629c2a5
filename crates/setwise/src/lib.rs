//! setwise: private set operations between parties who do not trust each other:
//! intersection, its size, a sum over it, secret shares of it, the union, shared IDs,
//! labelled look-ups and judge-authorised intersection.
//!
//! One entry point runs any role of any protocol: [`run`] takes a channel to the peer,
//! the [`Job`] both sides agreed on, this side's [`Role`] and its [`Input`], and returns
//! what the role learned ([`Outcome`]) with a [`Report`] of phases, times and bytes.
//!
//! ```
//! use setwise::net::MemoryChannel;
//! use setwise::{Input, Job, Operation, Outcome, Protocol, Role, run};
//!
//! // Two parties in one process, over an in-memory channel (TCP and the CLI work alike).
//! let job = Job::new(Protocol::Mqrpmt, Operation::Cardinality);
//! let sender: Vec<&str> = vec!["ann@x.org", "bob@y.org", "cid@z.org"];
//! let receiver: Vec<&str> = vec!["bob@y.org", "cid@z.org", "dan@w.org", "eve@v.org"];
//! let (mut a, mut b) = MemoryChannel::pair(1 << 20);
//! let (sent, got) = std::thread::scope(|s| {
//!     let sender = s.spawn(|| run(&mut a, &job, Role::Sender, Input::Items(&sender)));
//!     let got = run(&mut b, &job, Role::Receiver, Input::Items(&receiver)).unwrap();
//!     (sender.join().unwrap().unwrap(), got)
//! });
//! assert_eq!(sent.0, Outcome::Nothing); // the sender learns nothing
//! assert_eq!(got.0, Outcome::Cardinality(2)); // the receiver learns |X ∩ Y| only
//! assert_eq!(got.1.peer_set_size, 3); // and both learn the set sizes
//! ```
//!
//! Layers, top to bottom (data flows down, never up; `scripts/check-layers.py` checks the
//! imports; docs/architecture.md has the rules):
//! - [`staged`]: runs split into stages that exchange messages through shared storage,
//!   bucket by bucket; [`message_tags`]: every message tag on the wire, taken from the
//!   declarations of all layers, distinct or the crate does not compile;
//! - [`session`]: the hello, `auto` and the one dispatch, [`run`];
//! - [`protocols`]: the registry and one module per protocol family, each role a
//!   function over a [`net::Channel`], with its messages as types (`messages.rs`);
//! - interactive blocks, two-party building blocks that take only a [`net::Channel`]:
//!   [`ot`] (base OT, IKNP), [`vole`] (noisy VOLE, PPRF, silent VOLE);
//! - blocks, which do no I/O and know no protocol: [`hashing`] (cuckoo, Bloom, buckets),
//!   [`he`] (BFV), [`okvs`];
//! - primitives: [`crypto`] (randomness, domain separation, ristretto255, Elligator,
//!   BLS12-381, OPRF, wide permutation, PRG), [`math`] (prime fields, GF(2^128),
//!   polynomials);
//! - [`wire`]: the bounded codec, tagged messages, chunked streams;
//! - [`io`]: items from users' files, outputs that appear complete or not at all;
//!   [`net`]: framed, metered, bounded channels (memory, TCP, TLS, shaping) and servers;
//! - [`error`]: the error vocabulary of every layer, at the floor.
//!
//! See `docs/` for each protocol's security model, leakage, failure probability and
//! wire format.

#![deny(unsafe_code)]

pub mod crypto;
pub mod error;
pub mod hashing;
pub mod he;
pub mod io;
pub mod math;
pub mod message_tags;
pub mod net;
pub mod okvs;
pub mod ot;
pub mod protocols;
pub mod session;
pub mod staged;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod vole;
pub mod wire;

pub use error::{Error, Result};
pub use protocols::{Operation, Outcome, Protocol, Report, Role, Security, SumTo};
pub use session::{Input, Item, Job, run};
