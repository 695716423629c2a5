//! Streaming of long lists in chunks, so memory stays bounded and the peer's computation
//! overlaps the transfer.
//!
//! Each chunk is one frame: message tag, `u32` record count (1..=[`MAX_CHUNK`] or the
//! stream's own bound, and at most what is still due), then the records. The total is
//! known to both sides from the hello, so a stream has no terminator and an empty list
//! sends no frame. [`Stream`] carries fixed-size records (points, hashes), [`Counted`]
//! records each read by the caller (length-prefixed items, flagged signatures).
//!
//! After each chunk a stream tells the channel how far it has got ([`Channel::progress`]),
//! once per chunk and never per record, so progress costs nothing in the hot loops; a
//! receiving stream also tells it once before the first chunk, as waiting starts.

use super::msg::recv_message;
use super::{Reader, WireError, Writer};
use crate::error::{NetContext, Result};
use crate::net::{Channel, Transfer};

/// Records per chunk that setwise sends: 2^14 (512 KiB of 32-byte points).
pub const CHUNK: usize = 1 << 14;
/// Most records per chunk accepted from a peer: 2^16.
pub const MAX_CHUNK: usize = 1 << 16;

/// A stream of `N`-byte records under one message tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stream<const N: usize> {
    /// The message tag of every chunk.
    pub tag: u8,
    /// The message name in errors.
    pub name: &'static str,
}

impl<const N: usize> Stream<N> {
    /// The stream of messages `tag`, called `name` in errors.
    pub const fn new(tag: u8, name: &'static str) -> Self {
        Self { tag, name }
    }

    /// Sends `records` as chunks of [`CHUNK`].
    pub fn send(&self, ch: &mut impl Channel, records: &[[u8; N]], phase: &'static str) -> Result<()> {
        let total = records.len();
        records
            .chunks(CHUNK)
            .enumerate()
            .try_for_each(|(i, chunk)| self.send_chunk(ch, chunk, (i * CHUNK, total), phase))
    }

    /// Sends one chunk (for senders that compute chunk by chunk): 1..=[`MAX_CHUNK`]
    /// records, the stream's records `at.0..` of `at.1` (for progress).
    pub fn send_chunk(
        &self,
        ch: &mut impl Channel,
        chunk: &[[u8; N]],
        at: (usize, usize),
        phase: &'static str,
    ) -> Result<()> {
        debug_assert!(!chunk.is_empty() && chunk.len() <= MAX_CHUNK);
        ch.send(&self.encode_chunk(chunk)).during(phase)?;
        ch.progress(&self.transfer(phase, true, at.0 + chunk.len(), at.1));
        Ok(())
    }

    /// Progress after `done` of `total` records.
    fn transfer(&self, what: &'static str, sending: bool, done: usize, total: usize) -> Transfer {
        let (done, total) = (done as u64, total as u64);
        Transfer { what, sending, done, total, bytes: done * N as u64, total_bytes: Some(total * N as u64) }
    }

    /// One chunk as a frame: tag, count, records.
    pub fn encode_chunk(&self, chunk: &[[u8; N]]) -> Vec<u8> {
        let mut w = Writer::with_capacity(5 + chunk.len() * N);
        w.u8(self.tag).u32(chunk.len() as u32).raw(chunk.as_flattened());
        w.into_vec()
    }

    /// The records of one chunk's body (the frame without its tag): a count of 1 to
    /// `due.min(MAX_CHUNK)`, then exactly that many records.
    pub fn decode_chunk<'a>(&self, body: &'a [u8], due: usize) -> Result<&'a [[u8; N]], WireError> {
        let mut r = Reader::new(body);
        let n = r.count(self.name, MAX_CHUNK.min(due))?;
        if n == 0 {
            return Err(WireError::Invalid { what: self.name, why: "empty chunk" });
        }
        let records = r.records::<N>(n, self.name)?;
        r.finish(self.name)?;
        Ok(records)
    }

    /// Receives exactly `total` records, calling `f(offset, chunk)` per chunk.
    pub fn recv(
        &self,
        ch: &mut impl Channel,
        total: usize,
        phase: &'static str,
        mut f: impl FnMut(usize, &[[u8; N]]) -> Result<()>,
    ) -> Result<()> {
        let mut done = 0;
        if total > 0 {
            // Waiting for the peer starts now, before its first chunk.
            ch.progress(&self.transfer(phase, false, 0, total));
        }
        while done < total {
            let body = recv_message(ch, self.tag, self.name, phase)?;
            let records = self.decode_chunk(&body, total - done)?;
            f(done, records)?;
            done += records.len();
            ch.progress(&self.transfer(phase, false, done, total));
        }
        Ok(())
    }

    /// Receives exactly `total` records into one vector, grown as chunks arrive (never
    /// reserved from the count alone).
    pub fn recv_all(&self, ch: &mut impl Channel, total: usize, phase: &'static str) -> Result<Vec<[u8; N]>> {
        let mut all = Vec::with_capacity(total.min(CHUNK));
        self.recv(ch, total, phase, |_, chunk| {
            all.extend_from_slice(chunk);
            Ok(())
        })?;
        Ok(all)
    }
}

/// A stream of records the caller writes and reads one by one (variable sizes), at most
/// `per_frame` in a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counted {
    /// The message tag of every chunk.
    pub tag: u8,
    /// The message name in errors.
    pub name: &'static str,
    /// Records per frame, sent and accepted.
    pub per_frame: usize,
}

impl Counted {
    /// The stream of messages `tag`, called `name` in errors, `per_frame` records a frame.
    pub const fn new(tag: u8, name: &'static str, per_frame: usize) -> Self {
        Self { tag, name, per_frame }
    }

