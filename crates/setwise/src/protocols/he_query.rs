//! The HE query shared by `fhe` and `unbalanced`: the receiver sends a relinearisation
//! key for each level the sender multiplies ciphertexts at, and a fixed number of
//! ciphertexts at the query level (both as [`QueryLevels`] says); the sender checks each
//! against the agreed parameters before any arithmetic. Each protocol gives the messages
//! its own tags.

use crate::error::Result;
use crate::he::{Ciphertext, HeContext, QueryLevels, RelinKey, SecretKey};
use crate::net::Channel;
use crate::wire::msg::Message;
use crate::wire::{Reader, Writer};

/// Receiver → sender: a relinearisation key, message tag `T`.
#[derive(Debug)]
pub struct KeyMessage<const T: u8>(pub RelinKey);

impl<const T: u8> Message for KeyMessage<T> {
    const TAG: u8 = T;
    const NAME: &'static str = "RelinKey";
    /// The agreed BFV parameters, the level of the ciphertexts the key is for, and the
    /// level whose moduli it is over.
    type Agreed<'a> = (&'a HeContext, usize, usize);

    fn write(&self, w: &mut Writer) {
        w.raw(&self.0.to_bytes());
    }

    fn read(r: &mut Reader<'_>, (he, level, over): (&HeContext, usize, usize)) -> Result<Self> {
        let bytes = r.take(r.remaining(), Self::NAME)?;
        Ok(Self(he.relin_key_from_wire(bytes, level, over)?))
    }
}

/// A ciphertext at an agreed level, message tag `T`: a query ciphertext (at the query
/// level) or a result (the last level).
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

/// Receives a key for each of `levels.keys` and `count` query ciphertexts at
/// `levels.query`, tags `K` and `Q`.
pub(crate) fn recv_query<const K: u8, const Q: u8>(
    ch: &mut impl Channel,
    he: &HeContext,
    levels: &QueryLevels,
    count: usize,
) -> Result<(Vec<RelinKey>, Vec<Ciphertext>)> {
    let keys = levels
        .keys
        .iter()
        .map(|&level| {
            let agreed = (he, level, levels.over(level));
            Ok(KeyMessage::<K>::recv(ch, "receiving a relinearisation key", agreed)?.0)
        })
        .collect::<Result<Vec<_>>>()?;
    // `count` can follow from the peer's announced set size: grow with what arrives.
    let mut query = Vec::with_capacity(count.min(1 << 10));
    for _ in 0..count {
        query.push(CiphertextMessage::<Q>::recv(ch, "receiving the query", (he, levels.query))?.0);
    }
    Ok((keys, query))
}

/// Sends a key for each of `levels.keys`, then one encryption per slot vector at
/// `levels.query`, tags `K` and `Q`.
pub(crate) fn send_query<const K: u8, const Q: u8>(
    ch: &mut impl Channel,
    sk: &mut SecretKey,
    levels: &QueryLevels,
    vectors: impl IntoIterator<Item = Vec<u64>>,
) -> Result<()> {
    for &level in &levels.keys {
        KeyMessage::<K>(sk.relin_key_over(level, levels.over(level))?).send(ch, "sending a relinearisation key")?;
    }
    for v in vectors {
        CiphertextMessage::<Q>(sk.encrypt_at(&v, levels.query)?).send(ch, "sending the query")?;
    }
    Ok(())
}
