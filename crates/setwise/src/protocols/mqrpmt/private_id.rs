//! Private-ID (paper §6.2, after Garimella, Mohassel, Rosulek, Sadeghian, Singh, Trieu,
//! CRYPTO 2021): every item z gets the ID id(z) = F_A(z) ⊕ F_B(z), where F_A is the VOLE
//! OPRF whose key the client holds and F_B the one whose key the server holds; each
//! party learns the IDs of its own items (one OPRF evaluated for it by the peer, the
//! other with its own key) and the IDs of the union:
//! 1. OPRF A: the server evaluates Y under the client's key (`vole::oprf`); the client
//!    evaluates F_A on X with its key;
//! 2. OPRF B: the same with the roles swapped;
//! 3. PSU on the IDs, as the paper does: the mqRPMT `union` operation (any construction
//!    and last move) gives the server the IDs of X \ Y by OT;
//! 4. the server sends the sorted union of IDs; the client checks it holds its own.
//!
//! Neither party can compute the ID of an item it chooses (it holds one key of the
//! two), so the union's IDs say nothing about the peer's items beyond their number. The
//! OPRFs cost no public-key operation per item: the IDs take two silent VOLEs and
//! BLAKE3, and only the PSU exponentiates (4 per item, where the earlier DH-OPRF version
//! took 8).

use super::messages::{UNION_IDS, UnionCount};
use super::{MqrpmtParams, operations};
use crate::crypto::dst::{self, SessionId};
use crate::error::{Deviation, Result};
use crate::net::Channel;
use crate::protocols::vole::oprf::{self, Phases};
use crate::protocols::vole::{self, Hashes, Labels};
use crate::protocols::{Context, Operation, Outcome, Report, Security, SumTo};
use crate::wire::msg::Message;

/// ID bytes: 256 bits. An ID depends on an item's keys in the two OPRFs, hashed under
/// separate sessions, so two of the union's items share one only if both keys collide or
/// the 256-bit IDs do: with probability about (|X| + |Y|)²·2^-257.
const ID_LEN: usize = 32;

/// The session and hashes of OPRF A (`b"A"`, key at the client) or B (key at the server).
fn oprf_session(ctx: &Context, which: &[u8]) -> (SessionId, Hashes) {
    let sid = ctx.id.sub(dst::MQRPMT_PRIVATE_ID_OPRF, which);
    let labels = Labels {
        item: dst::MQRPMT_PRIVATE_ID_ITEM,
        value: dst::MQRPMT_PRIVATE_ID_VALUE,
        output: dst::MQRPMT_PRIVATE_ID_OUTPUT,
    };
    (sid, Hashes::of(sid, labels, 16))
}

/// Private-ID's OPRFs are semi-honest, as the protocol is.
const SEMI_HONEST: Security = Security::SemiHonest;

const EVALUATE_A: Phases = ["oprf A: silent VOLE, store encoded alongside", "oprf A: send the store"];
const HOLD_A: Phases = ["oprf A: silent VOLE, items hashed alongside", "oprf A: receive the store"];
const EVALUATE_B: Phases = ["oprf B: silent VOLE, store encoded alongside", "oprf B: send the store"];
const HOLD_B: Phases = ["oprf B: silent VOLE, items hashed alongside", "oprf B: receive the store"];

/// The own items' IDs: the output this side evaluated for them (`evaluated`, with the
/// peer's key) XOR the one under its own key (`held`), each given as (index, output).
fn ids(n: usize, evaluated: Vec<(u32, [u8; 32])>, held: Vec<(u32, [u8; 32])>) -> Vec<[u8; ID_LEN]> {
    let mut ids = vec![[0u8; ID_LEN]; n];
    for (i, half) in evaluated.into_iter().chain(held) {
        ids[i as usize].iter_mut().zip(half).for_each(|(a, b)| *a ^= b);
    }
    ids
}

