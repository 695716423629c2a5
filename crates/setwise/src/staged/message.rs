//! A stage's message for one bucket (or part) as bytes: the protocol's own chunked
//! stream frames ([`Stream`]: tag, count, 32-byte records), each preceded by its length
//! as a little-endian `u32`. The frames are those a channel run sends, so the fuzzed
//! stream decoders apply; a Spark binding may instead keep one frame per row of a binary
//! column ([`frames`]).
//!
//! The reader is given the number of records due (from the peer's marker, itself checked
//! against the peer's hello) and never allocates more: a frame longer than the longest
//! possible chunk, a count above what is still due, a wrong tag, or bytes after the last
//! record are errors.

use crate::crypto::dst::{self, Domain, SessionId};
use crate::crypto::ristretto::Encoded;
use crate::protocols::Role;
use crate::wire::stream::{CHUNK, MAX_CHUNK, Stream};
use crate::wire::{Reader, WireError};

/// Longest frame of a 32-byte stream: tag, count and [`MAX_CHUNK`] records.
pub const MAX_FRAME: usize = 5 + 32 * MAX_CHUNK;

/// The frames of `values` under `stream`, [`CHUNK`] records each (none for no values).
pub fn frames(stream: Stream<32>, values: &[Encoded]) -> Vec<Vec<u8>> {
    values.chunks(CHUNK).map(|c| stream.encode_chunk(c)).collect()
}

/// One part's bytes: each frame of [`frames`] after its `u32` length.
pub fn encode_part(stream: Stream<32>, values: &[Encoded]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * 32 + values.len().div_ceil(CHUNK) * 9);
    for f in frames(stream, values) {
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(&f);
    }
    out
}

/// The largest part that can hold `count` records (every frame non-empty), so a reader
/// can refuse a larger file before reading it.
pub fn max_part_bytes(count: u64) -> u64 {
    count.saturating_mul(32 + 9)
}

/// The `count` records of one part's bytes, checked as the module says. Points are not
/// decoded here: the step that uses them does (canonical, not the identity).
pub fn decode_part(stream: Stream<32>, bytes: &[u8], count: usize) -> Result<Vec<Encoded>, WireError> {
    let mut r = Reader::new(bytes);
    let mut out = Vec::with_capacity(count.min(CHUNK));
    while r.remaining() > 0 {
        let len = r.u32(stream.name)? as usize;
        if len > MAX_FRAME {
            return Err(WireError::Count { what: stream.name, got: len as u64, bound: MAX_FRAME as u64 });
        }
        let frame = r.take(len, stream.name)?;
        let (&tag, body) = frame.split_first().ok_or(WireError::Invalid { what: stream.name, why: "empty frame" })?;
        if tag != stream.tag {
            return Err(WireError::UnexpectedMessage { expected: stream.name, got: tag });
        }
        out.extend_from_slice(stream.decode_chunk(body, count - out.len())?);
    }
    if out.len() != count {
        return Err(WireError::Count { what: stream.name, got: out.len() as u64, bound: count as u64 });
    }
    Ok(out)
}

/// The digest of one part as its marker records it: BLAKE3 keyed in the run's session
/// over the stage, the writer's role, the part's index and its bytes.
pub fn part_digest(session: SessionId, stage: u8, from: Role, part: u32, bytes: &[u8]) -> [u8; 32] {
    let mut h = Domain::new(dst::STAGED_MESSAGE, session).hasher();
    h.update(&[stage, from.name().len() as u8]);
    h.update(from.name().as_bytes());
    h.update(&part.to_le_bytes());
    h.update(&(bytes.len() as u64).to_le_bytes());
    h.update(bytes);
    *h.finalize().as_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Stream<32> = Stream::new(0x10, "ReceiverBlinded");

    #[test]
    fn parts_round_trip_and_refuse_what_is_not_due() {
        let values: Vec<Encoded> = (0..(CHUNK as u32 + 5)).map(|i| [i as u8; 32]).collect();
        let bytes = encode_part(S, &values);
        assert!(bytes.len() as u64 <= max_part_bytes(values.len() as u64));
        assert_eq!(decode_part(S, &bytes, values.len()).unwrap(), values);
        assert!(decode_part(S, &bytes, values.len() - 1).is_err(), "more than due");
        assert!(decode_part(S, &bytes, values.len() + 1).is_err(), "fewer than due");
        for cut in [1, 4, 5, 100, bytes.len() - 1] {
            assert!(decode_part(S, &bytes[..cut], values.len()).is_err(), "cut at {cut}");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(decode_part(S, &long, values.len()).is_err());
        let other = encode_part(Stream::new(0x11, "SenderBlinded"), &values);
        assert!(matches!(decode_part(S, &other, values.len()), Err(WireError::UnexpectedMessage { .. })));
        assert_eq!(decode_part(S, &[], 0).unwrap(), Vec::<Encoded>::new());
        assert!(decode_part(S, &[0xff, 0xff, 0xff, 0xff], 1).is_err(), "a huge frame length");
        assert_eq!(frames(S, &values).len(), 2);
        let sid = SessionId([3; 32]);
        let d = part_digest(sid, 1, Role::Receiver, 7, &bytes);
        assert_eq!(d, part_digest(sid, 1, Role::Receiver, 7, &bytes));
        assert_ne!(d, part_digest(sid, 1, Role::Receiver, 6, &bytes));
        assert_ne!(d, part_digest(sid, 2, Role::Receiver, 7, &bytes));
        assert_ne!(d, part_digest(sid, 1, Role::Sender, 7, &bytes));
    }
}
