//! The compact-PSI sender: checks the receiver's polynomial and sends one tag per item.

use super::messages::{Polynomial, SenderKey, TAGS};
use super::{FAST_EVALUATION_FROM, Hashes, Tag, check_sizes, pair_to_bytes, polynomial_len};
use crate::crypto::elligator::point_of;
use crate::crypto::ristretto::SecretScalar;
use crate::crypto::rng::{fill_os, shuffle};
use crate::error::Result;
use crate::math::fastpoly;
use crate::math::fp128::{F128, Fp128};
use crate::math::poly::eval;
use crate::net::Channel;
use crate::protocols::{Context, Report};
use crate::wire::msg::Message;
use curve25519_dalek::edwards::EdwardsPoint;
use rayon::prelude::*;

/// Runs the sender's side on its distinct `items`. The sender learns nothing.
pub fn sender<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    ctx: &Context,
    items: &[I],
    report: &mut Report,
) -> Result<()> {
    check_sizes(ctx)?;
    if ctx.has_empty_side() {
        return Ok(()); // the intersection is empty: nothing to send, nothing to test
    }
    let hashes = Hashes::new(ctx);
    // a = 8·a₀: multiplying by 8 removes the torsion part the receiver adds to its points.
    let a0 = SecretScalar::random();
    let public = EdwardsPoint::mul_base(a0.expose()).mul_by_cofactor();
    report.phase("send key", ch, |ch| SenderKey(public).send(ch, "sending the key"))?;
    let poly = report
        .phase("receive polynomial", ch, |ch| {
            Polynomial::recv(ch, "receiving the polynomial", polynomial_len(ctx.receiver_size()))
        })?
        .0;
    let mut tags: Vec<Tag> = report.phase("evaluate and agree keys", ch, |_| {
        let (p0, p1): (Vec<F128>, Vec<F128>) = poly.iter().map(|c| (c[0], c[1])).unzip();
        let points: Vec<F128> = items.par_iter().map(|x| hashes.point(x.as_ref())).collect();
        let values = if p0.len().min(points.len()) >= FAST_EVALUATION_FROM {
            let [v0, v1]: [Vec<F128>; 2] =
                fastpoly::evaluate(&[&p0, &p1], &points).try_into().expect("two polynomials");
            v0.into_iter().zip(v1).collect()
        } else {
            points.par_iter().map(|&z| (eval(Fp128, &p0, z), eval(Fp128, &p1, z))).collect::<Vec<_>>()
        };
        items
            .par_iter()
            .zip(&values)
            .map(|(x, &(v0, v1))| {
                let m = hashes.perm.forward(&pair_to_bytes([v0, v1]));
                match point_of(&m).to_edwards(0) {
                    Some(p) => hashes.tag(x.as_ref(), &(p.mul_by_cofactor() * a0.expose()).to_montgomery().to_bytes()),
                    // Unreachable: only u = −1 has no Edwards form, and it is not on the curve
                    // (A − 2 is a non-square). A random tag keeps peer input from panicking.
                    None => {
                        let mut t = [0u8; 32];
                        fill_os(&mut t);
                        t
                    }
                }
            })
            .collect()
    });
    report.phase("send tags", ch, |ch| {
        shuffle(&mut tags);
        TAGS.send(ch, &tags, "sending tags")
    })
}
