//! Authorize: the judge signs a client's items (full) or commitments (partial).

use super::credentials::Credentials;
use super::eea::{self, PROOF_BYTES};
use super::{
    JudgeKey, MAX_CLIENT_ID, MAX_ITEM, Mode, Policy, TAG_AUTH_CHALLENGE, TAG_AUTH_COMMITMENTS, TAG_AUTH_HEADER,
    TAG_AUTH_ITEMS, TAG_AUTH_KEY, TAG_AUTH_OPENING, TAG_AUTH_SIGNATURES, h1, h2,
};
use crate::error::{Error, NetContext, Result};
use crate::net::Channel;
use crate::pairing::{
    Bls12, G1_BYTES, G1Affine, G1Projective, G2_BYTES, G2Affine, G2Prepared, Secret, g1_from_bytes, g2_from_bytes,
    g2_generator,
};
use crate::protocols::chunks::{recv_all, recv_counted, send_records};
use crate::session::{Report, Session, recv_message};
use crate::wire::{Reader, WireError, Writer};
use group::Curve;
use pairing_lib::{MillerLoopResult, MultiMillerLoop};
use rand::seq::index::sample;
use rayon::prelude::*;

/// Items per frame when the client sends items or the judge sends signatures.
const ITEMS_PER_FRAME: usize = 4096;

/// How the judge decides.
#[derive(Debug, Clone, Copy)]
pub struct JudgeConfig {
    /// Partial mode: the fraction p of commitments the judge opens (⌈p·n⌉ of them).
    pub fraction: f64,
    /// Full mode: sign nothing unless the policy allows every item (the paper's
    /// all-or-nothing answer); otherwise sign the allowed items and refuse the rest.
    pub strict: bool,
}

