//! Authorize: the judge signs a client's items (full) or commitments (partial).

use super::credentials::Credentials;
use super::eea;
use super::messages::{
    AuthHeader, COMMITMENTS, Challenge, ITEMS, JudgeKeyMessage, Opening, SIGNATURES, read_signature, write_signature,
};
use super::{JudgeKey, MAX_CLIENT_ID, MAX_ITEM, Mode, Policy, check_identity, h1, h2};
use crate::crypto::bls12_381::{
    Bls12, G1_BYTES, G1Affine, G1Projective, G2Affine, G2Prepared, Secret, g1_from_bytes, g2_generator,
};
use crate::error::{Deviation, Error, Result};
use crate::net::Channel;
use crate::protocols::{Context, Report};
use crate::wire::msg::Message;
use crate::wire::text::{MAX_SHOWN, printable_bytes};
use group::Curve;
use pairing_lib::{MillerLoopResult, MultiMillerLoop};
use rand::seq::index::sample;
use rayon::prelude::*;

/// How the judge decides.
#[derive(Debug, Clone, Copy)]
pub struct JudgeConfig {
    /// Partial mode: the fraction p of commitments the judge opens (⌈p·n⌉ of them).
    pub fraction: f64,
    /// Full mode: sign nothing unless the policy allows every item (the paper's
    /// all-or-nothing answer); otherwise sign the allowed items and refuse the rest.
    pub strict: bool,
}

impl JudgeConfig {
    /// A configuration with `fraction` checked: a share in (0, 1] (a judge opening no
    /// commitment would sign anything in partial mode).
    pub fn new(fraction: f64, strict: bool) -> Result<Self> {
        if !(fraction > 0.0 && fraction <= 1.0) {
            return Err(Error::usage("fraction", format!("the judge's fraction must be in (0, 1], not {fraction}")));
        }
        Ok(Self { fraction, strict })
    }
}

/// What the judge did in one session.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct JudgeOutcome {
    /// The client's identity.
    pub client_id: String,
    /// Full or partial.
    pub mode: Mode,
    /// Items signed.
    pub signed: usize,
    /// Items refused.
    pub refused: usize,
    /// Partial mode: commitments opened.
    pub opened: usize,
}

/// The judge's side of one authorisation.
pub fn judge(
    ch: &mut impl Channel,
    ctx: &Context,
    key: &JudgeKey,
    policy: &dyn Policy,
    cfg: &JudgeConfig,
    report: &mut Report,
) -> Result<JudgeOutcome> {
    JudgeKeyMessage(*key.public()).send(ch, "sending the judge key")?;
    let AuthHeader { mode, client_id } = AuthHeader::recv(ch, "receiving the request", ())?;
    // Under mutual TLS the judge signs for the authenticated identity only; a policy
    // that names clients serves no one whose identity is only stated.
    check_identity(ch, &client_id)?;
    if policy.names_clients() && ch.peer_identity().is_none() {
        return Err(Deviation::UnauthenticatedClient { claimed: printable_bytes(&client_id, MAX_SHOWN) }.into());
    }
    let n = ctx.peer_size;
    let sk = key.secret().scalar();
    let (statuses, opened) = match mode {
        Mode::Full => {
            let items = report.phase("receive items", ch, |ch| recv_items(ch, n))?;
            let mut allowed: Vec<bool> = items.iter().map(|x| policy.allows(&client_id, x)).collect();
            if cfg.strict && allowed.contains(&false) {
                allowed.fill(false);
            }
            let sigs = report.phase("sign", ch, |_| {
                items
                    .par_iter()
                    .zip(&allowed)
                    .map(|(x, &ok)| ok.then(|| (h1(x, &client_id) * sk).to_affine()))
                    .collect::<Vec<_>>()
            });
            (sigs, 0)
        }
        Mode::Partial => {
            let commitments = report.phase("receive commitments", ch, |ch| {
                let raw = COMMITMENTS.recv_all(ch, n, "receiving commitments")?;
                raw.par_iter()
                    .enumerate()
                    .map(|(i, b)| g1_from_bytes(b).ok_or(Error::InvalidPoint { what: "AuthCommitments", index: i }))
                    .collect::<Result<Vec<_>>>()
            })?;
            let k = if n == 0 { 0 } else { ((cfg.fraction.clamp(0.0, 1.0) * n as f64).ceil() as usize).clamp(1, n) };
            let mut challenge: Vec<usize> = sample(&mut crate::crypto::rng::csprng(), n, k).into_vec();
            challenge.sort_unstable();
            let opening = report.phase("challenge and verify", ch, |ch| {
                let challenge = Challenge(challenge.clone());
                challenge.send(ch, "sending the challenge")?;
                Opening::recv(ch, "receiving the opening", &challenge.0)
            })?;
            let bases: Vec<G1Affine> = opening.items.par_iter().map(|(_, x)| h1(x, &client_id).to_affine()).collect();
            let opened: Vec<G1Affine> = challenge.iter().map(|&i| commitments[i]).collect();
            if !eea::verify(&bases, &opened, &opening.proof) {
                return Err(Deviation::Unverified { what: "the exponent-equality proof of the opening" }.into());
            }
            // The judge cannot see unopened items, so one refused opening refuses all.
            let all_ok = opening.items.iter().all(|(_, x)| policy.allows(&client_id, x));
            let sigs = report.phase("sign", ch, |_| {
                commitments.par_iter().map(|c| all_ok.then(|| (h2(c) * sk).to_affine())).collect::<Vec<_>>()
            });
            (sigs, k)
        }
    };
    report.phase("send signatures", ch, |ch| SIGNATURES.send(ch, &statuses, "sending signatures", write_signature))?;
    let signed = statuses.iter().filter(|s| s.is_some()).count();
    Ok(JudgeOutcome {
        client_id: printable_bytes(&client_id, MAX_SHOWN),
        mode,
        signed,
        refused: statuses.len() - signed,
        opened,
    })
}

