//! mqRPMT from a permuted OPRF (paper Fig. 6), the pOPRF from a commutative weak
//! pseudorandom permutation (Fig. 5): F_k(P) = k·P on ristretto255, a bijection of the
//! prime-order group for k ≠ 0 with inverse F_k⁻¹ = F_{k⁻¹}.
//!
//! The server is the pOPRF's client (mask s), the client its server (PRF key k):
//! 1. server → client: a_j = s·H(y_j) for every y_j (one mask for the whole batch, so
//!    that a permuted list can be unmasked);
//! 2. client → server: b = π(k·a_j), shuffled; the server unmasks T = {s⁻¹·b_j} =
//!    {k·H(y)}, the PRF values of Y in an order it cannot link to Y;
//! 3. client → server: a short tag of k·H(x_i) per item, in the client's order; the
//!    server sets e_i = [tag_i ∈ tags(T)].
//!
//! The paper sends k·H(x_i) itself. The server only compares it with T and never keys
//! it, so a truncated random-oracle hash of it serves as well and tells the server less:
//! it could compute the tag from the point. The tags are λ + log2(|X|·|Y|) bits
//! ([`tag_bytes`]), so that any false match in a run has probability ≤ 2^-40.

use super::super::messages::{QUERY_TAGS, SHUFFLED};
use super::{hasher, key_server_items, send_server_items, send_shuffled};
use crate::crypto::dst::{self, Domain};
use crate::crypto::ristretto::{Encoded, SecretScalar};
use crate::error::{Error, Result};
use crate::net::Channel;
use crate::protocols::Context;
use crate::wire::stream::CHUNK;
use crate::wire::tags::{recv_tags, send_tags, tag_bytes, truncate};
use rayon::prelude::*;
use std::collections::HashSet;

// The client sends its tags a chunk of items at a time: whole records but for the last.
const _: () = assert!(CHUNK.is_multiple_of(16));

/// The session's tag of a PRF value k·H(z).
struct QueryTags {
    hasher: blake3::Hasher,
    len: usize,
}

impl QueryTags {
    fn new(ctx: &Context) -> Self {
        Self {
            hasher: Domain::new(dst::MQRPMT_POPRF_TAG, ctx.id).hasher(),
            len: tag_bytes(ctx.sender_size(), ctx.receiver_size()),
        }
    }

    /// The first [`Self::len`] bytes of H_tag(point), as a number (the rest zero).
    fn tag(&self, point: &Encoded) -> u128 {
        let mut h = self.hasher.clone();
        h.update(point);
        let t = u128::from_le_bytes(h.finalize().as_bytes()[..16].try_into().expect("16 bytes"));
        truncate(t, self.len)
    }

    fn all(&self, points: &[Encoded]) -> Vec<u128> {
        points.par_iter().map(|p| self.tag(p)).collect()
    }
}

/// The server P1 (the pOPRF's client) with its items Y; returns e_i for each of the
/// client's items, in the client's order.
pub(super) fn server<I: AsRef<[u8]> + Sync>(ch: &mut impl Channel, ctx: &Context, items: &[I]) -> Result<Vec<bool>> {
    let s = SecretScalar::random();
    send_server_items(ch, ctx, &s, items)?;
    let permuted = SHUFFLED.recv_all(ch, ctx.receiver_size(), "receiving the permuted items")?;
    // F_s⁻¹ removes the mask: k·H(y) for every y, in the client's secret order.
    let values =
        s.invert().mul_encoded(&permuted).map_err(|index| Error::InvalidPoint { what: "MqrpmtShuffled", index })?;
    let tags = QueryTags::new(ctx);
    let ours: HashSet<u128> = tags.all(&values).into_iter().collect();
    let mut bits = Vec::with_capacity(ctx.sender_size().min(CHUNK)); // grows with the data
    recv_tags(&QUERY_TAGS, ch, tags.len, ctx.sender_size(), "testing", |t| bits.push(ours.contains(&t)))?;
    Ok(bits)
}

/// The client P2 (the pOPRF's server, key k) with its items X; learns nothing.
pub(super) fn client<I: AsRef<[u8]> + Sync>(ch: &mut impl Channel, ctx: &Context, items: &[I]) -> Result<()> {
    let k = SecretScalar::random();
    // π(k·a_j): the permuted OPRF values of the server's items, still masked.
    let evaluated = key_server_items(ch, ctx, &k)?;
    send_shuffled(ch, evaluated)?;
    let (h, tags) = (hasher(ctx), QueryTags::new(ctx));
    for chunk in items.chunks(CHUNK) {
        send_tags(&QUERY_TAGS, ch, tags.len, &tags.all(&k.hash_and_mul(&h, chunk)), "sending query tags")?;
    }
    Ok(())
}
