//! The compact-PSI receiver: encodes one fresh key per item, interpolates, matches.

use super::{
    Hashes, TAG_KEY, TAG_POLYNOMIAL, TAG_TAGS, Tag, check_sizes, pair_from_bytes, pair_to_bytes, polynomial_len,
};
use crate::elligator::{Coins, representative, uniform_point};
use crate::error::{Error, NetContext, Result};
use crate::fp128::{self, F128};
use crate::net::Channel;
use crate::protocols::Outcome;
use crate::protocols::chunks::recv_records;
use crate::rng::csprng;
use crate::session::{Report, Session, recv_message};
use crate::wire::{Reader, Writer};
use curve25519_dalek::edwards::{CompressedEdwardsY, EdwardsBasepointTable, EdwardsPoint};
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::BasepointTable;
use rand::Rng;
use rayon::prelude::*;
use std::collections::HashSet;
use zeroize::Zeroize;

/// Runs the receiver's side on its distinct `items`; returns the intersection (sorted
/// indices into `items`).
pub fn receiver<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    session: &Session,
    items: &[I],
    report: &mut Report,
) -> Result<Outcome> {
    check_sizes(session)?;
    if session.receiver_size() == 0 || session.sender_size() == 0 {
        return Ok(Outcome::Intersection(Vec::new())); // the sender skips the run too
    }
    let hashes = Hashes::new(session);
    let (mut secrets, values) = report.phase("encode keys", ch, |_| encode_keys(&hashes, items.len()));
    let sender_key = report.phase("receive sender key", ch, |ch| {
        let body = recv_message(ch, TAG_KEY, "CompactKey", "receiving the sender's key")?;
        let mut r = Reader::new(&body);
        let bytes = r.array::<32>("CompactKey")?;
        r.finish("CompactKey")?;
        decode_sender_key(&bytes)
    })?;
    report.phase("interpolate and send polynomial", ch, |ch| {
        let poly = interpolate(&hashes, items, &values)?;
        let mut w = Writer::with_capacity(5 + poly.len() * 32);
        w.u8(TAG_POLYNOMIAL).u32(poly.len() as u32);
        for c in &poly {
            w.raw(c);
        }
        ch.send(&w.into_vec()).during("sending the polynomial")
    })?;
    let own: Vec<Tag> = report.phase("agree keys", ch, |_| {
        let table = EdwardsBasepointTable::create(&sender_key);
        items
            .par_iter()
            .zip(&secrets)
            .map(|(y, b)| hashes.tag(y.as_ref(), &(&table * b).to_montgomery().to_bytes()))
            .collect()
    });
    secrets.zeroize();
    report.phase("match", ch, |ch| {
        let mut theirs = HashSet::with_capacity(session.sender_size());
        recv_records::<32>(ch, TAG_TAGS, "CompactTags", session.sender_size(), "receiving tags", |_, chunk| {
            theirs.extend(chunk.iter().copied());
            Ok(())
        })?;
        Ok(Outcome::Intersection((0..items.len()).filter(|&i| theirs.contains(&own[i])).collect()))
    })
}

/// The sender's key A: a canonical encoding of a non-identity point of the prime-order
/// subgroup, the group the security argument assumes. (The identity would make every key
/// the same public value.)
fn decode_sender_key(bytes: &[u8; 32]) -> Result<EdwardsPoint> {
    let invalid = || Error::InvalidPoint { what: "CompactKey", index: 0 };
    let point = CompressedEdwardsY(*bytes).decompress().ok_or_else(invalid)?;
    if point.compress().0 != *bytes || !point.is_torsion_free() || point.is_small_order() {
        return Err(invalid());
    }
    Ok(point)
}

/// For each item a fresh secret b and f = Π⁻¹(representative of b·G + T), resampled until
/// a representative exists and both halves of f are field elements.
fn encode_keys(hashes: &Hashes, n: usize) -> (Vec<Scalar>, Vec<[F128; 2]>) {
    (0..n)
        .into_par_iter()
        .map_init(csprng, |rng, _| {
            loop {
                let mut wide = [0u8; 65];
                rng.fill_bytes(&mut wide);
                let b = Scalar::from_bytes_mod_order_wide(wide[..64].try_into().expect("64 bytes"));
                let coins = wide[64];
                wide.zeroize();
                let point = uniform_point(&EdwardsPoint::mul_base(&b), coins >> 3);
                if let Some(m) = representative(&point, Coins(coins))
                    && let Some(f) = pair_from_bytes(&hashes.perm.inverse(&m))
                {
                    return (b, f);
                }
            }
        })
        .unzip()
}

/// The coefficient pairs of P with P(H1(y_i)) = f_i, padded with random points to
/// [`polynomial_len`].
fn interpolate<I: AsRef<[u8]> + Sync>(hashes: &Hashes, items: &[I], values: &[[F128; 2]]) -> Result<Vec<[u8; 32]>> {
    let mut xs: Vec<F128> = items.par_iter().map(|y| hashes.point(y.as_ref())).collect();
    let mut halves: [Vec<F128>; 2] = [0, 1].map(|s| values.iter().map(|v| v[s]).collect());
    let mut rng = csprng();
    let mut random = || {
        let mut b = [0u8; 16];
        rng.fill_bytes(&mut b);
        F128::reduce(u128::from_le_bytes(b))
    };
    while xs.len() < polynomial_len(items.len()) {
        xs.push(random());
        halves[0].push(random());
        halves[1].push(random());
    }
    let polys = fp128::interpolate(&xs, &[&halves[0], &halves[1]]).map_err(|i| {
        Error::Params(format!(
            "interpolation point {i} repeats: two items (or a padding point) share an H1 value, probability ≤ n²·2^-129; run again"
        ))
    })?;
    Ok(polys[0].iter().zip(&polys[1]).map(|(&a, &b)| pair_to_bytes([a, b])).collect())
}
