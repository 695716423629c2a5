//! The messages of mqRPMT and its operations: chunked streams of ristretto255 encodings
//! and of short tags, the Bloom filter in frames, and the small single-frame messages (OT
//! message width, masked sum, union size). OT's own messages are in [`crate::ot`].

use super::codec::ItemCodec;
use crate::error::{Deviation, Result};
use crate::protocols::Operation;
use crate::wire::msg::Message;
use crate::wire::stream::Stream;
use crate::wire::{Reader, WireError, Writer};

/// Server → client: F_k1(H(y)) for every y.
pub const SERVER_ITEMS: Stream<32> = Stream::new(0x70, "MqrpmtServerItems");
/// Client → server: F_k2(F_k1(H(y))), shuffled (the `shuffle` last move, and pOPRF's
/// permuted list).
pub const SHUFFLED: Stream<32> = Stream::new(0x71, "MqrpmtShuffled");
/// Client → server: F_k2(H(x)), in the client's order.
pub const CLIENT_ITEMS: Stream<32> = Stream::new(0x73, "MqrpmtClientItems");
/// Client → server (pOPRF): the truncated tags of F_k(H(x)), in the client's order,
/// packed into 16-byte records ([`crate::wire::tags`]).
pub const QUERY_TAGS: Stream<16> = Stream::new(0x7b, "MqrpmtQueryTags");
/// Private-ID, server → client: the sorted union IDs (after [`UnionCount`]).
pub const UNION_IDS: Stream<32> = Stream::new(0x78, "PrivateIdUnion");

/// Client → server: one frame of the Bloom filter (the `bloom` last move); the filter's
/// size follows from the server's set size, so frames come until it is complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterPart(pub Vec<u8>);

impl Message for FilterPart {
    const TAG: u8 = 0x72;
    const NAME: &'static str = "MqrpmtFilter";
    /// Filter bytes still due.
    type Agreed<'a> = usize;

    fn write(&self, w: &mut Writer) {
        w.raw(&self.0);
    }

    fn size_hint(&self) -> usize {
        self.0.len()
    }

    fn read(r: &mut Reader<'_>, due: usize) -> Result<Self> {
        let n = r.remaining();
        if n == 0 || n > due {
            return Err(WireError::Invalid { what: Self::NAME, why: "a frame empty or beyond the filter" }.into());
        }
        Ok(Self(r.take(n, Self::NAME)?.to_vec()))
    }
}

/// Client → server: bytes per OT message (union, shares: the item encoding; sum: the
/// sum modulus).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Width(pub usize);

impl Message for Width {
    const TAG: u8 = 0x74;
    const NAME: &'static str = "MqrpmtWidth";
    /// The operation, which decides the widths allowed.
    type Agreed<'a> = Operation;

    fn write(&self, w: &mut Writer) {
        w.u32(self.0 as u32);
    }

    fn read(r: &mut Reader<'_>, op: Operation) -> Result<Self> {
        let w = r.u32(Self::NAME)? as usize;
        match op {
            Operation::Sum if !(1..=16).contains(&w) => {
                Err(WireError::Invalid { what: Self::NAME, why: "a sum modulus of 1 to 16 bytes" }.into())
            }
            Operation::Union | Operation::Shares => ItemCodec::from_width(w).map(|_| Self(w)),
            _ => Ok(Self(w)),
        }
    }
}

/// Server → client (sum): the masked sum S' in the agreed width, and the cardinality.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaskedSum {
    /// Bytes of the sum (1..=16).
    pub width: usize,
    /// S' = Σ of the messages the server received, modulo 2^(8·width).
    pub masked: u128,
    /// |X ∩ Y|.
    pub cardinality: u64,
}

impl Message for MaskedSum {
    const TAG: u8 = 0x75;
    const NAME: &'static str = "MqrpmtSum";
    /// The sum's width in bytes and the client's set size (the largest cardinality).
    type Agreed<'a> = (usize, usize);

    fn write(&self, w: &mut Writer) {
        w.raw(&self.masked.to_le_bytes()[..self.width]).u64(self.cardinality);
    }

    fn read(r: &mut Reader<'_>, (width, n): (usize, usize)) -> Result<Self> {
        if !(1..=16).contains(&width) {
            return Err(WireError::Invalid { what: Self::NAME, why: "a sum of 1 to 16 bytes" }.into());
        }
        let mut b = [0u8; 16];
        b[..width].copy_from_slice(r.take(width, "MqrpmtSum.sum")?);
        let cardinality = r.u64("MqrpmtSum.cardinality")?;
        if cardinality > n as u64 {
            return Err(Deviation::OutOfRange {
                what: "the cardinality",
                value: cardinality.into(),
                min: 0,
                max: n as u128,
            }
            .into());
        }
        Ok(Self { width, masked: u128::from_le_bytes(b), cardinality })
    }
}

/// Private-ID, server → client: how many union IDs follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnionCount(pub u64);

impl Message for UnionCount {
    const TAG: u8 = 0x7a;
    const NAME: &'static str = "PrivateIdUnionCount";
    /// The two set sizes: the union has between the larger and their sum.
    type Agreed<'a> = (usize, usize);

    fn write(&self, w: &mut Writer) {
        w.u64(self.0);
    }

    fn read(r: &mut Reader<'_>, (a, b): (usize, usize)) -> Result<Self> {
        let total = r.u64(Self::NAME)?;
        let (min, max) = (a.max(b) as u128, a as u128 + b as u128);
        if !(min..=max).contains(&u128::from(total)) {
            return Err(Deviation::OutOfRange { what: "the union's size", value: total.into(), min, max }.into());
        }
        Ok(Self(total))
    }
}
