//! The messages of oblivious transfer (roles are the OT's, not the PSI's).

use crate::crypto::ristretto::{Encoded, decode};
use crate::error::{Error, Result};
use crate::wire::msg::{Message, fixed_message};
use crate::wire::stream::Counted;
use crate::wire::{Reader, Writer};
use curve25519_dalek::ristretto::RistrettoPoint;

/// Base OT, sender → receiver: the sender's point A (one for the whole batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BaseSenderPoint {
    /// The encoding, hashed into every key.
    pub encoded: Encoded,
    /// The point, checked: canonical and not the identity.
    pub point: RistrettoPoint,
}

impl Message for BaseSenderPoint {
    const TAG: u8 = 0x60;
    const NAME: &'static str = "BaseOtPoint";
    type Agreed<'a> = ();

    fn write(&self, w: &mut Writer) {
        w.raw(&self.encoded);
    }

    fn read(r: &mut Reader<'_>, (): ()) -> Result<Self> {
        let encoded = r.array::<32>(Self::NAME)?;
        let point = decode(&encoded).ok_or(Error::InvalidPoint { what: Self::NAME, index: 0 })?;
        Ok(Self { encoded, point })
    }
}

/// Base OT, receiver → sender: one point B_i per OT, or (Masny–Rindal) the pair
/// (r_0, r_1) per OT as two points (the count is agreed, so there is no prefix). Points
/// are checked where they are used, each named by its index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseReceiverPoints(pub Vec<Encoded>);

impl Message for BaseReceiverPoints {
    const TAG: u8 = 0x61;
    const NAME: &'static str = "BaseOtPoints";
    /// The number of base OTs.
    type Agreed<'a> = usize;

    fn write(&self, w: &mut Writer) {
        w.raw(self.0.as_flattened());
    }

    fn size_hint(&self) -> usize {
        32 * self.0.len()
    }

    fn read(r: &mut Reader<'_>, n: usize) -> Result<Self> {
        Ok(Self(r.records::<32>(n, Self::NAME)?.to_vec()))
    }
}

fixed_message!(
    /// Malicious IKNP (KOS), extension receiver → sender: the consistency check's
    /// x = Σ χ_j·r_j, then t = Σ χ_j·t_j, two GF(2^128) elements.
    KosCheck,
    0x65,
    "IknpConsistencyCheck",
    32
);

/// IKNP, extension receiver → sender: one chunk of the correction matrix u, κ rows of
/// the chunk's 128-bit blocks each (the count follows from the chunk).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorrectionChunk(pub Vec<[u8; 16]>);

impl Message for CorrectionChunk {
    const TAG: u8 = 0x62;
    const NAME: &'static str = "IknpMatrix";
    /// Blocks in the chunk (κ · ⌈columns / 128⌉).
    type Agreed<'a> = usize;

    fn write(&self, w: &mut Writer) {
        w.raw(self.0.as_flattened());
    }

    fn size_hint(&self) -> usize {
        16 * self.0.len()
    }

    fn read(r: &mut Reader<'_>, blocks: usize) -> Result<Self> {
        Ok(Self(r.records::<16>(blocks, Self::NAME)?.to_vec()))
    }
}

/// Chosen-message and one-sided OT, sender → receiver: masked messages of `per` bytes
/// each, about 1 MiB to a frame.
pub const fn masked(per: usize) -> Counted {
    let per_frame = FRAME_BYTES / if per == 0 { 1 } else { per };
    Counted::new(0x63, "OtMessages", if per_frame == 0 { 1 } else { per_frame })
}

/// Bytes of masked messages per frame (about).
pub const FRAME_BYTES: usize = 1 << 20;
