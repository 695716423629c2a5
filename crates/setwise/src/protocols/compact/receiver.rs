//! The compact-PSI receiver: encodes one fresh key per item, interpolates, matches.

use super::messages::{Polynomial, SenderKey, TAGS};
use super::{FAST_INTERPOLATION_FROM, Hashes, Tag, check_sizes, pair_from_bytes, polynomial_len};
use crate::crypto::elligator::{Coins, representative, uniform_point};
use crate::crypto::rng::{PerIndex, csprng};
use crate::error::{Error, Result};
use crate::math::fp128::{F128, Fp128};
use crate::math::{fastpoly, poly};
use crate::net::Channel;
use crate::protocols::{Context, Outcome, Report};
use crate::wire::msg::Message;
use curve25519_dalek::edwards::{EdwardsBasepointTable, EdwardsPoint};
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
    ctx: &Context,
    items: &[I],
    report: &mut Report,
) -> Result<Outcome> {
    check_sizes(ctx)?;
    if ctx.has_empty_side() {
        return Ok(Outcome::Intersection(Vec::new())); // the sender skips the run too
    }
    let hashes = Hashes::new(ctx);
    let (mut secrets, values) = report.phase("encode keys", ch, |_| encode_keys(&hashes, items.len()));
    let SenderKey(sender_key) =
        report.phase("receive sender key", ch, |ch| SenderKey::recv(ch, "receiving the sender's key", ()))?;
    report.phase("interpolate and send polynomial", ch, |ch| {
        interpolate(&hashes, items, &values)?.send(ch, "sending the polynomial")
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
        let mut theirs = HashSet::with_capacity(ctx.sender_size());
        TAGS.recv(ch, ctx.sender_size(), "receiving tags", |_, chunk| {
            theirs.extend(chunk.iter().copied());
            Ok(())
        })?;
        Ok(Outcome::Intersection((0..items.len()).filter(|&i| theirs.contains(&own[i])).collect()))
    })
}

/// For each item a fresh secret b and f = Π⁻¹(representative of b·G + T), resampled until
/// a representative exists and both halves of f are field elements.
fn encode_keys(hashes: &Hashes, n: usize) -> (Vec<Scalar>, Vec<[F128; 2]>) {
    // One stream per item, not per thread: a seeded (staged) run draws the same again.
    let random = PerIndex::draw();
    (0..n)
        .into_par_iter()
        .map(|i| {
            let mut rng = random.stream(i as u64);
            loop {
                let mut wide = [0u8; 65];
                rng.fill(&mut wide);
                let b = Scalar::from_bytes_mod_order_wide(wide[..64].try_into().expect("64 bytes"));
                let coins = wide[64];
                wide.zeroize();
                let point = uniform_point(&EdwardsPoint::mul_base(&b), coins >> 3);
                if let Some(m) = representative(&point, Coins(coins))
                    && let Some(f) = pair_from_bytes(&hashes.perm.inverse(&m))
                {
                    rng.zeroize();
                    return (b, f);
                }
            }
        })
        .unzip()
}

/// The coefficient pairs of P with P(H1(y_i)) = f_i, padded with random points to
/// [`polynomial_len`].
fn interpolate<I: AsRef<[u8]> + Sync>(hashes: &Hashes, items: &[I], values: &[[F128; 2]]) -> Result<Polynomial> {
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
    let polys = if xs.len() >= FAST_INTERPOLATION_FROM {
        fastpoly::interpolate(&xs, &[&halves[0], &halves[1]])
    } else {
        poly::interpolate(Fp128, &xs, &[&halves[0], &halves[1]])
    };
    let polys = polys.map_err(|i| {
        Error::params("items", format!(
            "interpolation point {i} repeats: two items (or a padding point) share an H1 value, probability ≤ n²·2^-129; run again"
        ))
    })?;
    Ok(Polynomial(polys[0].iter().zip(&polys[1]).map(|(&a, &b)| [a, b]).collect()))
}
