//! The wire layer: the byte codec every decoder reads through ([`Reader`], [`Writer`]),
//! tagged messages and the abort ([`msg`]), and chunked record streams ([`stream`]), and
//! peer text made safe to show ([`text`]).
//! It sits on [`net`](crate::net) and knows nothing of protocols.

mod codec;
pub mod msg;
pub mod stream;
pub mod text;

pub use codec::{Reader, WireError, Writer};
