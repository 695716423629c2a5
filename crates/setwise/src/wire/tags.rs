//! Short tags on the wire: pseudorandom values cut to λ + log2(|X|·|Y|) bits (whole bytes,
//! at most 16) and sent back to back in the 16-byte records of a [`Stream`], the last
//! record zero-padded. A tag may straddle records and chunks. VOLE-PSI's tags and the
//! pOPRF mqRPMT's query tags travel this way.

use super::WireError;
use super::stream::{CHUNK, Stream};
use crate::error::Result;
use crate::net::Channel;

/// Statistical security of short tags: a false match anywhere in a run has probability
/// ≤ 2^-40.
pub const TAG_SECURITY: u32 = 40;

/// Bytes per tag: λ + log2(|X|·|Y|) bits, rounded up (RR22 §5), so that the chance that
/// any of one side's `a` tags equals any of the other's `b` by accident is ≤ 2^-λ.
pub fn tag_bytes(a: usize, b: usize) -> usize {
    let log = |n: usize| n.max(1).next_power_of_two().ilog2();
    let bits = TAG_SECURITY + log(a) + log(b);
    (bits as usize).div_ceil(8).min(16)
}

/// A 128-bit hash output cut to its first `len` bytes (little-endian), the rest zero.
pub fn truncate(hash: u128, len: usize) -> u128 {
    if len >= 16 { hash } else { hash & ((1u128 << (8 * len)) - 1) }
}

/// Records a stream of `count` tags of `len` bytes takes.
pub fn records(count: usize, len: usize) -> usize {
    (count * len).div_ceil(16)
}

/// Sends `tags` of `len` bytes each on `stream`. A stream sent in several calls passes a
/// multiple of 16 tags in every call but the last, so that only its last record is padded.
pub fn send_tags(
    stream: &Stream<16>,
    ch: &mut impl Channel,
    len: usize,
    tags: &[u128],
    phase: &'static str,
) -> Result<()> {
    // 16 tags of `len` bytes are exactly `len` records.
    for group in tags.chunks(16 * CHUNK) {
        let mut bytes = Vec::with_capacity(records(group.len(), len) * 16);
        for t in group {
            bytes.extend_from_slice(&t.to_le_bytes()[..len]);
        }
        bytes.resize(bytes.len().div_ceil(16) * 16, 0);
        stream.send(ch, bytes.as_chunks::<16>().0, phase)?;
    }
    Ok(())
}

/// Receives exactly `count` tags of `len` bytes on `stream`, calling `f` on each in order.
pub fn recv_tags(
    stream: &Stream<16>,
    ch: &mut impl Channel,
    len: usize,
    count: usize,
    phase: &'static str,
    mut f: impl FnMut(u128),
) -> Result<()> {
    let mut reader = TagReader::new(stream.name, len, count);
    stream.recv(ch, records(count, len), phase, |_, chunk| Ok(reader.add(chunk.as_flattened(), &mut f)?))
}

/// Splits a stream's bytes into tags as they arrive; the padding after the last tag must
/// be zero.
#[derive(Debug, Clone)]
pub struct TagReader {
    name: &'static str,
    len: usize,
    /// A tag begun in the previous chunk: its first `have` bytes.
    carry: [u8; 16],
    have: usize,
    /// Tags still due.
    left: usize,
}

impl TagReader {
    /// A reader of `count` tags of `len` bytes (1..=16) of the stream `name`.
    pub fn new(name: &'static str, len: usize, count: usize) -> Self {
        debug_assert!((1..=16).contains(&len));
        Self { name, len, carry: [0; 16], have: 0, left: count }
    }

    /// Takes the next bytes of the stream (at most its [`records`]' worth in all),
    /// calling `f` on each tag completed.
    pub fn add(&mut self, mut bytes: &[u8], mut f: impl FnMut(u128)) -> std::result::Result<(), WireError> {
        if self.have > 0 {
            let take = (self.len - self.have).min(bytes.len());
            self.carry[self.have..self.have + take].copy_from_slice(&bytes[..take]);
            self.have += take;
            bytes = &bytes[take..];
            if self.have < self.len {
                return Ok(());
            }
            self.have = 0;
            self.left -= 1;
            f(u128::from_le_bytes(self.carry));
            self.carry = [0; 16];
        }
        let whole = (bytes.len() / self.len).min(self.left);
        let (tags, rest) = bytes.split_at(whole * self.len);
        for t in tags.chunks_exact(self.len) {
            let mut b = [0u8; 16];
            b[..self.len].copy_from_slice(t);
            f(u128::from_le_bytes(b));
        }
        self.left -= whole;
        if self.left > 0 {
            // Fewer than `len` bytes: the start of the next tag.
            self.carry[..rest.len()].copy_from_slice(rest);
            self.have = rest.len();
        } else if rest.iter().any(|&b| b != 0) {
            return Err(WireError::Invalid { what: self.name, why: "non-zero padding after the last tag" });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::MemoryChannel;

    const S: Stream<16> = Stream::new(0x42, "Tags");

    #[test]
    fn tags_round_trip_across_records_and_chunks() {
        for (count, len) in [(0, 5), (1, 5), (15, 7), (16, 7), (17, 10), (16 * CHUNK + 33, 9), (1000, 16)] {
            let tags: Vec<u128> =
                (0..count as u128).map(|i| truncate(i.wrapping_mul(0x9e37_79b9_7f4a_7c15) + 1, len)).collect();
            let (mut a, mut b) = MemoryChannel::pair(1 << 24);
            // In two calls, the first a multiple of 16 tags.
            let cut = count / 32 * 16;
            send_tags(&S, &mut a, len, &tags[..cut], "t").unwrap();
            send_tags(&S, &mut a, len, &tags[cut..], "t").unwrap();
            let mut got = Vec::new();
            recv_tags(&S, &mut b, len, count, "t", |t| got.push(t)).unwrap();
            assert_eq!(got, tags, "{count} tags of {len} bytes");
            assert_eq!(a.stats().bytes_sent, b.stats().bytes_received);
        }
    }

    #[test]
    fn byte_by_byte_and_padding() {
        let mut r = TagReader::new("Tags", 3, 2);
        let mut got = Vec::new();
        for b in [1u8, 2, 3, 4, 5, 6, 0, 0] {
            r.add(&[b], |t| got.push(t)).unwrap();
        }
        assert_eq!(got, [0x030201, 0x060504]);
        let mut r = TagReader::new("Tags", 3, 2);
        let e = r.add(&[1, 2, 3, 4, 5, 6, 0, 9], |_| ()).unwrap_err();
        assert!(e.to_string().contains("non-zero padding"), "{e}");
    }

    #[test]
    fn lengths() {
        assert_eq!(tag_bytes(1, 1), 5); // 40 bits
        assert_eq!(tag_bytes(1 << 20, 1 << 20), 10); // 80 bits
        assert_eq!(tag_bytes(1 << 20, (1 << 20) + 1), 11); // rounded up
        assert_eq!(tag_bytes(1 << 60, 1 << 60), 16);
        assert_eq!(records(17, 10), 11);
        assert_eq!(truncate(u128::MAX, 2), 0xffff);
    }
}