    /// Sends `records`, `per_frame` to a frame, each written by `write`.
    pub fn send<T>(
        &self,
        ch: &mut impl Channel,
        records: &[T],
        phase: &'static str,
        mut write: impl FnMut(&mut Writer, &T),
    ) -> Result<()> {
        let (mut done, mut bytes) = (0, 0);
        for chunk in records.chunks(self.per_frame) {
            let mut w = Writer::with_capacity(5 + 64 * chunk.len());
            w.u8(self.tag).u32(chunk.len() as u32);
            chunk.iter().for_each(|r| write(&mut w, r));
            let frame = w.into_vec();
            ch.send(&frame).during(phase)?;
            (done, bytes) = (done + chunk.len(), bytes + frame.len() - 5);
            ch.progress(&counted(phase, true, done, records.len(), bytes));
        }
        Ok(())
    }

    /// Sends one frame of `count` records already encoded back to back in `records`
    /// (for senders that prepare a frame's records in bulk), the stream's records
    /// `at.0..` of `at.1` (for progress).
    pub fn send_encoded(
        &self,
        ch: &mut impl Channel,
        count: usize,
        records: &[u8],
        at: (usize, usize),
        phase: &'static str,
    ) -> Result<()> {
        debug_assert!(count > 0 && count <= self.per_frame);
        let mut w = Writer::with_capacity(5 + records.len());
        w.u8(self.tag).u32(count as u32).raw(records);
        ch.send(&w.into_vec()).during(phase)?;
        let done = at.0 + count;
        // Records of one stream have one size here: the bytes so far scale from this frame.
        let bytes = records.len() * done / count;
        ch.progress(&Transfer {
            what: phase,
            sending: true,
            done: done as u64,
            total: at.1 as u64,
            bytes: bytes as u64,
            total_bytes: Some((records.len() * at.1 / count) as u64),
        });
        Ok(())
    }

    /// Decodes one frame's body (without its tag): a count of 1 to
    /// `due.min(per_frame)`, then that many records, each read by `read`; the frame must
    /// end with its last record.
    pub fn decode_chunk(
        &self,
        body: &[u8],
        due: usize,
        mut read: impl FnMut(&mut Reader<'_>) -> Result<()>,
    ) -> Result<usize> {
        let mut r = Reader::new(body);
        let n = r.count(self.name, self.per_frame.min(due))?;
        if n == 0 {
            return Err(WireError::Invalid { what: self.name, why: "empty chunk" }.into());
        }
        for _ in 0..n {
            read(&mut r)?;
        }
        r.finish(self.name)?;
        Ok(n)
    }

    /// Receives exactly `total` records, each read by `read`.
    pub fn recv(
        &self,
        ch: &mut impl Channel,
        total: usize,
        phase: &'static str,
        mut read: impl FnMut(&mut Reader<'_>) -> Result<()>,
    ) -> Result<()> {
        let (mut done, mut bytes) = (0, 0);
        if total > 0 {
            ch.progress(&counted(phase, false, 0, total, 0));
        }
        while done < total {
            let body = recv_message(ch, self.tag, self.name, phase)?;
            done += self.decode_chunk(&body, total - done, &mut read)?;
            bytes += body.len().saturating_sub(4);
            ch.progress(&counted(phase, false, done, total, bytes));
        }
        Ok(())
    }
}

/// Progress of a [`Counted`] stream: records of varying size, so no byte total.
fn counted(what: &'static str, sending: bool, done: usize, total: usize, bytes: usize) -> Transfer {
    Transfer { what, sending, done: done as u64, total: total as u64, bytes: bytes as u64, total_bytes: None }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::MemoryChannel;

    const S: Stream<4> = Stream::new(0x42, "Test");

    #[test]
    fn streams_round_trip_in_chunks() {
        let (mut a, mut b) = MemoryChannel::pair(1 << 22);
        let records: Vec<[u8; 4]> = (0..40_000u32).map(u32::to_le_bytes).collect();
        S.send(&mut a, &records, "t").unwrap();
        assert_eq!(S.recv_all(&mut b, records.len(), "t").unwrap(), records);
        assert_eq!(a.stats().messages_sent, 3);
        S.send(&mut a, &[], "t").unwrap();
        assert_eq!(a.stats().messages_sent, 3, "an empty list sends nothing");
    }

    #[test]
    fn chunk_bounds_are_checked() {
        let frame = S.encode_chunk(&[[1; 4], [2; 4]]);
        assert_eq!(S.decode_chunk(&frame[1..], 2).unwrap().len(), 2);
        assert!(matches!(S.decode_chunk(&frame[1..], 1), Err(WireError::Count { .. })), "more than due");
        assert!(matches!(S.decode_chunk(&frame[1..frame.len() - 1], 2), Err(WireError::Truncated { .. })));
        assert!(matches!(S.decode_chunk(&[0, 0, 0, 0], 5), Err(WireError::Invalid { .. })), "empty chunk");
        let mut long = frame[1..].to_vec();
        long.push(0);
        assert!(matches!(S.decode_chunk(&long, 2), Err(WireError::TrailingData { .. })));
    }

    #[test]
    fn counted_streams_read_each_record() {
        let c = Counted::new(0x43, "Items", 3);
        let (mut a, mut b) = MemoryChannel::pair(1 << 16);
        let items: Vec<Vec<u8>> = (0..7u8).map(|i| vec![i; i as usize]).collect();
        c.send(&mut a, &items, "t", |w, x| {
            w.bytes(x);
        })
        .unwrap();
        let mut got = Vec::new();
        c.recv(&mut b, items.len(), "t", |r| {
            got.push(r.bytes("item", 16)?.to_vec());
            Ok(())
        })
        .unwrap();
        assert_eq!(got, items);
        assert_eq!(a.stats().messages_sent, 3);
    }
}
