//! The messages of VOLE-PSI (after the silent VOLE's own, `vole::messages`).

use crate::wire::msg::fixed_message;
use crate::wire::stream::Stream;

/// Receiver → sender: the store's columns masked by the VOLE, A = P + A′ (the count is
/// the store's, fixed by the receiver's announced size).
pub const STORE: Stream<16> = Stream::new(0x94, "VolePsiStore");
/// Sender → receiver: the shuffled tags, each of the agreed length, concatenated and cut
/// into 16-byte records (the last padded with zeros).
pub const TAGS: Stream<16> = Stream::new(0x95, "VolePsiTags");

fixed_message!(
    /// Receiver → sender: the seed that fixes every key's band in the store.
    StoreSeed,
    0x93,
    "VolePsiStoreSeed",
    16
);

fixed_message!(
    /// Malicious VOLE-PSI, sender → receiver before the VOLE: the commitment H(sid, w_s)
    /// to the sender's share of the output mask.
    MaskCommitment,
    0x96,
    "VolePsiMaskCommitment",
    32
);

fixed_message!(
    /// Malicious VOLE-PSI: a share of the output mask w = w_s + w_r; the receiver's w_r
    /// after the store, then the sender's w_s (the commitment's opening).
    MaskShare,
    0x97,
    "VolePsiMaskShare",
    16
);
