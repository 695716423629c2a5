//! Private-ID (paper §6.2): a distributed OPRF gives every item z the ID
//! G(z) = k1·k2·H(z), each party learning the IDs of its own items only; then `union` on
//! the IDs gives the server the union of IDs, which it sends, sorted, to the client.
//!
//! The paper runs a VOLE-based OPRF twice; here the OPRF is Diffie–Hellman over
//! ristretto255. Each party blinds its hashed items with a fresh scalar (s or r), the
//! peer applies its key, and the party removes the blind and applies its own key:
//! (k1·s⁻¹)·(k2·s·H(y)) = k1·k2·H(y). Without the blind, the server would see k2·H(x)
//! and could compute the client's IDs itself.

use super::{TAG_BLINDED, TAG_EVALUATED, TAG_UNION_IDS, operations, rpmt::LastMove};
use crate::error::{Error, NetContext, Result};
use crate::group::{Encoded, ItemHasher, SecretScalar};
use crate::hash::{Domain, dst};
use crate::net::Channel;
use crate::protocols::chunks::{recv_all, send_records};
use crate::protocols::{Operation, Outcome};
use crate::session::{Report, Session, recv_message};
use crate::wire::{Reader, Writer};

fn hasher(session: &Session) -> ItemHasher {
    ItemHasher::new(&Domain::new(dst::MQRPMT_PRIVATE_ID, session.id))
}

/// Applies `key` to the peer's blinded points.
fn evaluate(key: &SecretScalar, points: &[Encoded], what: &'static str) -> Result<Vec<Encoded>> {
    key.mul_encoded(points).map_err(|index| Error::InvalidPoint { what, index })
}

/// The server P1 (the hello's receiver) with Y: its IDs and the union's.
pub(super) fn server<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    session: &Session,
    items: &[I],
    last: LastMove,
    report: &mut Report,
) -> Result<Outcome> {
    let (n_own, n_peer) = (session.receiver_size(), session.sender_size());
    let (k1, s) = (SecretScalar::random(), SecretScalar::random());
    let ids = report.phase("distributed oprf", ch, |ch| {
        send_records(ch, TAG_BLINDED, &s.hash_and_mul(&hasher(session), items), "sending blinded items")?;
        let ours = recv_all::<32>(ch, TAG_EVALUATED, "PrivateIdEvaluated", n_own, "receiving our IDs")?;
        let ids = evaluate(&k1.times(&s.invert()), &ours, "PrivateIdEvaluated")?;
        let theirs = recv_all::<32>(ch, TAG_BLINDED, "PrivateIdBlinded", n_peer, "receiving blinded items")?;
        send_records(ch, TAG_EVALUATED, &evaluate(&k1, &theirs, "PrivateIdBlinded")?, "sending their IDs")?;
        Ok::<_, Error>(ids)
    })?;
    let extra = match operations::receiver(ch, session, Operation::Union, &ids, last, report)? {
        Outcome::Union(extra) => extra,
        other => unreachable!("union gives a union, not {other:?}"),
    };
    let mut union = ids.clone();
    for e in &extra {
        union.push(
            e.as_slice()
                .try_into()
                .map_err(|_| Error::PeerMisbehaved(format!("a union ID of {} bytes, not 32", e.len())))?,
        );
    }
    union.sort_unstable();
    union.dedup();
    report.phase("union ids", ch, |ch| {
        let mut w = Writer::with_capacity(9);
        w.u8(TAG_UNION_IDS).u64(union.len() as u64);
        ch.send(&w.into_vec()).during("sending the union IDs")?;
        send_records(ch, TAG_UNION_IDS, &union, "sending the union IDs")
    })?;
    Ok(Outcome::PrivateIds { own: ids, union })
}

/// The client P2 (the hello's sender) with X: its IDs and the union's.
pub(super) fn client<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    session: &Session,
    items: &[I],
    last: LastMove,
    report: &mut Report,
) -> Result<Outcome> {
    let (n_own, n_peer) = (session.sender_size(), session.receiver_size());
    let (k2, r) = (SecretScalar::random(), SecretScalar::random());
    let ids = report.phase("distributed oprf", ch, |ch| {
        let blinded = r.hash_and_mul(&hasher(session), items);
        let theirs = recv_all::<32>(ch, TAG_BLINDED, "PrivateIdBlinded", n_peer, "receiving blinded items")?;
        send_records(ch, TAG_EVALUATED, &evaluate(&k2, &theirs, "PrivateIdBlinded")?, "sending their IDs")?;
        send_records(ch, TAG_BLINDED, &blinded, "sending blinded items")?;
        let ours = recv_all::<32>(ch, TAG_EVALUATED, "PrivateIdEvaluated", n_own, "receiving our IDs")?;
        evaluate(&k2.times(&r.invert()), &ours, "PrivateIdEvaluated")
    })?;
    operations::sender(ch, session, Operation::Union, &ids, None, last, report)?;
    let union = report.phase("union ids", ch, |ch| {
        let body = recv_message(ch, TAG_UNION_IDS, "PrivateIdUnionCount", "receiving the union IDs")?;
        let mut rd = Reader::new(&body);
        let total = rd.u64("PrivateIdUnionCount")?;
        rd.finish("PrivateIdUnionCount")?;
        let (lo, hi) = (n_own.max(n_peer) as u64, n_own as u64 + n_peer as u64);
        if !(lo..=hi).contains(&total) {
            return Err(Error::PeerMisbehaved(format!("a union of {total} IDs from sets of {n_own} and {n_peer}")));
        }
        recv_all::<32>(ch, TAG_UNION_IDS, "PrivateIdUnion", total as usize, "receiving the union IDs")
    })?;
    if union.windows(2).any(|w| w[0] >= w[1]) {
        return Err(Error::PeerMisbehaved("the union IDs are not sorted and distinct".into()));
    }
    if let Some(i) = ids.iter().position(|id| union.binary_search(id).is_err()) {
        return Err(Error::PeerMisbehaved(format!("the union IDs lack the ID of our item {i}")));
    }
    Ok(Outcome::PrivateIds { own: ids, union })
}
