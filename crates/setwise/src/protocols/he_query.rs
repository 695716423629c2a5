//! The HE query shared by `fhe` and `unbalanced`: the receiver sends a relinearisation
//! key for each level the sender multiplies ciphertexts at, and a fixed number of level-0
//! ciphertexts; the sender checks each against the agreed parameters before any
//! arithmetic. Each protocol gives the messages its own tags.

use crate::error::Result;
use crate::he::{Ciphertext, HeContext, RelinKey, SecretKey};
use crate::net::Channel;
use crate::wire::msg::Message;
use crate::wire::{Reader, Writer};

/// Receiver → sender: a relinearisation key, message tag `T`.
#[derive(Debug)]
pub struct KeyMessage<const T: u8>(pub RelinKey);

impl<const T: u8> Message for KeyMessage<T> {
    const TAG: u8 = T;
    const NAME: &'static str = "RelinKey";
    /// The agreed BFV parameters and the key's level.
    type Agreed<'a> = (&'a HeContext, usize);

    fn write(&self, w: &mut Writer) {
        w.raw(&self.0.to_bytes());
    }

    fn read(r: &mut Reader<'_>, (he, level): (&HeContext, usize)) -> Result<Self> {
        let bytes = r.take(r.remaining(), Self::NAME)?;
        Ok(Self(he.relin_key_from_wire(bytes, level)?))
    }
}

/// A ciphertext at an agreed level, message tag `T`: a query ciphertext (level 0) or a
/// result (the last level).
#[derive(Debug)]
pub struct CiphertextMessage<const T: u8>(pub Ciphertext);

impl<const T: u8> Message for CiphertextMessage<T> {
    const TAG: u8 = T;
    const NAME: &'static str = "Ciphertext";
    /// The agreed BFV parameters and the level.
    type Agreed<'a> = (&'a HeContext, usize);

    fn write(&self, w: &mut Writer) {
        w.raw(&self.0.to_bytes());
    }

    fn read(r: &mut Reader<'_>, (he, level): (&HeContext, usize)) -> Result<Self> {
        let bytes = r.take(r.remaining(), Self::NAME)?;
        Ok(Self(he.ciphertext_from_wire(bytes, level, Self::NAME)?))
    }
}

/// Receives a key for each of `key_levels` and `count` level-0 query ciphertexts, tags
/// `K` and `Q`.
pub(crate) fn recv_query<const K: u8, const Q: u8>(
    ch: &mut impl Channel,
    he: &HeContext,
    key_levels: &[usize],
    count: usize,
) -> Result<(Vec<RelinKey>, Vec<Ciphertext>)> {
    let keys = key_levels
        .iter()
        .map(|&level| Ok(KeyMessage::<K>::recv(ch, "receiving a relinearisation key", (he, level))?.0))
        .collect::<Result<Vec<_>>>()?;
    // `count` can follow from the peer's announced set size: grow with what arrives.
    let mut query = Vec::with_capacity(count.min(1 << 10));
    for _ in 0..count {
        query.push(CiphertextMessage::<Q>::recv(ch, "receiving the query", (he, 0))?.0);
    }
    Ok((keys, query))
}

/// Sends a key for each of `key_levels`, then one encryption per slot vector, tags `K`
/// and `Q`.
pub(crate) fn send_query<const K: u8, const Q: u8>(
    ch: &mut impl Channel,
    sk: &mut SecretKey,
    key_levels: &[usize],
    vectors: impl IntoIterator<Item = Vec<u64>>,
) -> Result<()> {
    for &level in key_levels {
        KeyMessage::<K>(sk.relin_key_at(level)?).send(ch, "sending a relinearisation key")?;
    }
    for v in vectors {
        CiphertextMessage::<Q>(sk.encrypt(&v)?).send(ch, "sending the query")?;
    }
    Ok(())
}
