//! A peer message that does not decode (the `wire` layer's vocabulary).

/// A message from the peer could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The frame ended before the named field was complete.
    #[error("{what}: message ends early (need {need} more bytes, {have} left)")]
    Truncated {
        /// The field being read.
        what: &'static str,
        /// Bytes needed.
        need: usize,
        /// Bytes left in the frame.
        have: usize,
    },
    /// Bytes were left after the last field of a message.
    #[error("{what}: {extra} unexpected trailing bytes")]
    TrailingData {
        /// The message.
        what: &'static str,
        /// Number of extra bytes.
        extra: usize,
    },
    /// A message of another type arrived.
    #[error("expected message {expected}, got message type {got:#04x}")]
    UnexpectedMessage {
        /// The expected message name.
        expected: &'static str,
        /// The tag that arrived.
        got: u8,
    },
    /// A count or length is outside what the session agreed.
    #[error("{what}: count {got} outside the agreed bound {bound}")]
    Count {
        /// The field.
        what: &'static str,
        /// The value received.
        got: u64,
        /// The bound it broke.
        bound: u64,
    },
    /// A field holds a value the protocol does not allow.
    #[error("{what}: invalid value ({why})")]
    Invalid {
        /// The field.
        what: &'static str,
        /// Why it is invalid.
        why: &'static str,
    },
}
