//! Streaming of long lists of fixed-size records (group elements, hashes) in chunks, so
//! memory stays bounded and the peer's computation overlaps the transfer.
//!
//! Each chunk is one frame: message tag, `u32` record count (1..=[`MAX_CHUNK`] and at
//! most what is still due), then the records. The total is known to both sides from the
//! hello, so a stream has no terminator and an empty list sends no frame.

use crate::error::NetContext;
use crate::error::Result;
use crate::net::Channel;
use crate::session::recv_message;
use crate::wire::{Reader, WireError, Writer};

/// Records per chunk that setwise sends: 2^14 (512 KiB of 32-byte points).
pub const CHUNK: usize = 1 << 14;
/// Most records per chunk accepted from a peer: 2^16.
pub const MAX_CHUNK: usize = 1 << 16;

/// Sends `records` as a stream of chunks.
pub fn send_records<const N: usize>(
    ch: &mut impl Channel,
    tag: u8,
    records: &[[u8; N]],
    phase: &'static str,
) -> Result<()> {
    for chunk in records.chunks(CHUNK) {
        send_chunk(ch, tag, chunk, phase)?;
    }
    Ok(())
}

/// Sends one chunk of a stream (for senders that compute chunk by chunk).
pub fn send_chunk<const N: usize>(
    ch: &mut impl Channel,
    tag: u8,
    chunk: &[[u8; N]],
    phase: &'static str,
) -> Result<()> {
    debug_assert!(!chunk.is_empty() && chunk.len() <= MAX_CHUNK);
    let mut w = Writer::with_capacity(5 + chunk.len() * N);
    w.u8(tag).u32(chunk.len() as u32);
    for r in chunk {
        w.raw(r);
    }
    ch.send(&w.into_vec()).during(phase)
}

/// Receives a stream of exactly `total` records, calling `f(offset, chunk)` per chunk.
pub fn recv_records<const N: usize>(
    ch: &mut impl Channel,
    tag: u8,
    name: &'static str,
    total: usize,
    phase: &'static str,
    mut f: impl FnMut(usize, &[[u8; N]]) -> Result<()>,
) -> Result<()> {
    let mut done = 0;
    while done < total {
        let body = recv_message(ch, tag, name, phase)?;
        let mut r = Reader::new(&body);
        let n = r.count(name, MAX_CHUNK.min(total - done))?;
        if n == 0 {
            return Err(WireError::Invalid { what: name, why: "empty chunk" }.into());
        }
        let records = r.records::<N>(n, name)?;
        r.finish(name)?;
        f(done, records)?;
        done += n;
    }
    Ok(())
}

/// Receives a stream of exactly `total` variable-size records: frames of the tag, a u32
/// count (1 ..= `per_frame` and at most what is still due), then the records, each read by
/// `read` from the frame. The frame must end with its last record.
pub fn recv_counted(
    ch: &mut impl Channel,
    tag: u8,
    name: &'static str,
    total: usize,
    per_frame: usize,
    phase: &'static str,
    mut read: impl FnMut(&mut Reader<'_>) -> Result<()>,
) -> Result<()> {
    let mut done = 0;
    while done < total {
        let body = recv_message(ch, tag, name, phase)?;
        let mut r = Reader::new(&body);
        let n = r.count(name, per_frame.min(total - done))?;
        if n == 0 {
            return Err(WireError::Invalid { what: name, why: "empty chunk" }.into());
        }
        for _ in 0..n {
            read(&mut r)?;
        }
        r.finish(name)?;
        done += n;
    }
    Ok(())
}

/// Receives a stream of exactly `total` records into one vector.
pub fn recv_all<const N: usize>(
    ch: &mut impl Channel,
    tag: u8,
    name: &'static str,
    total: usize,
    phase: &'static str,
) -> Result<Vec<[u8; N]>> {
    let mut all = Vec::new();
    recv_records::<N>(ch, tag, name, total, phase, |_, chunk| {
        all.extend_from_slice(chunk);
        Ok(())
    })?;
    Ok(all)
}
