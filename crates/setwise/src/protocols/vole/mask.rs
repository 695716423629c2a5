//! The output mask w of malicious VOLE-PSI (Rindal–Schoppmann, Eurocrypt 2021, Fig. 4):
//! every OPRF value is shifted by w = w_s + w_r before H_o. The sender commits to w_s
//! before the VOLE and opens it only after the receiver's store and w_r have arrived, so
//! neither side can choose its inputs (the sender its tags' values, the receiver its
//! store) knowing w. volePSI opens w_s before the store arrives; setwise follows the
//! paper, at no extra round trip.

use super::messages::{MaskCommitment, MaskShare};
use crate::crypto::dst::{self, Domain, SessionId};
use crate::crypto::rng::fill_os;
use crate::error::{Deviation, Result};
use crate::math::gf128::Gf128;
use crate::net::Channel;
use crate::wire::msg::Message;
use zeroize::{Zeroize, ZeroizeOnDrop};

fn commitment(sid: SessionId, share: &[u8; 16]) -> [u8; 32] {
    Domain::new(dst::VOLE_PSI_MASK_COMMITMENT, sid).hash32(share)
}

fn random_share() -> [u8; 16] {
    let mut w = [0u8; 16];
    fill_os(&mut w);
    w
}

/// The sender's share w_s, committed to (sent before the VOLE). The 128-bit share is
/// uniform, so its hash hides it (random oracle). Wiped when dropped unopened.
#[derive(Zeroize, ZeroizeOnDrop)]
pub(crate) struct SenderShare([u8; 16]);

impl SenderShare {
    /// Draws w_s and sends the commitment.
    pub(crate) fn commit(ch: &mut impl Channel, sid: SessionId) -> Result<Self> {
        let w = random_share();
        MaskCommitment(commitment(sid, &w)).send(ch, "sending the mask commitment")?;
        Ok(Self(w))
    }

    /// After the store: receives w_r, opens w_s; returns w.
    pub(crate) fn open(self, ch: &mut impl Channel) -> Result<Gf128> {
        let MaskShare(theirs) = MaskShare::recv(ch, "receiving the receiver's mask share", ())?;
        MaskShare(self.0).send(ch, "opening the mask share")?;
        Ok(Gf128::from_bytes(self.0) + Gf128::from_bytes(theirs))
    }
}

/// The receiver's view: the sender's commitment, received before the VOLE.
pub(crate) struct Committed([u8; 32]);

impl Committed {
    /// Receives the sender's commitment.
    pub(crate) fn recv(ch: &mut impl Channel) -> Result<Self> {
        Ok(Self(MaskCommitment::recv(ch, "receiving the mask commitment", ())?.0))
    }

    /// After the store: sends w_r, receives w_s and checks it against the commitment;
    /// returns w.
    pub(crate) fn exchange(self, ch: &mut impl Channel, sid: SessionId) -> Result<Gf128> {
        let ours = random_share();
        MaskShare(ours).send(ch, "sending the mask share")?;
        let MaskShare(theirs) = MaskShare::recv(ch, "receiving the sender's mask share", ())?;
        if commitment(sid, &theirs) != self.0 {
            return Err(Deviation::FailedCheck {
                what: "the sender's mask share",
                meaning: "it is not the one the sender committed to before the VOLE",
            }
            .into());
        }
        Ok(Gf128::from_bytes(ours) + Gf128::from_bytes(theirs))
    }
}
