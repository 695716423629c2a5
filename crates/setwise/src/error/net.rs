//! The transport's failures (the `net` layer's vocabulary, kept here so that every layer
//! can name them without importing `net`).

use std::time::Duration;

/// A TLS failure, named for the operator.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A certificate, key or CA file could not be used.
    #[error("TLS setup: {0}")]
    Setup(String),
    /// The settings asked for break the policy of [`TlsOptions::resolve`](crate::net::TlsOptions::resolve) (plain TCP beyond
    /// loopback, a listener without a certificate, …).
    #[error("{0}")]
    Policy(String),
    /// This side has TLS; the peer sent plain setwise frames.
    #[error(
        "the peer speaks plain TCP, not TLS: configure TLS on the peer (or, on a trusted network, run both sides without it)"
    )]
    PeerWithoutTls,
    /// This side has no TLS; the peer sent a TLS handshake.
    #[error(
        "the peer speaks TLS and this side does not: give this side the CA that signed the peer (and its own certificate and key)"
    )]
    PeerUsesTls,
    /// The handshake or a record failed.
    #[error("TLS: {0}")]
    Handshake(String),
    /// The peer's certificate does not name the expected peer.
    #[error("the peer's certificate is for {presented}, not for {expected}")]
    PeerName {
        /// The name asked for.
        expected: String,
        /// The identity in the peer's certificate.
        presented: String,
    },
}

/// A transport failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NetError {
    /// The peer closed the connection between frames.
    #[error("the peer closed the connection")]
    Closed,
    /// The peer closed the connection in the middle of a frame.
    #[error("truncated frame: the peer closed the connection after {got} of {expected} bytes")]
    Truncated {
        /// Payload bytes received.
        got: usize,
        /// Payload bytes announced by the length prefix.
        expected: usize,
    },
    /// A length prefix (or a frame to send) above the configured maximum.
    #[error("frame of {len} bytes exceeds the maximum frame size of {max} bytes")]
    FrameTooLarge {
        /// Announced or attempted length.
        len: usize,
        /// The configured maximum.
        max: usize,
    },
    /// A frame did not arrive (or leave) whole within the frame timeout.
    #[error("timed out after {0:?} waiting for the peer")]
    Timeout(Duration),
    /// The session's deadline passed.
    #[error("the session took longer than its limit of {0:?}")]
    SessionDeadline(Duration),
    /// A connection to a listener did not complete its TLS handshake and send its first
    /// frame (the hello) in time, and was dropped before taking a session's place.
    #[error("no TLS handshake and hello within {0:?} of connecting")]
    HelloDeadline(Duration),
    /// A connection's first frame is not what opens a session (not a setwise hello).
    #[error("its first message does not open a session: {0}")]
    NotAdmitted(String),
    /// Connecting failed until the connect timeout ran out.
    #[error("could not connect to {addr} within {waited:?}: {source}")]
    Connect {
        /// The address.
        addr: String,
        /// How long we retried.
        waited: Duration,
        /// The last error.
        #[source]
        source: std::io::Error,
    },
    /// TLS failed or was missing on one side.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// Another I/O error.
    #[error("network I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// A staged run's replay reached a peer message that is not in the exchange yet: the
    /// stage ends there (not a failure; [`crate::staged::replay`]).
    #[error("the peer's next message is not in the exchange yet")]
    Pending,
}
