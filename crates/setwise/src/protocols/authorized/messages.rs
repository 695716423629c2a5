//! The messages of authorised PSI: the authorisation (client ↔ judge) and the
//! intersection (client ↔ server).

use super::eea::PROOF_BYTES;
use super::{MAX_CLIENT_ID, MAX_ITEM, Mode};
use crate::crypto::bls12_381::{G1_BYTES, G1Affine, G2_BYTES, G2Affine, g1_from_bytes, g2_from_bytes};
use crate::error::{Deviation, Error, Result};
use crate::wire::msg::Message;
use crate::wire::stream::{Counted, Stream};
use crate::wire::{Reader, WireError, Writer};

/// Items per frame when the client sends items or the judge sends signatures.
pub const ITEMS_PER_FRAME: usize = 4096;

/// Client → judge (full mode): the items, each with a u32 length.
pub const ITEMS: Counted = Counted::new(0x41, "AuthItems", ITEMS_PER_FRAME);
/// Client → judge (partial mode): the commitments H1(x‖ID)^r.
pub const COMMITMENTS: Stream<G1_BYTES> = Stream::new(0x42, "AuthCommitments");
/// Judge → client: per item a status byte (1 signed, 0 refused) and a signature (zeros
/// when refused); read with [`read_signature`].
pub const SIGNATURES: Counted = Counted::new(0x45, "AuthSignatures", ITEMS_PER_FRAME);
/// Server → client: the digests of the pairings, shuffled.
pub const DIGESTS: Stream<16> = Stream::new(0x47, "IntersectDigests");
/// Partial mode, server → client: H1(y‖ID)^t for the OPRF with the client's r.
pub const OPRF_REQUEST: Stream<G1_BYTES> = Stream::new(0x48, "OprfRequest");
/// Partial mode, client → server: the request raised to r.
pub const OPRF_RESPONSE: Stream<G1_BYTES> = Stream::new(0x49, "OprfResponse");

/// A G2 point from the wire, checked (on the curve, in the subgroup, canonical).
fn read_g2(r: &mut Reader<'_>, what: &'static str) -> Result<G2Affine> {
    let bytes: [u8; G2_BYTES] = r.array(what)?;
    g2_from_bytes(&bytes).ok_or(Error::InvalidPoint { what, index: 0 })
}

/// One signature record of [`SIGNATURES`]: `None` if refused.
pub fn read_signature(r: &mut Reader<'_>, index: usize) -> Result<Option<G1Affine>> {
    let status = r.u8("AuthSignatures.status")?;
    let bytes: [u8; G1_BYTES] = r.array("AuthSignatures.signature")?;
    match status {
        0 => Ok(None),
        1 => g1_from_bytes(&bytes).map(Some).ok_or(Error::InvalidPoint { what: "AuthSignatures", index }),
        _ => Err(WireError::Invalid { what: "AuthSignatures.status", why: "not 0 (refused) or 1 (signed)" }.into()),
    }
}

/// Writes one signature record of [`SIGNATURES`].
pub fn write_signature(w: &mut Writer, sig: &Option<G1Affine>) {
    match sig {
        Some(p) => w.u8(1).raw(&p.to_compressed()),
        None => w.u8(0).raw(&[0u8; G1_BYTES]),
    };
}

/// Judge → client: the judge's public key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JudgeKeyMessage(pub G2Affine);

impl Message for JudgeKeyMessage {
    const TAG: u8 = 0x40;
    const NAME: &'static str = "AuthKey";
    type Agreed<'a> = ();

    fn write(&self, w: &mut Writer) {
        w.raw(&self.0.to_compressed());
    }

    fn read(r: &mut Reader<'_>, (): ()) -> Result<Self> {
        read_g2(r, Self::NAME).map(Self)
    }
}

/// Client → judge: the mode and the client identity the signatures are bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthHeader {
    /// Full or partial.
    pub mode: Mode,
    /// The client identity.
    pub client_id: Vec<u8>,
}

impl Message for AuthHeader {
    const TAG: u8 = 0x4a;
    const NAME: &'static str = "AuthHeader";
    type Agreed<'a> = ();

    fn write(&self, w: &mut Writer) {
        w.u8(self.mode.code()).bytes(&self.client_id);
    }

    fn read(r: &mut Reader<'_>, (): ()) -> Result<Self> {
        let mode = Mode::from_code(r.u8("AuthHeader.mode")?)
            .ok_or(WireError::Invalid { what: "AuthHeader.mode", why: "not 1 or 2" })?;
        let client_id = r.bytes("AuthHeader.client_id", MAX_CLIENT_ID)?.to_vec();
        Ok(Self { mode, client_id })
    }
}

/// Judge → client (partial mode): the commitments it opens, by increasing index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge(pub Vec<usize>);

impl Message for Challenge {
    const TAG: u8 = 0x43;
    const NAME: &'static str = "AuthChallenge";
    /// The number of commitments.
    type Agreed<'a> = usize;

    fn write(&self, w: &mut Writer) {
        w.u32(self.0.len() as u32);
        self.0.iter().for_each(|&i| {
            w.u32(i as u32);
        });
    }

    fn read(r: &mut Reader<'_>, n: usize) -> Result<Self> {
        let k = r.count("AuthChallenge.count", n)?;
        let mut idx: Vec<usize> = Vec::with_capacity(k);
        for _ in 0..k {
            let i = r.u32("AuthChallenge.index")? as usize;
            if i >= n || idx.last().is_some_and(|&l| l >= i) {
                return Err(Deviation::BadIndices { what: Self::NAME }.into());
            }
            idx.push(i);
        }
        Ok(Self(idx))
    }
}

/// Client → judge (partial mode): the challenged items, each with its index, and the
/// exponent-equality proof.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opening {
    /// `(index, item)` for each challenged commitment, in the challenge's order.
    pub items: Vec<(usize, Vec<u8>)>,
    /// The proof that every opened commitment is its item's H1 raised to one r.
    pub proof: [u8; PROOF_BYTES],
}

impl Message for Opening {
    const TAG: u8 = 0x44;
    const NAME: &'static str = "AuthOpening";
    /// The challenge: the indices that must be opened, in order.
    type Agreed<'a> = &'a [usize];

    fn write(&self, w: &mut Writer) {
        w.u32(self.items.len() as u32);
        for (i, x) in &self.items {
            w.u32(*i as u32).bytes(x);
        }
        w.raw(&self.proof);
    }

    fn read(r: &mut Reader<'_>, challenge: &[usize]) -> Result<Self> {
        let k = challenge.len();
        let count = r.count("AuthOpening.count", k)?;
        if count != k {
            return Err(Deviation::Count { what: Self::NAME, got: count as u64, expected: k as u64 }.into());
        }
        let mut items = Vec::with_capacity(k);
        for &expected in challenge {
            let got = r.u32("AuthOpening.index")? as usize;
            if got != expected {
                return Err(Deviation::WrongOpening { got, expected }.into());
            }
            items.push((got, r.bytes("AuthOpening.item", MAX_ITEM)?.to_vec()));
        }
        let proof = r.array("AuthOpening.proof")?;
        Ok(Self { items, proof })
    }
}

/// Server → client: S = g2^s, fresh each run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerKey(pub G2Affine);

impl Message for ServerKey {
    const TAG: u8 = 0x46;
    const NAME: &'static str = "IntersectS";
    type Agreed<'a> = ();

    fn write(&self, w: &mut Writer) {
        w.raw(&self.0.to_compressed());
    }

    fn read(r: &mut Reader<'_>, (): ()) -> Result<Self> {
        read_g2(r, Self::NAME).map(Self)
    }
}
