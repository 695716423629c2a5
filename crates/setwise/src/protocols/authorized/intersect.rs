//! Intersect: one round (full) or an OPRF round plus one (partial); a fresh server
//! secret `s` per run makes runs with the same credentials unlinkable.

use super::credentials::Credentials;
use super::messages::{DIGESTS, OPRF_REQUEST, OPRF_RESPONSE, ServerKey};
use super::{Mode, h1, h2};
use crate::crypto::bls12_381::{
    G1_BYTES, G1Affine, G1Projective, G2Affine, G2Prepared, G2Projective, Secret, g1_from_bytes, g2_generator,
    gt_digest, pair,
};
use crate::crypto::dst::{self, Domain};
use crate::crypto::rng::shuffle;
use crate::error::{Error, Result};
use crate::net::Channel;
use crate::protocols::{Context, Outcome, Report};
use crate::wire::msg::Message;
use group::Curve;
use rayon::prelude::*;
use std::collections::HashSet;

fn decode_points(raw: &[[u8; G1_BYTES]], what: &'static str, offset: usize) -> Result<Vec<G1Affine>> {
    raw.par_iter()
        .enumerate()
        .map(|(i, b)| g1_from_bytes(b).ok_or(Error::InvalidPoint { what, index: offset + i }))
        .collect()
}

/// The server's side: its distinct `items` for the client `client_id` authorised by the
/// judge `pk`. The server learns nothing.
pub fn sender<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    ctx: &Context,
    mode: Mode,
    pk: &G2Affine,
    client_id: &[u8],
    items: &[I],
    report: &mut Report,
) -> Result<()> {
    super::check_identity(ch, client_id)?;
    let s = Secret::random();
    let points: Vec<G1Affine> = match mode {
        Mode::Full => report
            .phase("hash items", ch, |_| items.par_iter().map(|y| h1(y.as_ref(), client_id).to_affine()).collect()),
        Mode::Partial => report.phase("OPRF with the client's r", ch, |ch| {
            let t = Secret::random();
            let blinded: Vec<[u8; G1_BYTES]> = items
                .par_iter()
                .map(|y| (h1(y.as_ref(), client_id) * t.scalar()).to_affine().to_compressed())
                .collect();
            OPRF_REQUEST.send(ch, &blinded, "sending the OPRF request")?;
            let raw = OPRF_RESPONSE.recv_all(ch, items.len(), "receiving the OPRF response")?;
            let evaluated = decode_points(&raw, "OprfResponse", 0)?;
            let t_inv =
                Option::<crate::crypto::bls12_381::Scalar>::from(ff::Field::invert(&t.scalar())).expect("non-zero");
            // H1(y‖ID)^r = (H1(y‖ID)^{t·r})^{1/t}; then H2 of it.
            Ok::<_, Error>(
                evaluated.par_iter().map(|c| h2(&(G1Projective::from(c) * t_inv).to_affine()).to_affine()).collect(),
            )
        })?,
    };
    report.phase("pair and send", ch, |ch| {
        let big_s = (g2_generator() * s.scalar()).to_affine();
        let pk_s = G2Prepared::from((G2Projective::from(pk) * s.scalar()).to_affine());
        let domain = Domain::new(dst::AUTHORIZED_DIGEST, ctx.id);
        let mut digests: Vec<[u8; 16]> = points.par_iter().map(|p| gt_digest(&domain, &pair(p, &pk_s))).collect();
        shuffle(&mut digests);
        ServerKey(big_s).send(ch, "sending S")?;
        DIGESTS.send(ch, &digests, "sending encodings")
    })
}

/// The client's items that have a signature in `creds`: `(index into items, signature)`.
pub fn usable<I: AsRef<[u8]>>(creds: &Credentials, items: &[I]) -> Vec<(usize, G1Affine)> {
    let by_item: std::collections::HashMap<&[u8], &G1Affine> =
        creds.entries.iter().map(|(x, s)| (x.as_slice(), s)).collect();
    items.iter().enumerate().filter_map(|(i, x)| by_item.get(x.as_ref()).map(|s| (i, **s))).collect()
}

/// The client's side: `usable` are `(index, signature, item)` of its items that have
/// credentials (the hello announced their number). Returns the matching indices.
pub fn receiver(
    ch: &mut impl Channel,
    ctx: &Context,
    creds: &Credentials,
    usable: &[(usize, G1Affine)],
    report: &mut Report,
) -> Result<Outcome> {
    let m = ctx.sender_size();
    if creds.mode == Mode::Partial {
        let r = creds
            .r
            .as_ref()
            .ok_or_else(|| Error::params("credentials", "partial credentials without their exponent r".into()))?;
        report.phase("OPRF for the server", ch, |ch| {
            let mut out = Vec::with_capacity(m.min(1 << 20));
            OPRF_REQUEST.recv(ch, m, "receiving the OPRF request", |at, chunk| {
                let pts = decode_points(chunk, "OprfRequest", at)?;
                out.extend(
                    pts.par_iter()
                        .map(|p| (G1Projective::from(p) * r.scalar()).to_affine().to_compressed())
                        .collect::<Vec<_>>(),
                );
                Ok(())
            })?;
            OPRF_RESPONSE.send(ch, &out, "sending the OPRF response")
        })?;
    }
    report.phase("receive and match", ch, |ch| {
        let big_s = G2Prepared::from(ServerKey::recv(ch, "receiving S", ())?.0);
        let server: HashSet<[u8; 16]> = DIGESTS.recv_all(ch, m, "receiving encodings")?.into_iter().collect();
        let domain = Domain::new(dst::AUTHORIZED_DIGEST, ctx.id);
        let mut matched: Vec<usize> = usable
            .par_iter()
            .filter(|(_, sig)| server.contains(&gt_digest(&domain, &pair(sig, &big_s))))
            .map(|(i, _)| *i)
            .collect();
        matched.sort_unstable();
        Ok(Outcome::Intersection(matched))
    })
}