fn recv_items(ch: &mut impl Channel, n: usize) -> Result<Vec<Vec<u8>>> {
    let mut items = Vec::with_capacity(n.min(1 << 16));
    ITEMS.recv(ch, n, "receiving items", |r| {
        items.push(r.bytes("AuthItems.item", MAX_ITEM)?.to_vec());
        Ok(())
    })?;
    Ok(items)
}

fn recv_signatures(ch: &mut impl Channel, n: usize) -> Result<Vec<Option<G1Affine>>> {
    let mut out = Vec::with_capacity(n.min(1 << 16));
    SIGNATURES.recv(ch, n, "receiving signatures", |r| {
        out.push(read_signature(r, out.len())?);
        Ok(())
    })?;
    Ok(out)
}

/// Checks `e(σ_i, g2) = e(m_i, pk)` for all signed `i` at once, with random weights:
/// `e(Σ w_i σ_i, g2) = e(Σ w_i m_i, pk)`.
fn batch_verify(pk: &G2Affine, pairs: &[(G1Affine, G1Affine)]) -> bool {
    if pairs.is_empty() {
        return true;
    }
    let (s, m) = pairs
        .par_iter()
        .map(|(sig, msg)| {
            let w = Secret::random().scalar();
            (G1Projective::from(sig) * w, G1Projective::from(msg) * w)
        })
        .reduce(
            || (<G1Projective as group::Group>::identity(), <G1Projective as group::Group>::identity()),
            |a, b| (a.0 + b.0, a.1 + b.1),
        );
    let neg_s = (-s).to_affine();
    let m = m.to_affine();
    let (g2, pk) = (G2Prepared::from(g2_generator()), G2Prepared::from(*pk));
    bool::from(group::Group::is_identity(&Bls12::multi_miller_loop(&[(&neg_s, &g2), (&m, &pk)]).final_exponentiation()))
}

/// The client's side of one authorisation of distinct `items` under `client_id`.
/// Returns the credentials and the indices of refused items.
pub fn authorize<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    items: &[I],
    client_id: &[u8],
    mode: Mode,
    report: &mut Report,
) -> Result<(Credentials, Vec<usize>)> {
    if client_id.len() > MAX_CLIENT_ID {
        return Err(Error::params("client_id", format!("the client identity is longer than {MAX_CLIENT_ID} bytes")));
    }
    let JudgeKeyMessage(pk) = JudgeKeyMessage::recv(ch, "receiving the judge key", ())?;
    AuthHeader { mode, client_id: client_id.to_vec() }.send(ch, "sending the request")?;
    let n = items.len();
    let (sigs, messages, r_secret) = match mode {
        Mode::Full => {
            report.phase("send items", ch, |ch| {
                ITEMS.send(ch, items, "sending items", |w, x| {
                    w.bytes(x.as_ref());
                })
            })?;
            let sigs = report.phase("receive signatures", ch, |ch| recv_signatures(ch, n))?;
            let messages: Vec<G1Affine> = items.par_iter().map(|x| h1(x.as_ref(), client_id).to_affine()).collect();
            (sigs, messages, None)
        }
        Mode::Partial => {
            let r = Secret::random();
            let bases: Vec<G1Affine> = items.par_iter().map(|x| h1(x.as_ref(), client_id).to_affine()).collect();
            let commitments: Vec<G1Affine> =
                bases.par_iter().map(|h| (G1Projective::from(h) * r.scalar()).to_affine()).collect();
            report.phase("commit", ch, |ch| {
                let enc: Vec<[u8; G1_BYTES]> = commitments.iter().map(|c| c.to_compressed()).collect();
                COMMITMENTS.send(ch, &enc, "sending commitments")
            })?;
            report.phase("open", ch, |ch| {
                let Challenge(idx) = Challenge::recv(ch, "receiving the challenge", n)?;
                let ob: Vec<G1Affine> = idx.iter().map(|&i| bases[i]).collect();
                let oc: Vec<G1Affine> = idx.iter().map(|&i| commitments[i]).collect();
                let proof = eea::prove(&r, &ob, &oc);
                let items = idx.iter().map(|&i| (i, items[i].as_ref().to_vec())).collect();
                Opening { items, proof }.send(ch, "sending the opening")
            })?;
            let sigs = report.phase("receive signatures", ch, |ch| recv_signatures(ch, n))?;
            let messages: Vec<G1Affine> = commitments.par_iter().map(|c| h2(c).to_affine()).collect();
            (sigs, messages, Some(r))
        }
    };
    let signed: Vec<(G1Affine, G1Affine)> =
        sigs.iter().zip(&messages).filter_map(|(s, m)| s.map(|s| (s, *m))).collect();
    if !report.phase("verify signatures", ch, |_| batch_verify(&pk, &signed)) {
        return Err(Deviation::Unverified { what: "the judge's signatures under its public key" }.into());
    }
    let mut entries = Vec::new();
    let mut refused = Vec::new();
    for (i, s) in sigs.iter().enumerate() {
        match s {
            Some(s) => entries.push((items[i].as_ref().to_vec(), *s)),
            None => refused.push(i),
        }
    }
    Ok((Credentials { mode, judge_pk: pk, client_id: client_id.to_vec(), r: r_secret, entries }, refused))
}
