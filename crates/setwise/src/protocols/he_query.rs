//! The HE query exchange shared by `fhe` and `unbalanced`: the receiver sends a
//! relinearisation key (when the sender must multiply ciphertexts) and a fixed number of
//! level-0 ciphertexts; the sender checks each against the agreed parameters.

use crate::error::{NetContext, Result};
use crate::he::{Ciphertext, HeContext, RelinKey, SecretKey};
use crate::net::Channel;
use crate::session::recv_message;

/// Message tags and names of one protocol's key and query messages.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QueryTags {
    pub key: (u8, &'static str),
    pub query: (u8, &'static str),
}

/// Receives the key (if `need_key`) and `count` query ciphertexts.
pub(crate) fn recv_query(
    ch: &mut impl Channel,
    ctx: &HeContext,
    tags: QueryTags,
    need_key: bool,
    count: usize,
) -> Result<(Option<RelinKey>, Vec<Ciphertext>)> {
    let key = if need_key {
        let body = recv_message(ch, tags.key.0, tags.key.1, "receiving the relinearisation key")?;
        Some(ctx.relin_key_from_wire(&body, 16 * ctx.ciphertext_bytes(0, true))?)
    } else {
        None
    };
    // `count` can follow from the peer's announced set size: grow with what arrives.
    let mut query = Vec::with_capacity(count.min(1 << 10));
    for _ in 0..count {
        let body = recv_message(ch, tags.query.0, tags.query.1, "receiving the query")?;
        query.push(ctx.ciphertext_from_wire(&body, 0, tags.query.1)?);
    }
    Ok((key, query))
}

/// Sends the key (if `need_key`), then one encryption per slot vector.
pub(crate) fn send_query(
    ch: &mut impl Channel,
    sk: &mut SecretKey,
    tags: QueryTags,
    need_key: bool,
    vectors: impl IntoIterator<Item = Vec<u64>>,
) -> Result<()> {
    if need_key {
        let mut frame = vec![tags.key.0];
        frame.extend_from_slice(&sk.relin_key()?.to_bytes());
        ch.send(&frame).during("sending the relinearisation key")?;
    }
    for v in vectors {
        let mut frame = vec![tags.query.0];
        frame.extend_from_slice(&sk.encrypt(&v)?.to_bytes());
        ch.send(&frame).during("sending the query")?;
    }
    Ok(())
}
