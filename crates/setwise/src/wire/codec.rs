//! Byte-level message codec: a bounded [`Reader`] over a received frame and a [`Writer`].
//!
//! Every decoder in setwise reads through [`Reader`]: it only hands out bytes that are
//! really in the frame, so a length or count claimed by a peer never causes an
//! allocation by itself, and [`Reader::finish`] rejects trailing bytes.

use crate::error::WireError;

/// Reads fields from one received frame, never past its end.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader over `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    /// The next `len` bytes, or [`WireError::Truncated`] if the frame holds fewer.
    pub fn take(&mut self, len: usize, what: &'static str) -> Result<&'a [u8], WireError> {
        if len > self.buf.len() {
            return Err(WireError::Truncated { what, need: len, have: self.buf.len() });
        }
        let (head, tail) = self.buf.split_at(len);
        self.buf = tail;
        Ok(head)
    }

    /// The next `N` bytes as an array.
    pub fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], WireError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, what)?);
        Ok(out)
    }

    /// One byte.
    pub fn u8(&mut self, what: &'static str) -> Result<u8, WireError> {
        Ok(self.array::<1>(what)?[0])
    }

    /// A little-endian u16.
    pub fn u16(&mut self, what: &'static str) -> Result<u16, WireError> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    /// A little-endian u32.
    pub fn u32(&mut self, what: &'static str) -> Result<u32, WireError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    /// A little-endian u64.
    pub fn u64(&mut self, what: &'static str) -> Result<u64, WireError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A u32 count that must not exceed `bound`.
    pub fn count(&mut self, what: &'static str, bound: usize) -> Result<usize, WireError> {
        let n = self.u32(what)? as usize;
        if n > bound {
            return Err(WireError::Count { what, got: n as u64, bound: bound as u64 });
        }
        Ok(n)
    }

    /// A byte string with a u32 length prefix of at most `max` bytes.
    pub fn bytes(&mut self, what: &'static str, max: usize) -> Result<&'a [u8], WireError> {
        let n = self.count(what, max)?;
        self.take(n, what)
    }

    /// A UTF-8 string with a u32 length prefix of at most `max` bytes.
    pub fn str(&mut self, what: &'static str, max: usize) -> Result<&'a str, WireError> {
        std::str::from_utf8(self.bytes(what, max)?).map_err(|_| WireError::Invalid { what, why: "not UTF-8" })
    }

    /// `count` fixed-size records of `N` bytes each, borrowed from the frame.
    pub fn records<const N: usize>(&mut self, count: usize, what: &'static str) -> Result<&'a [[u8; N]], WireError> {
        let len =
            count.checked_mul(N).ok_or(WireError::Count { what, got: count as u64, bound: (usize::MAX / N) as u64 })?;
        let body = self.take(len, what)?;
        Ok(body.as_chunks::<N>().0)
    }

    /// Checks that the whole frame was consumed.
    pub fn finish(self, what: &'static str) -> Result<(), WireError> {
        if self.buf.is_empty() { Ok(()) } else { Err(WireError::TrailingData { what, extra: self.buf.len() }) }
    }
}

/// Builds one outgoing frame.
#[derive(Debug, Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// An empty frame with room for `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Self {
        Self { buf: Vec::with_capacity(capacity) }
    }

    /// Appends one byte.
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.buf.push(v);
        self
    }

    /// Appends a little-endian u16.
    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Appends a little-endian u32.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Appends a little-endian u64.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Appends raw bytes (no length prefix).
    pub fn raw(&mut self, v: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(v);
        self
    }

    /// Appends a byte string with a u32 length prefix.
    ///
    /// # Panics
    /// If `v` is longer than `u32::MAX` bytes (a caller bug: frames are far smaller).
    pub fn bytes(&mut self, v: &[u8]) -> &mut Self {
        let len = u32::try_from(v.len()).expect("field longer than u32::MAX");
        self.u32(len).raw(v)
    }

    /// The finished frame.
    pub fn into_vec(self) -> Vec<u8> {
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_bounds() {
        let mut w = Writer::default();
        w.u8(7).u16(300).u32(70_000).u64(1 << 40).bytes(b"hello").raw(&[1; 64]);
        let frame = w.into_vec();
        let mut r = Reader::new(&frame);
        assert_eq!(r.u8("a").unwrap(), 7);
        assert_eq!(r.u16("b").unwrap(), 300);
        assert_eq!(r.u32("c").unwrap(), 70_000);
        assert_eq!(r.u64("d").unwrap(), 1 << 40);
        assert_eq!(r.bytes("e", 5).unwrap(), b"hello");
        assert_eq!(r.records::<32>(2, "f").unwrap().len(), 2);
        r.finish("msg").unwrap();
    }

    #[test]
    fn claims_beyond_the_frame_are_rejected() {
        let frame = [0xff, 0xff, 0xff, 0xff, 1, 2];
        assert!(matches!(Reader::new(&frame).bytes("x", usize::MAX), Err(WireError::Truncated { .. })));
        assert!(matches!(Reader::new(&frame).bytes("x", 10), Err(WireError::Count { .. })));
        assert!(matches!(Reader::new(&frame).records::<32>(usize::MAX, "x"), Err(WireError::Count { .. })));
        let mut r = Reader::new(&frame);
        r.u8("x").unwrap();
        assert!(matches!(r.finish("m"), Err(WireError::TrailingData { extra: 5, .. })));
    }
}
