//! The messages of compact PSI.

use super::{pair_from_bytes, pair_to_bytes};
use crate::error::{Deviation, Error, Result};
use crate::math::fp128::F128;
use crate::wire::msg::Message;
use crate::wire::stream::Stream;
use crate::wire::{Reader, Writer};
use curve25519_dalek::edwards::{CompressedEdwardsY, EdwardsPoint};

/// Sender → receiver: the shuffled tags H2(x, u(K)).
pub const TAGS: Stream<32> = Stream::new(0x52, "CompactTags");

/// Sender → receiver: the sender's key A = 8·a₀·G.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SenderKey(pub EdwardsPoint);

impl Message for SenderKey {
    const TAG: u8 = 0x50;
    const NAME: &'static str = "CompactKey";
    type Agreed<'a> = ();

    fn write(&self, w: &mut Writer) {
        w.raw(self.0.compress().as_bytes());
    }

    /// A canonical encoding of a non-identity point of the prime-order subgroup, the
    /// group the security argument assumes (the identity would make every key the same
    /// public value).
    fn read(r: &mut Reader<'_>, (): ()) -> Result<Self> {
        let bytes = r.array::<32>(Self::NAME)?;
        let invalid = || Error::InvalidPoint { what: Self::NAME, index: 0 };
        let point = CompressedEdwardsY(bytes).decompress().ok_or_else(invalid)?;
        if point.compress().0 != bytes || !point.is_torsion_free() || point.is_small_order() {
            return Err(invalid());
        }
        Ok(Self(point))
    }
}

/// Receiver → sender: the coefficient pairs of P, lowest degree first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Polynomial(pub Vec<[F128; 2]>);

impl Message for Polynomial {
    const TAG: u8 = 0x51;
    const NAME: &'static str = "CompactPolynomial";
    /// The number of coefficient pairs the receiver's announced set size requires.
    type Agreed<'a> = usize;

    fn write(&self, w: &mut Writer) {
        w.u32(self.0.len() as u32);
        self.0.iter().for_each(|c| {
            w.raw(&pair_to_bytes(*c));
        });
    }

    fn size_hint(&self) -> usize {
        4 + 32 * self.0.len()
    }

    /// Exactly `expected` pairs (a longer polynomial would let the receiver program more
    /// points than it has items), every half canonical, and not constant (a constant
    /// would give every item the same key, which the receiver could test any guess
    /// against).
    fn read(r: &mut Reader<'_>, expected: usize) -> Result<Self> {
        let n = r.u32(Self::NAME)? as usize;
        if n != expected {
            return Err(Deviation::Count { what: Self::NAME, got: n as u64, expected: expected as u64 }.into());
        }
        let poly = r
            .records::<32>(n, Self::NAME)?
            .iter()
            .enumerate()
            .map(|(index, c)| pair_from_bytes(c).ok_or(Deviation::NotCanonical { what: Self::NAME, index }.into()))
            .collect::<Result<Vec<_>>>()?;
        if poly.len() < 2 || poly[1..].iter().all(|c| *c == [F128::ZERO; 2]) {
            return Err(Deviation::ConstantPolynomial.into());
        }
        Ok(Self(poly))
    }
}
