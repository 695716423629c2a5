//! Transport: framed, metered, bounded message channels.
//!
//! A [`Channel`] moves whole frames (byte strings) between the two parties. Protocols
//! only ever see this trait; the CLI gives them a [`TcpChannel`], tests a
//! [`MemoryChannel`] pair, and benchmarks either of them wrapped in [`Shaped`] to
//! model a LAN or WAN link.

mod decorate;
mod frame;
mod memory;
mod server;
mod shaping;
mod tcp;
mod tls;

pub use crate::error::{NetError, TlsError};
pub use decorate::{Decorated, Decoration};
pub use frame::{read_frame, write_frame};
pub use memory::MemoryChannel;
pub use server::{
    Admission, EventSink, FirstFrameCheck, Refusal, ServeConfig, ServeEvent, ServeStats, SessionEnd, accept_one, serve,
};
pub use shaping::{NetProfile, Shaped, Shaping};
pub use tcp::{TcpChannel, TcpConfig};
pub use tls::{TlsConfig, TlsOptions, certificate_identity, is_loopback, read_certificates};

/// Default largest frame accepted from a peer: 64 MiB.
///
/// Big messages are chunked well below this (2^14 group elements = 512 KiB a frame), so
/// the bound only limits what a hostile peer can make us buffer.
pub const DEFAULT_MAX_FRAME: usize = 64 << 20;

/// Traffic counters of one channel. Bytes include the 4-byte frame prefixes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    /// Bytes written to the peer.
    pub bytes_sent: u64,
    /// Bytes read from the peer.
    pub bytes_received: u64,
    /// Frames written.
    pub messages_sent: u64,
    /// Frames read.
    pub messages_received: u64,
}

impl Stats {
    /// Counters accumulated since `earlier` was taken.
    pub fn since(&self, earlier: &Stats) -> Stats {
        Stats {
            bytes_sent: self.bytes_sent - earlier.bytes_sent,
            bytes_received: self.bytes_received - earlier.bytes_received,
            messages_sent: self.messages_sent - earlier.messages_sent,
            messages_received: self.messages_received - earlier.messages_received,
        }
    }

    pub(crate) fn count_sent(&mut self, payload: usize) {
        self.bytes_sent += payload as u64 + 4;
        self.messages_sent += 1;
    }

    pub(crate) fn count_received(&mut self, payload: usize) {
        self.bytes_received += payload as u64 + 4;
        self.messages_received += 1;
    }
}

/// How far one long transfer (a chunked stream) has got, told once per chunk through
/// [`Channel::progress`] so that a frontend can draw a progress bar without any cost in
/// the loops that compute the records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Transfer {
    /// What moves, in the words of the running step (e.g. "receiving sender items").
    pub what: &'static str,
    /// This side sends the records (else it receives them, waiting for the peer).
    pub sending: bool,
    /// Records moved so far.
    pub done: u64,
    /// Records the stream carries, as agreed in the hello.
    pub total: u64,
    /// Bytes of the records moved so far (without framing).
    pub bytes: u64,
    /// Bytes of all the records, when every record has the same size.
    pub total_bytes: Option<u64>,
}

/// A bidirectional, reliable, ordered channel of frames to one peer.
///
/// `send` may block while the peer is not reading (bounded buffers); protocols are
/// written so that at any time only one side streams large data, which rules out
/// deadlock whatever the buffer sizes.
pub trait Channel: Send {
    /// Sends one frame.
    fn send(&mut self, frame: &[u8]) -> Result<(), NetError>;
    /// Receives the next frame, at most the configured maximum frame size.
    fn recv(&mut self) -> Result<Vec<u8>, NetError>;
    /// Receives the next frame, refusing one above `max` bytes (less than the configured
    /// maximum: e.g. a hello) before reading it where the transport allows.
    fn recv_limited(&mut self, max: usize) -> Result<Vec<u8>, NetError> {
        let frame = self.recv()?;
        if frame.len() > max {
            return Err(NetError::FrameTooLarge { len: frame.len(), max });
        }
        Ok(frame)
    }
    /// Counters since the channel was opened.
    fn stats(&self) -> Stats;
    /// The identity the peer's TLS certificate names, on a channel that authenticated it.
    fn peer_identity(&self) -> Option<String> {
        None
    }
    /// Whether the peer presented a certificate this side verified, named or not (a
    /// certificate that names nothing has no [`Channel::peer_identity`]).
    fn peer_certified(&self) -> bool {
        false
    }
    /// A value both ends derive from their TLS session (an exporter), mixed into the
    /// setwise session id so that a run cannot be spliced across two TLS sessions;
    /// `None` without TLS.
    fn session_binding(&self) -> Option<[u8; 32]> {
        None
    }
    /// Told by the chunked streams after each chunk they send or receive; a channel
    /// that shows progress (the session's observed channel) passes it on, others ignore it.
    fn progress(&self, _transfer: &Transfer) {}
}

impl<C: Channel + ?Sized> Channel for &mut C {
    fn send(&mut self, frame: &[u8]) -> Result<(), NetError> {
        (**self).send(frame)
    }
    fn recv(&mut self) -> Result<Vec<u8>, NetError> {
        (**self).recv()
    }
    fn recv_limited(&mut self, max: usize) -> Result<Vec<u8>, NetError> {
        (**self).recv_limited(max)
    }
    fn stats(&self) -> Stats {
        (**self).stats()
    }
    fn peer_identity(&self) -> Option<String> {
        (**self).peer_identity()
    }
    fn peer_certified(&self) -> bool {
        (**self).peer_certified()
    }
    fn session_binding(&self) -> Option<[u8; 32]> {
        (**self).session_binding()
    }
    fn progress(&self, transfer: &Transfer) {
        (**self).progress(transfer)
    }
}

impl<C: Channel + ?Sized> Channel for Box<C> {
    fn send(&mut self, frame: &[u8]) -> Result<(), NetError> {
        (**self).send(frame)
    }
    fn recv(&mut self) -> Result<Vec<u8>, NetError> {
        (**self).recv()
    }
    fn recv_limited(&mut self, max: usize) -> Result<Vec<u8>, NetError> {
        (**self).recv_limited(max)
    }
    fn stats(&self) -> Stats {
        (**self).stats()
    }
    fn peer_identity(&self) -> Option<String> {
        (**self).peer_identity()
    }
    fn peer_certified(&self) -> bool {
        (**self).peer_certified()
    }
    fn session_binding(&self) -> Option<[u8; 32]> {
        (**self).session_binding()
    }
    fn progress(&self, transfer: &Transfer) {
        (**self).progress(transfer)
    }
}