/// What the judge did in one session.
#[derive(Debug, Clone, serde::Serialize)]
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
    session: &Session,
    key: &JudgeKey,
    policy: &dyn Policy,
    cfg: &JudgeConfig,
    report: &mut Report,
) -> Result<JudgeOutcome> {
    let mut w = Writer::default();
    w.u8(TAG_AUTH_KEY).raw(&key.public().to_compressed());
    ch.send(&w.into_vec()).during("sending the judge key")?;
    let body = recv_message(ch, TAG_AUTH_HEADER, "AuthHeader", "receiving the request")?;
    let mut r = Reader::new(&body);
    let mode = Mode::from_code(r.u8("AuthHeader.mode")?)
        .ok_or(WireError::Invalid { what: "AuthHeader.mode", why: "not 1 or 2" })?;
    let client_id = r.bytes("AuthHeader.client_id", MAX_CLIENT_ID)?.to_vec();
    r.finish("AuthHeader")?;
    let n = session.peer_size;
    let sk = key.secret().scalar();
    let (statuses, opened) = match mode {
        Mode::Full => {
            let items = report.phase("receive items", ch, |ch| recv_items(ch, n))?;
            let mut allowed: Vec<bool> = items.iter().map(|x| policy.allows(x)).collect();
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
                let raw =
                    recv_all::<G1_BYTES>(ch, TAG_AUTH_COMMITMENTS, "AuthCommitments", n, "receiving commitments")?;
                raw.par_iter()
                    .enumerate()
                    .map(|(i, b)| g1_from_bytes(b).ok_or(Error::InvalidPoint { what: "AuthCommitments", index: i }))
                    .collect::<Result<Vec<_>>>()
            })?;
            let k = if n == 0 { 0 } else { ((cfg.fraction.clamp(0.0, 1.0) * n as f64).ceil() as usize).clamp(1, n) };
            let mut challenge: Vec<usize> = sample(&mut crate::rng::csprng(), n, k).into_vec();
            challenge.sort_unstable();
            let (revealed, proof) = report.phase("challenge and verify", ch, |ch| {
                let mut w = Writer::with_capacity(4 + 4 * k);
                w.u8(TAG_AUTH_CHALLENGE).u32(k as u32);
                challenge.iter().for_each(|&i| {
                    w.u32(i as u32);
                });
                ch.send(&w.into_vec()).during("sending the challenge")?;
                let body = recv_message(ch, TAG_AUTH_OPENING, "AuthOpening", "receiving the opening")?;
                let mut r = Reader::new(&body);
                let count = r.count("AuthOpening.count", k)?;
                if count != k {
                    return Err(Error::PeerMisbehaved(format!("{count} openings for {k} challenged commitments")));
                }
                let mut revealed = Vec::with_capacity(k);
                for &want in &challenge {
                    let idx = r.u32("AuthOpening.index")? as usize;
                    if idx != want {
                        return Err(Error::PeerMisbehaved(format!("opened commitment {idx} instead of {want}")));
                    }
                    revealed.push(r.bytes("AuthOpening.item", MAX_ITEM)?.to_vec());
                }
                let proof: [u8; PROOF_BYTES] = r.array("AuthOpening.proof")?;
                r.finish("AuthOpening")?;
                Ok((revealed, proof))
            })?;
            let bases: Vec<G1Affine> = revealed.par_iter().map(|x| h1(x, &client_id).to_affine()).collect();
            let opened: Vec<G1Affine> = challenge.iter().map(|&i| commitments[i]).collect();
            if !eea::verify(&bases, &opened, &proof) {
                return Err(Error::PeerMisbehaved(
                    "the exponent-equality proof does not verify: an opening does not match its commitment".into(),
                ));
            }
            // The judge cannot see unopened items, so one refused opening refuses all.
            let all_ok = revealed.iter().all(|x| policy.allows(x));
            let sigs = report.phase("sign", ch, |_| {
                commitments.par_iter().map(|c| all_ok.then(|| (h2(c) * sk).to_affine())).collect::<Vec<_>>()
            });
            (sigs, k)
        }
    };
    report.phase("send signatures", ch, |ch| send_signatures(ch, &statuses))?;
    let signed = statuses.iter().filter(|s| s.is_some()).count();
    Ok(JudgeOutcome {
        client_id: String::from_utf8_lossy(&client_id).into_owned(),
        mode,
        signed,
        refused: statuses.len() - signed,
        opened,
    })
}

fn recv_items(ch: &mut impl Channel, n: usize) -> Result<Vec<Vec<u8>>> {
    let mut items = Vec::with_capacity(n.min(1 << 16));
    recv_counted(ch, TAG_AUTH_ITEMS, "AuthItems", n, ITEMS_PER_FRAME, "receiving items", |r| {
        items.push(r.bytes("AuthItems.item", MAX_ITEM)?.to_vec());
        Ok(())
    })?;
    Ok(items)
}

fn send_signatures(ch: &mut impl Channel, sigs: &[Option<G1Affine>]) -> Result<()> {
    for chunk in sigs.chunks(ITEMS_PER_FRAME) {
        let mut w = Writer::with_capacity(5 + chunk.len() * (1 + G1_BYTES));
        w.u8(TAG_AUTH_SIGNATURES).u32(chunk.len() as u32);
        for s in chunk {
            match s {
                Some(p) => w.u8(1).raw(&p.to_compressed()),
                None => w.u8(0).raw(&[0u8; G1_BYTES]),
            };
        }
        ch.send(&w.into_vec()).during("sending signatures")?;
    }
    Ok(())
}