/// The server P1 (the hello's receiver) with Y: its IDs and the union's.
pub(super) fn server<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    ctx: &Context,
    items: &[I],
    params: &MqrpmtParams,
    report: &mut Report,
) -> Result<Outcome> {
    vole::check_sizes(ctx)?;
    let ((sid_a, hashes_a), (sid_b, hashes_b)) = (oprf_session(ctx, b"A"), oprf_session(ctx, b"B"));
    let a = oprf::evaluate(ch, sid_a, SEMI_HONEST, &hashes_a, items, report, EVALUATE_A)?;
    let (key_b, hashed) = oprf::hold_key(ch, sid_b, SEMI_HONEST, &hashes_b, ctx.sender_size(), items, report, HOLD_B)?;
    let meter = report.meter(2 * items.len());
    let own = report.phase("ids", ch, |_| {
        let fa = a.eval_with(&meter, |i, x, v| (i as u32, hashes_a.output(x, v)));
        let fb = key_b.eval_with(&hashed, &meter, |i, x, v| (i as u32, hashes_b.output(x, v)));
        ids(items.len(), fa, fb)
    });
    let refs: Vec<&[u8]> = own.iter().map(|id| &id[..]).collect();
    let extra = match operations::receiver(ch, ctx, Operation::Union, &refs, SumTo::Sender, params, report)? {
        Outcome::Union(extra) => extra,
        other => unreachable!("the union operation returns the union, not {other:?}"),
    };
    let mut union = own.clone();
    for (index, id) in extra.iter().enumerate() {
        let id = <[u8; ID_LEN]>::try_from(id.as_slice())
            .map_err(|_| Deviation::NotAnItem { what: "private ID (32 bytes)", index })?;
        union.push(id);
    }
    union.sort_unstable();
    union.dedup();
    report.phase("union ids", ch, |ch| {
        UnionCount(union.len() as u64).send(ch, "sending the union IDs")?;
        UNION_IDS.send(ch, &union, "sending the union IDs")
    })?;
    Ok(Outcome::PrivateIds { own, union })
}

/// The client P2 (the hello's sender) with X: its IDs and the union's.
pub(super) fn client<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    ctx: &Context,
    items: &[I],
    params: &MqrpmtParams,
    report: &mut Report,
) -> Result<Outcome> {
    vole::check_sizes(ctx)?;
    let (n_own, n_peer) = (ctx.sender_size(), ctx.receiver_size());
    let ((sid_a, hashes_a), (sid_b, hashes_b)) = (oprf_session(ctx, b"A"), oprf_session(ctx, b"B"));
    let (key_a, hashed) = oprf::hold_key(ch, sid_a, SEMI_HONEST, &hashes_a, n_peer, items, report, HOLD_A)?;
    let b = oprf::evaluate(ch, sid_b, SEMI_HONEST, &hashes_b, items, report, EVALUATE_B)?;
    let meter = report.meter(2 * n_own);
    let own = report.phase("ids", ch, |_| {
        let fb = b.eval_with(&meter, |i, x, v| (i as u32, hashes_b.output(x, v)));
        let fa = key_a.eval_with(&hashed, &meter, |i, x, v| (i as u32, hashes_a.output(x, v)));
        ids(n_own, fb, fa)
    });
    let refs: Vec<&[u8]> = own.iter().map(|id| &id[..]).collect();
    operations::sender(ch, ctx, Operation::Union, &refs, None, SumTo::Sender, params, report)?;
    let union = report.phase("union ids", ch, |ch| {
        let total = UnionCount::recv(ch, "receiving the union IDs", (n_own, n_peer))?.0;
        UNION_IDS.recv_all(ch, total as usize, "receiving the union IDs")
    })?;
    if union.windows(2).any(|w| w[0] >= w[1]) {
        return Err(Deviation::UnsortedUnion.into());
    }
    if let Some(index) = own.iter().position(|id| union.binary_search(id).is_err()) {
        return Err(Deviation::IncompleteUnion { index }.into());
    }
    Ok(Outcome::PrivateIds { own, union })
}
