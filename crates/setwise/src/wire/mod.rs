//! The wire layer: the byte codec every decoder reads through ([`Reader`], [`Writer`]),
//! tagged messages and the abort ([`msg`]), chunked record streams ([`stream`]) and short
//! tags packed into their records ([`tags`]), and peer text made safe to show ([`text`]).
//! It sits on [`net`](crate::net) and knows nothing of protocols.

mod codec;
pub mod msg;
pub mod stream;
pub mod tags;
pub mod text;

pub use crate::error::WireError;
pub use codec::{Reader, Writer};