fn recv_signatures(ch: &mut impl Channel, n: usize) -> Result<Vec<Option<G1Affine>>> {
    let mut out = Vec::with_capacity(n.min(1 << 16));
    recv_counted(ch, TAG_AUTH_SIGNATURES, "AuthSignatures", n, ITEMS_PER_FRAME, "receiving signatures", |r| {
        let status = r.u8("AuthSignatures.status")?;
        let bytes: [u8; G1_BYTES] = r.array("AuthSignatures.signature")?;
        let sig = match status {
            0 => None,
            _ => Some(g1_from_bytes(&bytes).ok_or(Error::InvalidPoint { what: "AuthSignatures", index: out.len() })?),
        };
        out.push(sig);
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
        return Err(Error::Params(format!("the client identity is longer than {MAX_CLIENT_ID} bytes")));
    }
    let body = recv_message(ch, TAG_AUTH_KEY, "AuthKey", "receiving the judge key")?;
    let mut r = Reader::new(&body);
    let pk_bytes: [u8; G2_BYTES] = r.array("AuthKey.pk")?;
    r.finish("AuthKey")?;
    let pk = g2_from_bytes(&pk_bytes).ok_or(Error::InvalidPoint { what: "AuthKey", index: 0 })?;
    let mut w = Writer::default();
    w.u8(TAG_AUTH_HEADER).u8(mode.code()).bytes(client_id);
    ch.send(&w.into_vec()).during("sending the request")?;
    let n = items.len();
    let (sigs, messages, r_secret) = match mode {
        Mode::Full => {
            report.phase("send items", ch, |ch| {
                for chunk in items.chunks(ITEMS_PER_FRAME) {
                    let mut w = Writer::default();
                    w.u8(TAG_AUTH_ITEMS).u32(chunk.len() as u32);
                    chunk.iter().for_each(|x| {
                        w.bytes(x.as_ref());
                    });
                    ch.send(&w.into_vec()).during("sending items")?;
                }
                Ok::<_, Error>(())
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
                send_records(ch, TAG_AUTH_COMMITMENTS, &enc, "sending commitments")
            })?;
            report.phase("open", ch, |ch| {
                let body = recv_message(ch, TAG_AUTH_CHALLENGE, "AuthChallenge", "receiving the challenge")?;
                let mut rd = Reader::new(&body);
                let k = rd.count("AuthChallenge.count", n)?;
                let mut idx = Vec::with_capacity(k);
                for _ in 0..k {
                    let i = rd.u32("AuthChallenge.index")? as usize;
                    if i >= n || idx.last().is_some_and(|&l| l >= i) {
                        return Err(Error::PeerMisbehaved("challenge indices out of range or not increasing".into()));
                    }
                    idx.push(i);
                }
                rd.finish("AuthChallenge")?;
                let ob: Vec<G1Affine> = idx.iter().map(|&i| bases[i]).collect();
                let oc: Vec<G1Affine> = idx.iter().map(|&i| commitments[i]).collect();
                let proof = eea::prove(&r, &ob, &oc);
                let mut w = Writer::default();
                w.u8(TAG_AUTH_OPENING).u32(k as u32);
                for &i in &idx {
                    w.u32(i as u32).bytes(items[i].as_ref());
                }
                w.raw(&proof);
                ch.send(&w.into_vec()).during("sending the opening")
            })?;
            let sigs = report.phase("receive signatures", ch, |ch| recv_signatures(ch, n))?;
            let messages: Vec<G1Affine> = commitments.par_iter().map(|c| h2(c).to_affine()).collect();
            (sigs, messages, Some(r))
        }
    };
    let signed: Vec<(G1Affine, G1Affine)> =
        sigs.iter().zip(&messages).filter_map(|(s, m)| s.map(|s| (s, *m))).collect();
    if !report.phase("verify signatures", ch, |_| batch_verify(&pk, &signed)) {
        return Err(Error::PeerMisbehaved("the judge's signatures do not verify under its public key".into()));
    }
    let mut entries = Vec::new();
    let mut refused = Vec::new();
    for (i, s) in sigs.iter().enumerate() {
        match s {
            Some(s) => entries.push((items[i].as_ref().to_vec(), *s)),
            None => refused.push(i),
        }
    }
    report.result("signed", entries.len() as u64);
    report.result("refused", refused.len() as u64);
    Ok((Credentials { mode, judge_pk: pk, client_id: client_id.to_vec(), r: r_secret, entries }, refused))
}
