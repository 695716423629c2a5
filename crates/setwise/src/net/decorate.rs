//! The one base of every channel decorator: a [`Decoration`] says what it does to the
//! frames that pass (shape them, record them, damage one, observe progress), and
//! [`Decorated`] forwards everything else to the channel it wraps. A decorator written
//! this way cannot forget to pass on the peer's identity, the TLS session binding or
//! progress, as hand-forwarding ones did.

use super::{Channel, NetError, Stats, Transfer};

/// What a channel decorator changes; every method's default passes the frame through.
pub trait Decoration: Send {
    /// Sends `frame` through `inner`, changed or observed.
    fn send<C: Channel + ?Sized>(&mut self, inner: &mut C, frame: &[u8]) -> Result<(), NetError> {
        inner.send(frame)
    }

    /// A frame `inner` received, changed or observed before the caller sees it.
    fn received(&mut self, frame: Vec<u8>) -> Result<Vec<u8>, NetError> {
        Ok(frame)
    }

    /// The bound to ask `inner` for when the caller bounds a frame at `max` (a decoration
    /// that adds a header asks for more).
    fn bound(&self, max: usize) -> usize {
        max
    }

    /// The counters the caller sees, from `inner`'s.
    fn stats(&self, inner: Stats) -> Stats {
        inner
    }

    /// Told of a stream's progress before `inner` is.
    fn progress(&self, _transfer: &Transfer) {}
}

/// `inner` with a [`Decoration`]: a channel that forwards every method to `inner`
/// through the decoration's hooks.
#[derive(Debug)]
pub struct Decorated<C, D> {
    /// The wrapped channel.
    pub inner: C,
    /// What this decorator does.
    pub decoration: D,
}

impl<C: Channel, D: Decoration> Decorated<C, D> {
    /// `inner` decorated with `decoration`.
    pub fn wrap(inner: C, decoration: D) -> Self {
        Self { inner, decoration }
    }
}

impl<C: Channel, D: Decoration> Channel for Decorated<C, D> {
    fn send(&mut self, frame: &[u8]) -> Result<(), NetError> {
        self.decoration.send(&mut self.inner, frame)
    }
    fn recv(&mut self) -> Result<Vec<u8>, NetError> {
        let frame = self.inner.recv()?;
        self.decoration.received(frame)
    }
    fn recv_limited(&mut self, max: usize) -> Result<Vec<u8>, NetError> {
        let frame = self.inner.recv_limited(self.decoration.bound(max))?;
        self.decoration.received(frame)
    }
    fn stats(&self) -> Stats {
        self.decoration.stats(self.inner.stats())
    }
    fn peer_identity(&self) -> Option<String> {
        self.inner.peer_identity()
    }
    fn peer_certified(&self) -> bool {
        self.inner.peer_certified()
    }
    fn session_binding(&self) -> Option<[u8; 32]> {
        self.inner.session_binding()
    }
    fn progress(&self, transfer: &Transfer) {
        self.decoration.progress(transfer);
        self.inner.progress(transfer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::MemoryChannel;

    /// Counts what passes and doubles each received frame's last byte.
    #[derive(Default)]
    struct Count {
        sent: usize,
    }

    impl Decoration for Count {
        fn send<C: Channel + ?Sized>(&mut self, inner: &mut C, frame: &[u8]) -> Result<(), NetError> {
            self.sent += 1;
            inner.send(frame)
        }
        fn received(&mut self, mut frame: Vec<u8>) -> Result<Vec<u8>, NetError> {
            if let Some(b) = frame.last_mut() {
                *b = b.wrapping_mul(2);
            }
            Ok(frame)
        }
    }

    #[test]
    fn a_decoration_sees_what_passes_and_the_rest_is_forwarded() {
        let (a, b) = MemoryChannel::pair(1 << 10);
        let (mut a, mut b) = (Decorated::wrap(a, Count::default()), Decorated::wrap(b, Count::default()));
        a.send(&[1, 2, 3]).unwrap();
        assert_eq!(b.recv().unwrap(), vec![1, 2, 6]);
        b.send(&[5; 20]).unwrap();
        assert!(matches!(a.recv_limited(10), Err(NetError::FrameTooLarge { .. })));
        assert_eq!((a.decoration.sent, b.decoration.sent), (1, 1));
        assert_eq!(a.stats(), a.inner.stats());
        assert_eq!((a.peer_identity(), a.session_binding(), a.peer_certified()), (None, None, false));
    }
}
