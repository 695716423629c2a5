//! Link shaping for benchmarks: a bandwidth limit and a round-trip latency.
//!
//! Each shaped frame carries, in an 8-byte header, the wall-clock time (µs since the
//! Unix epoch) at which it would arrive over the modelled link: after the link has
//! serialised every earlier frame and this one at the given bandwidth, plus half the
//! round-trip time. The receiver sleeps until then. Both ends must be shaped with the
//! same profile and run on one machine (one clock). Counters exclude the header.

use super::{Channel, Decorated, Decoration, NetError, Stats};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A modelled network link.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct NetProfile {
    /// Bandwidth in bits per second.
    pub bits_per_second: f64,
    /// Round-trip time.
    pub rtt: Duration,
}

impl NetProfile {
    /// 10 Gbit/s, 0.1 ms round trip.
    pub const LAN: NetProfile = NetProfile { bits_per_second: 10e9, rtt: Duration::from_micros(100) };
    /// 50 Mbit/s, 80 ms round trip.
    pub const WAN: NetProfile = NetProfile { bits_per_second: 50e6, rtt: Duration::from_millis(80) };

    /// `lan`, `wan` or `none` (no shaping).
    pub fn by_name(name: &str) -> Option<Option<NetProfile>> {
        match name {
            "lan" => Some(Some(Self::LAN)),
            "wan" => Some(Some(Self::WAN)),
            "none" => Some(None),
            _ => None,
        }
    }
}

/// A channel whose frames are delayed as over the modelled link.
pub type Shaped<C> = Decorated<C, Shaping>;

/// The modelled link of a [`Shaped`] channel: when it is next free.
#[derive(Debug)]
pub struct Shaping {
    profile: NetProfile,
    link_free_at: u64,
}

const HEADER: usize = 8;

fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}

fn sleep_until(t_us: u64) {
    let now = now_us();
    if t_us > now {
        std::thread::sleep(Duration::from_micros(t_us - now));
    }
}

impl<C: Channel> Shaped<C> {
    /// Shapes `inner` with `profile`.
    pub fn new(inner: C, profile: NetProfile) -> Self {
        Decorated::wrap(inner, Shaping { profile, link_free_at: 0 })
    }
}

impl Decoration for Shaping {
    fn send<C: Channel + ?Sized>(&mut self, inner: &mut C, frame: &[u8]) -> Result<(), NetError> {
        let start = self.link_free_at.max(now_us());
        let bits = ((frame.len() + 4) * 8) as f64;
        let serialise_us = (bits / self.profile.bits_per_second * 1e6) as u64;
        self.link_free_at = start + serialise_us;
        let arrive = self.link_free_at + self.profile.rtt.as_micros() as u64 / 2;
        // Backpressure: the sender cannot run ahead of its link.
        sleep_until(start);
        let mut shaped = Vec::with_capacity(frame.len() + HEADER);
        shaped.extend_from_slice(&arrive.to_le_bytes());
        shaped.extend_from_slice(frame);
        inner.send(&shaped)
    }

    /// Waits until a shaped frame would have arrived; returns its payload.
    fn received(&mut self, mut frame: Vec<u8>) -> Result<Vec<u8>, NetError> {
        if frame.len() < HEADER {
            return Err(NetError::Truncated { got: frame.len(), expected: HEADER });
        }
        let arrive = u64::from_le_bytes(frame[..HEADER].try_into().expect("8 bytes"));
        sleep_until(arrive);
        frame.drain(..HEADER);
        Ok(frame)
    }

    fn bound(&self, max: usize) -> usize {
        max.saturating_add(HEADER)
    }

    fn stats(&self, mut s: Stats) -> Stats {
        s.bytes_sent -= s.messages_sent * HEADER as u64;
        s.bytes_received -= s.messages_received * HEADER as u64;
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::MemoryChannel;
    use std::time::Instant;

    #[test]
    fn latency_and_bandwidth_are_modelled() {
        let slow = NetProfile { bits_per_second: 8e6, rtt: Duration::from_millis(40) };
        let (a, b) = MemoryChannel::pair(1 << 20);
        let (mut a, mut b) = (Shaped::new(a, slow), Shaped::new(b, slow));
        let t = Instant::now();
        a.send(&[0u8; 99_996]).unwrap(); // 100 kB at 1 MB/s = 100 ms, plus 20 ms one way
        assert_eq!(b.recv().unwrap().len(), 99_996);
        let took = t.elapsed();
        assert!(took >= Duration::from_millis(115), "{took:?}");
        assert_eq!(a.stats().bytes_sent, 100_000);
        assert_eq!(b.stats().bytes_received, 100_000);
    }
}
