//! The library's error type. Variants separate the peer's fault (malformed or deviating
//! messages), the transport, and the caller's input, so the CLI can map them to exit codes.

use crate::io::InputError;
use crate::net::NetError;
use crate::wire::WireError;

/// A setwise failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The transport failed; `phase` says what the protocol was doing.
    #[error("{phase}: {source}")]
    Net {
        /// The protocol phase.
        phase: &'static str,
        /// The transport error.
        #[source]
        source: NetError,
    },
    /// The peer sent bytes that do not decode.
    #[error("malformed message from peer: {0}")]
    Malformed(#[from] WireError),
    /// The peer sent an invalid group element.
    #[error("peer sent an invalid group element in {what} (item {index})")]
    InvalidPoint {
        /// The message.
        what: &'static str,
        /// Index of the element in the message.
        index: usize,
    },
    /// The two sides' hellos disagree.
    #[error("session mismatch: {field}: this side has {ours}, the peer has {theirs}")]
    Mismatch {
        /// The hello field.
        field: &'static str,
        /// Our value.
        ours: String,
        /// The peer's value.
        theirs: String,
    },
    /// The peer deviated from the protocol in a way that decodes but is not allowed.
    #[error("peer misbehaved: {0}")]
    PeerMisbehaved(String),
    /// The peer ended the session and said why.
    #[error("the peer aborted the session: {0}")]
    PeerAborted(String),
    /// The caller's input (files, options) is unusable.
    #[error(transparent)]
    Input(#[from] InputError),
    /// A homomorphic-encryption failure (a peer ciphertext that does not fit, or an
    /// operation error).
    #[error(transparent)]
    He(#[from] crate::he::HeError),
    /// Parameters are invalid or unsupported.
    #[error("invalid parameters: {0}")]
    Params(String),
}

impl Error {
    /// True when the failure is the caller's (bad input or parameters) rather than the
    /// peer's or the network's.
    pub fn is_local(&self) -> bool {
        matches!(self, Error::Input(_) | Error::Params(_))
    }
}

/// Attaches a phase name to transport errors.
pub(crate) trait NetContext<T> {
    fn during(self, phase: &'static str) -> Result<T, Error>;
}

impl<T> NetContext<T> for Result<T, NetError> {
    fn during(self, phase: &'static str) -> Result<T, Error> {
        self.map_err(|source| Error::Net { phase, source })
    }
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
