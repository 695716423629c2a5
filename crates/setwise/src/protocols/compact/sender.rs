//! The compact-PSI sender: checks the receiver's polynomial and sends one tag per item.

use super::{Hashes, TAG_KEY, TAG_POLYNOMIAL, TAG_TAGS, Tag, check_sizes, pair_to_bytes, polynomial_len};
use crate::elligator::point_of;
use crate::error::{Error, NetContext, Result};
use crate::fp128::{self, F128};
use crate::group::SecretScalar;
use crate::net::Channel;
use crate::protocols::chunks::send_records;
use crate::rng::{fill_os, shuffle};
use crate::session::{Report, Session, recv_message};
use crate::wire::{Reader, Writer};
use curve25519_dalek::edwards::EdwardsPoint;
use rayon::prelude::*;

/// Runs the sender's side on its distinct `items`. The sender learns nothing.
pub fn sender<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    session: &Session,
    items: &[I],
    report: &mut Report,
) -> Result<()> {
    check_sizes(session)?;
    if session.receiver_size() == 0 || session.sender_size() == 0 {
        return Ok(()); // the intersection is empty: nothing to send, nothing to test
    }
    let hashes = Hashes::new(session);
    // a = 8·a₀: multiplying by 8 removes the torsion part the receiver adds to its points.
    let a0 = SecretScalar::random();
    let public = EdwardsPoint::mul_base(a0.expose()).mul_by_cofactor();
    report.phase("send key", ch, |ch| {
        let mut w = Writer::with_capacity(33);
        w.u8(TAG_KEY).raw(public.compress().as_bytes());
        ch.send(&w.into_vec()).during("sending the key")
    })?;
    let poly = report.phase("receive polynomial", ch, |ch| {
        let body = recv_message(ch, TAG_POLYNOMIAL, "CompactPolynomial", "receiving the polynomial")?;
        parse_polynomial(&body, polynomial_len(session.receiver_size()))
    })?;
    let mut tags: Vec<Tag> = report.phase("evaluate and agree keys", ch, |_| {
        let (p0, p1): (Vec<F128>, Vec<F128>) = poly.iter().map(|c| (c[0], c[1])).unzip();
        items
            .par_iter()
            .map(|x| {
                let z = hashes.point(x.as_ref());
                let m = hashes.perm.forward(&pair_to_bytes([fp128::eval(&p0, z), fp128::eval(&p1, z)]));
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
        send_records(ch, TAG_TAGS, &tags, "sending tags")
    })
}

/// Parses and checks the receiver's polynomial: exactly `expected` coefficient pairs (a
/// longer one would let the receiver program more points than it has items), every half
/// canonical, and not constant (a constant would give every item the same key, which the
/// receiver could then test any guess against).
pub(crate) fn parse_polynomial(body: &[u8], expected: usize) -> Result<Vec<[F128; 2]>> {
    let mut r = Reader::new(body);
    let n = r.u32("CompactPolynomial")? as usize;
    if n != expected {
        return Err(Error::PeerMisbehaved(format!(
            "the receiver's polynomial has {n} coefficients; its announced set size requires exactly {expected}"
        )));
    }
    let records = r.records::<32>(n, "CompactPolynomial")?;
    r.finish("CompactPolynomial")?;
    let poly = records
        .iter()
        .enumerate()
        .map(|(i, c)| {
            super::pair_from_bytes(c).ok_or_else(|| {
                Error::PeerMisbehaved(format!(
                    "coefficient {i} of the receiver's polynomial is not a canonical field element"
                ))
            })
        })
        .collect::<Result<Vec<_>>>()?;
    if poly[1..].iter().all(|c| *c == [F128::ZERO; 2]) {
        return Err(Error::PeerMisbehaved("the receiver's polynomial is constant".into()));
    }
    Ok(poly)
}
