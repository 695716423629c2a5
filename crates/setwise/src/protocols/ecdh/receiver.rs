//! The DH-PSI receiver.

use super::{TAG_DOUBLE_BLINDED, TAG_RECEIVER_BLINDED, TAG_SENDER_BLINDED, item_hasher};
use crate::error::{Error, Result};
use crate::group::{Encoded, SecretScalar};
use crate::net::Channel;
use crate::protocols::chunks::{CHUNK, recv_records, send_chunk};
use crate::protocols::{Operation, Outcome};
use crate::session::{Report, Session};
use std::collections::HashSet;

/// Runs the receiver's side on its distinct `items`; returns the intersection (indices
/// into `items`) or its size.
pub fn receiver<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    session: &Session,
    op: Operation,
    items: &[I],
    report: &mut Report,
) -> Result<Outcome> {
    let key = SecretScalar::random();
    let hasher = item_hasher(session);
    report.phase("blind and send own items", ch, |ch| {
        items.chunks(CHUNK).try_for_each(|chunk| {
            send_chunk(ch, TAG_RECEIVER_BLINDED, &key.hash_and_mul(&hasher, chunk), "sending blinded items")
        })
    })?;
    let sender_items: HashSet<Encoded> = report.phase("re-blind sender items", ch, |ch| {
        let mut set = HashSet::with_capacity(session.sender_size().min(1 << 20));
        recv_records(
            ch,
            TAG_SENDER_BLINDED,
            "SenderBlinded",
            session.sender_size(),
            "receiving sender items",
            |at, chunk| {
                let doubled =
                    key.mul_encoded(chunk).map_err(|i| Error::InvalidPoint { what: "SenderBlinded", index: at + i })?;
                set.extend(doubled);
                Ok(())
            },
        )?;
        Ok::<_, Error>(set)
    })?;
    if sender_items.len() != session.sender_size() {
        // Distinct items hash to distinct points except with negligible probability.
        return Err(Error::PeerMisbehaved("the sender sent repeated elements".into()));
    }
    report.phase("match", ch, |ch| {
        let mut matched = Vec::new();
        recv_records(
            ch,
            TAG_DOUBLE_BLINDED,
            "DoubleBlinded",
            items.len(),
            "receiving re-blinded items",
            |at, chunk| {
                matched
                    .extend(chunk.iter().enumerate().filter(|(_, e)| sender_items.contains(*e)).map(|(i, _)| at + i));
                Ok(())
            },
        )?;
        Ok(match op {
            Operation::Cardinality => Outcome::Cardinality(matched.len() as u64),
            _ => Outcome::Intersection(matched),
        })
    })
}
