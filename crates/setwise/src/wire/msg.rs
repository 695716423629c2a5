//! Tagged messages: every frame after the hello starts with a one-byte tag naming the
//! message. The abort (tag `0xff`) may replace any message: its sender stops and says
//! why, and the receiver reports [`Error::PeerAborted`].
//!
//! A protocol's single-frame messages implement [`Message`]: a type with its tag, an
//! encoder, and a decoder that checks the body against what the session agreed (sizes,
//! parameters) before it allocates, so each decoder can be tested and fuzzed alone.

use super::text::{MAX_SHOWN, printable_bytes};
use super::{Reader, WireError, Writer};
use crate::error::{Error, NetContext, Result};
use crate::net::Channel;

/// Message tag of an abort: the sender of it stops and says why.
pub const TAG_ABORT: u8 = 0xff;
/// Longest abort reason accepted.
pub const MAX_ABORT_REASON: usize = 4096;

/// Tells the peer we stop and why (best effort: the connection may already be gone).
pub fn send_abort(ch: &mut impl Channel, reason: &str) {
    let mut end = reason.len().min(MAX_ABORT_REASON);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    let mut w = Writer::with_capacity(8 + end);
    w.u8(TAG_ABORT).bytes(&reason.as_bytes()[..end]);
    let _ = ch.send(&w.into_vec());
}

/// The error an abort body (after its tag) stands for.
pub fn abort_error(body: &[u8]) -> Error {
    let mut r = Reader::new(body);
    match r.bytes("Abort.reason", MAX_ABORT_REASON) {
        Ok(b) => Error::PeerAborted(printable_bytes(b, MAX_SHOWN)),
        Err(e) => e.into(),
    }
}

/// Receives the next message, which must carry `tag`; returns its body (the frame
/// without the tag). An abort from the peer becomes [`Error::PeerAborted`]; `name`
/// names the expected message in errors, `phase` what the protocol was doing.
pub fn recv_message(ch: &mut impl Channel, tag: u8, name: &'static str, phase: &'static str) -> Result<Vec<u8>> {
    let mut frame = ch.recv().during(phase)?;
    body_of(&frame, tag, name)?;
    frame.remove(0);
    Ok(frame)
}

/// The body of `frame` if it is the message `tag`; an abort becomes
/// [`Error::PeerAborted`], another tag an [`WireError::UnexpectedMessage`].
pub fn body_of<'a>(frame: &'a [u8], tag: u8, name: &'static str) -> Result<&'a [u8]> {
    match frame.split_first() {
        Some((&t, body)) if t == tag => Ok(body),
        Some((&TAG_ABORT, body)) => Err(abort_error(body)),
        Some((&t, _)) => Err(WireError::UnexpectedMessage { expected: name, got: t }.into()),
        None => Err(WireError::Truncated { what: name, need: 1, have: 0 }.into()),
    }
}

/// Sends `body` as the message `tag` (one frame: the tag, then the body).
pub fn send_message(ch: &mut impl Channel, tag: u8, body: &[u8], phase: &'static str) -> Result<()> {
    let mut frame = Vec::with_capacity(1 + body.len());
    frame.push(tag);
    frame.extend_from_slice(body);
    ch.send(&frame).during(phase)
}

/// One single-frame message of a protocol.
pub trait Message: Sized {
    /// The message tag.
    const TAG: u8;
    /// The message name in errors.
    const NAME: &'static str;
    /// What the decoder checks the message against (agreed sizes or parameters).
    type Agreed<'a>;

    /// Writes the body (everything after the tag).
    fn write(&self, w: &mut Writer);

    /// Bytes the body will take, about (to size the frame once).
    fn size_hint(&self) -> usize {
        64
    }

    /// Reads the body from `r`, checking it against `agreed`; the caller checks that
    /// nothing follows.
    fn read(r: &mut Reader<'_>, agreed: Self::Agreed<'_>) -> Result<Self>;

    /// The whole frame: tag, then body.
    fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(1 + self.size_hint());
        w.u8(Self::TAG);
        self.write(&mut w);
        w.into_vec()
    }

    /// Decodes a body (the frame without its tag); trailing bytes are an error.
    fn decode(body: &[u8], agreed: Self::Agreed<'_>) -> Result<Self> {
        let mut r = Reader::new(body);
        let m = Self::read(&mut r, agreed)?;
        r.finish(Self::NAME)?;
        Ok(m)
    }

    /// Decodes a whole frame (tag, then body), e.g. bytes a caller moved itself.
    fn from_frame(frame: &[u8], agreed: Self::Agreed<'_>) -> Result<Self> {
        Self::decode(body_of(frame, Self::TAG, Self::NAME)?, agreed)
    }

    /// Sends the message.
    fn send(&self, ch: &mut impl Channel, phase: &'static str) -> Result<()> {
        ch.send(&self.encode()).during(phase)
    }

    /// Receives and decodes the next message, which must be this one.
    fn recv(ch: &mut impl Channel, phase: &'static str, agreed: Self::Agreed<'_>) -> Result<Self> {
        Self::decode(&recv_message(ch, Self::TAG, Self::NAME, phase)?, agreed)
    }
}

/// Defines a [`Message`] whose body is one fixed-size byte array (a seed, a share, a
/// commitment, a pair of field elements): `fixed_message!(doc, Name, tag, "WireName", bytes)`.
/// Its decoder takes exactly that many bytes, so a peer cannot size anything by it.
macro_rules! fixed_message {
    ($(#[$doc:meta])* $name:ident, $tag:expr, $wire:literal, $bytes:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name(pub [u8; $bytes]);

        impl $crate::wire::msg::Message for $name {
            const TAG: u8 = $tag;
            const NAME: &'static str = $wire;
            type Agreed<'a> = ();

            fn write(&self, w: &mut $crate::wire::Writer) {
                w.raw(&self.0);
            }

            fn size_hint(&self) -> usize {
                $bytes
            }

            fn read(r: &mut $crate::wire::Reader<'_>, (): ()) -> $crate::error::Result<Self> {
                Ok(Self(r.array::<$bytes>(Self::NAME)?))
            }
        }
    };
}
pub(crate) use fixed_message;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::MemoryChannel;

    #[test]
    fn aborts_and_wrong_tags_are_errors() {
        let (mut a, mut b) = MemoryChannel::pair(1 << 16);
        send_message(&mut a, 0x10, b"body", "t").unwrap();
        assert_eq!(recv_message(&mut b, 0x10, "M", "t").unwrap(), b"body");
        send_message(&mut a, 0x11, b"", "t").unwrap();
        let e = recv_message(&mut b, 0x10, "M", "t").unwrap_err().to_string();
        assert!(e.contains("expected message M, got message type 0x11"), "{e}");
        // A reason cut at the limit stays valid UTF-8, and is shown cut shorter.
        let long = "é".repeat(MAX_ABORT_REASON);
        send_abort(&mut a, &long);
        match recv_message(&mut b, 0x10, "M", "t").unwrap_err() {
            Error::PeerAborted(r) => {
                let shown = format!("{}… ({} more bytes)", "é".repeat(MAX_SHOWN), MAX_ABORT_REASON - 2 * MAX_SHOWN);
                assert_eq!(r, shown);
            }
            other => panic!("{other}"),
        }
        a.send(&[]).unwrap();
        assert!(recv_message(&mut b, 0x10, "M", "t").is_err());
    }
}
