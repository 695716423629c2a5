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
