//! The HE query shared by `fhe` and `unbalanced`: the receiver sends a relinearisation
//! key (when the sender must multiply ciphertexts) and a fixed number of level-0
//! ciphertexts; the sender checks each against the agreed parameters before any
//! arithmetic. Each protocol gives the messages its own tags.

use crate::error::Result;
use crate::he::{Ciphertext, HeContext, RelinKey, SecretKey};
use crate::net::Channel;
use crate::wire::msg::Message;
use crate::wire::{Reader, Writer};

/// Receiver → sender: the relinearisation key, message tag `T`.
#[derive(Debug)]
pub struct KeyMessage<const T: u8>(pub RelinKey);

impl<const T: u8> Message for KeyMessage<T> {
    const TAG: u8 = T;
    const NAME: &'static str = "RelinKey";
    /// The agreed BFV parameters.
    type Agreed<'a> = &'a HeContext;

    fn write(&self, w: &mut Writer) {
        w.raw(&self.0.to_bytes());
    }

    fn read(r: &mut Reader<'_>, he: &HeContext) -> Result<Self> {
        let bytes = r.take(r.remaining(), Self::NAME)?;
        Ok(Self(he.relin_key_from_wire(bytes)?))
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

/// Receives the key (if `need_key`) and `count` level-0 query ciphertexts, tags `K` and
/// `Q`.
pub(crate) fn recv_query<const K: u8, const Q: u8>(
    ch: &mut impl Channel,
    he: &HeContext,
    need_key: bool,
    count: usize,
) -> Result<(Option<RelinKey>, Vec<Ciphertext>)> {
    let key = match need_key {
        true => Some(KeyMessage::<K>::recv(ch, "receiving the relinearisation key", he)?.0),
        false => None,
    };
    // `count` can follow from the peer's announced set size: grow with what arrives.
    let mut query = Vec::with_capacity(count.min(1 << 10));
    for _ in 0..count {
        query.push(CiphertextMessage::<Q>::recv(ch, "receiving the query", (he, 0))?.0);
    }
    Ok((key, query))
}

/// Sends the key (if `need_key`), then one encryption per slot vector, tags `K` and `Q`.
pub(crate) fn send_query<const K: u8, const Q: u8>(
    ch: &mut impl Channel,
    sk: &mut SecretKey,
    need_key: bool,
    vectors: impl IntoIterator<Item = Vec<u64>>,
) -> Result<()> {
    if need_key {
        KeyMessage::<K>(sk.relin_key()?).send(ch, "sending the relinearisation key")?;
    }
    for v in vectors {
        CiphertextMessage::<Q>(sk.encrypt(&v)?).send(ch, "sending the query")?;
    }
    Ok(())
}
