//! The messages of VOLE-PSI (after the silent VOLE's own, `vole::messages`).

use crate::error::Result;
use crate::wire::msg::Message;
use crate::wire::stream::Stream;
use crate::wire::{Reader, Writer};

/// Receiver → sender: the store's columns masked by the VOLE, A = P + A′ (the count is
/// the store's, fixed by the receiver's announced size).
pub const STORE: Stream<16> = Stream::new(0x94, "VolePsiStore");
/// Sender → receiver: the shuffled tags, each of the agreed length, concatenated and cut
/// into 16-byte records (the last padded with zeros).
pub const TAGS: Stream<16> = Stream::new(0x95, "VolePsiTags");

/// Receiver → sender: the seed that fixes every key's band in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreSeed(pub [u8; 16]);

impl Message for StoreSeed {
    const TAG: u8 = 0x93;
    const NAME: &'static str = "VolePsiStoreSeed";
    type Agreed<'a> = ();

    fn write(&self, w: &mut Writer) {
        w.raw(&self.0);
    }

    fn read(r: &mut Reader<'_>, (): ()) -> Result<Self> {
        Ok(Self(r.array::<16>(Self::NAME)?))
    }
}

/// Malicious VOLE-PSI, sender → receiver before the VOLE: the commitment H(sid, w_s) to
/// the sender's share of the output mask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaskCommitment(pub [u8; 32]);

impl Message for MaskCommitment {
    const TAG: u8 = 0x96;
    const NAME: &'static str = "VolePsiMaskCommitment";
    type Agreed<'a> = ();

    fn write(&self, w: &mut Writer) {
        w.raw(&self.0);
    }

    fn read(r: &mut Reader<'_>, (): ()) -> Result<Self> {
        Ok(Self(r.array::<32>(Self::NAME)?))
    }
}

/// Malicious VOLE-PSI: a share of the output mask w = w_s + w_r; the receiver's w_r
/// after the store, then the sender's w_s (the commitment's opening).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaskShare(pub [u8; 16]);

impl Message for MaskShare {
    const TAG: u8 = 0x97;
    const NAME: &'static str = "VolePsiMaskShare";
    type Agreed<'a> = ();

    fn write(&self, w: &mut Writer) {
        w.raw(&self.0);
    }

    fn read(r: &mut Reader<'_>, (): ()) -> Result<Self> {
        Ok(Self(r.array::<16>(Self::NAME)?))
    }
}
