//! An in-process channel pair, for tests and benchmarks.

use super::{Channel, NetError, Stats};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::time::Duration;

/// Frames buffered in each direction before `send` blocks, like a socket buffer.
const DEPTH: usize = 64;

/// One end of an in-memory channel pair.
#[derive(Debug)]
pub struct MemoryChannel {
    tx: SyncSender<Vec<u8>>,
    rx: Receiver<Vec<u8>>,
    max_frame: usize,
    timeout: Duration,
    stats: Stats,
}

impl MemoryChannel {
    /// Two connected ends with the given maximum frame size and a 60 s receive timeout.
    pub fn pair(max_frame: usize) -> (Self, Self) {
        let (a_tx, b_rx) = sync_channel(DEPTH);
        let (b_tx, a_rx) = sync_channel(DEPTH);
        let end = |tx, rx| Self { tx, rx, max_frame, timeout: Duration::from_secs(60), stats: Stats::default() };
        (end(a_tx, a_rx), end(b_tx, b_rx))
    }

    /// Sets how long `recv` waits before [`NetError::Timeout`].
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

impl Channel for MemoryChannel {
    fn send(&mut self, frame: &[u8]) -> Result<(), NetError> {
        if frame.len() > self.max_frame {
            return Err(NetError::FrameTooLarge { len: frame.len(), max: self.max_frame });
        }
        self.tx.send(frame.to_vec()).map_err(|_| NetError::Closed)?;
        self.stats.count_sent(frame.len());
        Ok(())
    }

    fn recv(&mut self) -> Result<Vec<u8>, NetError> {
        let frame = self.rx.recv_timeout(self.timeout).map_err(|e| match e {
            RecvTimeoutError::Timeout => NetError::Timeout(self.timeout),
            RecvTimeoutError::Disconnected => NetError::Closed,
        })?;
        if frame.len() > self.max_frame {
            return Err(NetError::FrameTooLarge { len: frame.len(), max: self.max_frame });
        }
        self.stats.count_received(frame.len());
        Ok(frame)
    }

    fn stats(&self) -> Stats {
        self.stats
    }
}
