//! The unbalanced-PSI receiver: a small set queried against the sender's database.

use super::params::UnbalancedParams;
use super::{
    MAX_BUNDLES_PER_INDEX, TAG_OPRF_REQUEST, TAG_OPRF_RESPONSE, TAG_PARAMS, TAG_RESULT, TAG_RESULT_HEADER, TAGS, locate,
};
use crate::error::{Error, Result};
use crate::hash::dst;
use crate::hashing::cuckoo::CuckooTable;
use crate::he::{HeContext, SecretKey};
use crate::net::Channel;
use crate::oprf;
use crate::poly::pow_mod;
use crate::protocols::Outcome;
use crate::protocols::chunks::{recv_all, send_records};
use crate::protocols::he_query::send_query;
use crate::session::{Report, Session, recv_message};
use crate::wire::{Reader, WireError};

/// Longest parameter JSON accepted from the sender.
const MAX_PARAMS_JSON: usize = 1 << 16;

/// Queries the sender with distinct `items`; returns the indices of the matching ones.
/// With `expect_fingerprint`, refuses parameters with another fingerprint.
pub fn receiver<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    session: &Session,
    items: &[I],
    expect_fingerprint: Option<&str>,
    report: &mut Report,
) -> Result<Outcome> {
    let body = recv_message(ch, TAG_PARAMS, "UnbalancedParams", "receiving parameters")?;
    let mut r = Reader::new(&body);
    let json = r.str("UnbalancedParams.json", MAX_PARAMS_JSON)?;
    r.finish("UnbalancedParams")?;
    let p = UnbalancedParams::from_json(json)
        .map_err(|e| Error::PeerMisbehaved(format!("the sender's parameters are unusable: {e}")))?;
    if let Some(fp) = expect_fingerprint
        && fp != p.fingerprint()
    {
        return Err(Error::Mismatch { field: "parameter fingerprint", ours: fp.to_string(), theirs: p.fingerprint() });
    }
    report.detail("parameters", p.fingerprint());
    if items.len() > p.receiver_max() {
        return Err(Error::Params(format!(
            "{} items; the sender's parameters allow at most {} per query",
            items.len(),
            p.receiver_max()
        )));
    }
    let outputs = report.phase("OPRF", ch, |ch| {
        let (blinding, blinded) = oprf::blind(items, dst::UNBALANCED_OPRF);
        send_records(ch, TAG_OPRF_REQUEST, &blinded, "sending the OPRF request")?;
        let evaluated = recv_all(ch, TAG_OPRF_RESPONSE, "OprfResponse", items.len(), "receiving the OPRF response")?;
        oprf::finalize(blinding, items, &evaluated, dst::UNBALANCED_OPRF_OUT)
            .map_err(|index| Error::InvalidPoint { what: "OprfResponse", index })
    })?;
    if items.is_empty() {
        return Ok(Outcome::Intersection(Vec::new()));
    }
    let (k, bpb, t) = (p.item_params.felts_per_item, p.bins_per_bundle(), p.seal_params.plain_modulus);
    let (mut candidates, mut felts) = (Vec::with_capacity(items.len()), Vec::with_capacity(items.len()));
    for o in &outputs {
        let (mut b, mut f) = (Vec::new(), Vec::new());
        locate(&p, o, &mut b, &mut f);
        candidates.push(b);
        felts.push(f);
    }
    let table = CuckooTable::build(&candidates, p.table_params.table_size).map_err(|e| Error::Params(e.to_string()))?;
    let ctx = HeContext::new(&p.he())?;
    let mut sk = SecretKey::generate(&ctx);
    let plan = p.plan().map_err(Error::Params)?;
    report.phase("encrypt and send query", ch, |ch| {
        let vectors = (0..p.bundle_indices()).flat_map(|bi| {
            let mut slots = vec![0u64; ctx.slots()];
            for lb in 0..bpb {
                if let Some(item) = table.bins[bi * bpb + lb] {
                    slots[lb * k..(lb + 1) * k].copy_from_slice(&felts[item as usize]);
                }
            }
            plan.sources()
                .iter()
                .map(move |&e| slots.iter().map(|&v| pow_mod(v, e as u64, t)).collect::<Vec<u64>>())
                .collect::<Vec<_>>()
        });
        send_query(ch, &mut sk, TAGS, plan.products() > 0 || p.query_params.ps_low_degree > 0, vectors)
    })?;
    let (outcome, worst_bundles) = report.phase("decrypt results", ch, |ch| {
        let body = recv_message(ch, TAG_RESULT_HEADER, "ResultHeader", "receiving results")?;
        let mut r = Reader::new(&body);
        let n = r.u32("ResultHeader.indices")? as usize;
        if n != p.bundle_indices() {
            return Err(WireError::Count {
                what: "ResultHeader.indices",
                got: n as u64,
                bound: p.bundle_indices() as u64,
            }
            .into());
        }
        let counts: Vec<usize> =
            (0..n).map(|_| r.count("ResultHeader.bundles", MAX_BUNDLES_PER_INDEX)).collect::<Result<_, _>>()?;
        r.finish("ResultHeader")?;
        // Every sender item sits in at most hash_func_count bundles.
        let total: usize = counts.iter().sum();
        if total > session.sender_size().saturating_mul(p.table_params.hash_func_count).max(n) {
            return Err(Error::PeerMisbehaved(format!(
                "{total} result bundles announced for {} sender items",
                session.sender_size()
            )));
        }
        let mut matched = vec![false; items.len()];
        let mut remaining = counts.clone();
        for _ in 0..counts.iter().sum::<usize>() {
            let body = recv_message(ch, TAG_RESULT, "Result", "receiving results")?;
            let mut r = Reader::new(&body);
            let bi = r.u32("Result.bundle_index")? as usize;
            if bi >= n || remaining[bi] == 0 {
                return Err(WireError::Invalid {
                    what: "Result.bundle_index",
                    why: "more results for this bundle index than announced",
                }
                .into());
            }
            remaining[bi] -= 1;
            let ct =
                ctx.ciphertext_from_wire(r.take(r.remaining(), "Result.ciphertext")?, ctx.last_level(), "Result")?;
            let slots = sk.decrypt(&ct)?;
            for lb in 0..bpb {
                if let Some(item) = table.bins[bi * bpb + lb]
                    && slots[lb * k..(lb + 1) * k].iter().all(|&v| v == 0)
                {
                    matched[item as usize] = true;
                }
            }
        }
        let outcome = Outcome::Intersection(matched.iter().enumerate().filter(|(_, m)| **m).map(|(i, _)| i).collect());
        Ok::<_, Error>((outcome, counts.iter().copied().max().unwrap_or(0)))
    })?;
    report.detail("false_match_log2", format!("{:.1}", p.false_match_log2(items.len(), worst_bundles)));
    Ok(outcome)
}
