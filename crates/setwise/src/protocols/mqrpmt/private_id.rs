//! Private-ID (paper §6.2): every item z gets the ID G(z) = k1·k2·H(z), each party
//! learning the IDs of its own items only; the server learns the IDs of X \ Y by OT and
//! sends the sorted union of IDs to the client.
//!
//! The paper runs a VOLE-based OPRF twice and then PSU from mqRPMT; here the OPRF is
//! Diffie–Hellman over ristretto255 and its messages double as the membership test,
//! which saves the PSU's four exponentiations per item (8 instead of 12 in all):
//! 1. server → client: A_y = s·H(y) (s a blind);
//! 2. client → server: E_y = k2·A_y in order, so the server's IDs are (k1/s)·E_y;
//!    Ω = r·E_y shuffled, so the server's test set is (k1/s)·Ω = {r·G(y)};
//!    V_i = r·k2·H(x_i) in the client's shuffled order;
//! 3. server → client: W_i = k1·V_i = r·G(x_i); the server's bit e_i = [W_i ∈ {r·G(y)}];
//!    the client's IDs are r⁻¹·W_i;
//! 4. one-sided OT of G(x_i) where e_i = 0; the server sends the sorted union.
//!
//! The server never holds G(x) for x ∈ X ∩ Y next to its own G(y): it sees G(X) only
//! multiplied by the client's secret r, and linking r·G(y) to G(y) is DDH. Without the
//! blind s, the client would compute the server's IDs itself.

use super::messages::{BLINDED, EVALUATED, TEST_SET, UNION_IDS, UnionCount};
use super::shuffled;
use crate::crypto::dst::{self, Domain};
use crate::crypto::ristretto::{Encoded, ItemHasher, SecretScalar};
use crate::crypto::rng::shuffle;
use crate::error::{Deviation, Error, Result};
use crate::net::Channel;
use crate::ot;
use crate::protocols::{Context, Outcome, Report};
use crate::wire::msg::Message;
use std::collections::HashSet;

fn hasher(ctx: &Context) -> ItemHasher {
    ItemHasher::new(&Domain::new(dst::MQRPMT_PRIVATE_ID, ctx.id))
}

/// Applies `key` to the peer's points.
fn evaluate(key: &SecretScalar, points: &[Encoded], what: &'static str) -> Result<Vec<Encoded>> {
    key.mul_encoded(points).map_err(|index| Error::InvalidPoint { what, index })
}

/// The server P1 (the hello's receiver) with Y: its IDs and the union's.
///
/// There is no last move to choose: the test set must stay points the server can key.
pub(super) fn server<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    ctx: &Context,
    items: &[I],
    report: &mut Report,
) -> Result<Outcome> {
    let (n_own, n_peer) = (ctx.receiver_size(), ctx.sender_size());
    let (k1, s) = (SecretScalar::random(), SecretScalar::random());
    let unblind = k1.times(&s.invert());
    let (ids, bits) = report.phase("distributed oprf", ch, |ch| {
        BLINDED.send(ch, &s.hash_and_mul(&hasher(ctx), items), "sending blinded items")?;
        let ours = EVALUATED.recv_all(ch, n_own, "receiving our IDs")?;
        let ids = evaluate(&unblind, &ours, "PrivateIdEvaluated")?;
        let omega = TEST_SET.recv_all(ch, n_own, "receiving the test set")?;
        let test: HashSet<Encoded> = evaluate(&unblind, &omega, "PrivateIdTestSet")?.into_iter().collect();
        let theirs = BLINDED.recv_all(ch, n_peer, "receiving blinded items")?;
        let keyed = evaluate(&k1, &theirs, "PrivateIdBlinded")?;
        EVALUATED.send(ch, &keyed, "sending their IDs")?;
        let bits: Vec<bool> = keyed.iter().map(|w| !test.contains(w)).collect();
        Ok::<_, Error>((ids, bits))
    })?;
    // The IDs of the client's items we lack, by one-sided OT chosen by [x_i ∉ Y].
    let mut union = ids.clone();
    if n_peer > 0 {
        let sid = ctx.id;
        let keys = report.phase("ot extension", ch, |ch| ot::extend_receive(ch, sid, &bits))?;
        let got = report.phase("transfer", ch, |ch| ot::receive_one_sided(ch, sid, &keys, &bits, 32))?;
        union.extend(got.iter().map(|(_, id)| <[u8; 32]>::try_from(id.as_slice()).expect("32-byte messages")));
    }
    union.sort_unstable();
    union.dedup();
    report.phase("union ids", ch, |ch| {
        UnionCount(union.len() as u64).send(ch, "sending the union IDs")?;
        UNION_IDS.send(ch, &union, "sending the union IDs")
    })?;
    Ok(Outcome::PrivateIds { own: ids, union })
}

/// The client P2 (the hello's sender) with X: its IDs and the union's.
pub(super) fn client<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    ctx: &Context,
    items: &[I],
    report: &mut Report,
) -> Result<Outcome> {
    let (n_own, n_peer) = (ctx.sender_size(), ctx.receiver_size());
    let (k2, r) = (SecretScalar::random(), SecretScalar::random());
    let rk2 = r.times(&k2);
    let (order, xs) = shuffled(items);
    let ids_shuffled = report.phase("distributed oprf", ch, |ch| {
        let blinded = rk2.hash_and_mul(&hasher(ctx), &xs);
        let theirs = BLINDED.recv_all(ch, n_peer, "receiving blinded items")?;
        EVALUATED.send(ch, &evaluate(&k2, &theirs, "PrivateIdBlinded")?, "sending their IDs")?;
        let mut omega = evaluate(&rk2, &theirs, "PrivateIdBlinded")?;
        shuffle(&mut omega);
        TEST_SET.send(ch, &omega, "sending the test set")?;
        BLINDED.send(ch, &blinded, "sending blinded items")?;
        let ours = EVALUATED.recv_all(ch, n_own, "receiving our IDs")?;
        evaluate(&r.invert(), &ours, "PrivateIdEvaluated")
    })?;
    if n_own > 0 {
        let sid = ctx.id;
        let pairs = report.phase("ot extension", ch, |ch| ot::extend_send(ch, sid, n_own))?;
        report.phase("transfer", ch, |ch| ot::send_one_sided(ch, sid, &pairs, ids_shuffled.as_flattened(), 32))?;
    }
    let mut ids = vec![[0u8; 32]; n_own];
    for (&i, id) in order.iter().zip(&ids_shuffled) {
        ids[i] = *id;
    }
    let union = report.phase("union ids", ch, |ch| {
        let total = UnionCount::recv(ch, "receiving the union IDs", (n_own, n_peer))?.0;
        UNION_IDS.recv_all(ch, total as usize, "receiving the union IDs")
    })?;
    if union.windows(2).any(|w| w[0] >= w[1]) {
        return Err(Deviation::UnsortedUnion.into());
    }
    if let Some(index) = ids.iter().position(|id| union.binary_search(id).is_err()) {
        return Err(Deviation::IncompleteUnion { index }.into());
    }
    Ok(Outcome::PrivateIds { own: ids, union })
}
