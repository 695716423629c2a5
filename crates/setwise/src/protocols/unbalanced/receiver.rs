//! The unbalanced-PSI receiver: a small set queried against the sender's database.

use super::params::UnbalancedParams;
use super::{LABEL_NONCE, LabelLayout, MAX_LABEL_BYTES, felts_to_record, open_label};
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
    let p = UnbalancedParams::from_json(json)
        .map_err(|e| Error::PeerMisbehaved(format!("the sender's parameters are unusable: {e}")))?;
    let record_bytes = r.u32("UnbalancedParams.label_record_bytes")? as usize;
    let ncols = r.count("UnbalancedParams.label_columns", 256)?;
    let columns = (0..ncols)
        .map(|_| r.str("UnbalancedParams.label_column", 4096).map(str::to_string))
        .collect::<Result<Vec<_>, _>>()?;
    r.finish("UnbalancedParams")?;
    let max_record = LABEL_NONCE + 2 + MAX_LABEL_BYTES;
    let layout = match record_bytes {
        0 => None,
        b if (LABEL_NONCE + 2..=max_record).contains(&b) => Some(LabelLayout::new(&p, columns, b - LABEL_NONCE - 2)),
        b => {
            let what = "UnbalancedParams.label_record_bytes";
            return Err(WireError::Count { what, got: b as u64, bound: max_record as u64 }.into());
        }
    };
    let parts = layout.as_ref().map_or(0, |l| l.parts);
    if let Some(l) = &layout {
        let desc =
            format!("{} bytes in {} parts, columns {}", l.record_bytes - LABEL_NONCE - 2, l.parts, l.columns.join(","));
        report.detail("labels", desc);
    }
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
        let mut labels: Vec<Option<Vec<u8>>> = vec![None; items.len()];
        let mut remaining = counts.clone();
        let trim = ctx.result_trim();
        let (fb, record_bytes) = (p.felt_bits(), layout.as_ref().map_or(0, |l| l.record_bytes));
        for _ in 0..total {
            // One bundle: the matching result (part 0), then `parts` label results.
            let mut bundle_index = None;
            let mut hits: Vec<(usize, u32)> = Vec::new();
            let mut label_felts: Vec<Vec<u64>> = Vec::new();
            for part in 0..=parts {
                let body = recv_message(ch, TAG_RESULT, "Result", "receiving results")?;
                let mut r = Reader::new(&body);
                let bi = r.u32("Result.bundle_index")? as usize;
                let got_part = r.u16("Result.part")? as usize;
                let first = part == 0;
                if bi >= n || (first && remaining[bi] == 0) || (!first && bundle_index != Some(bi)) || got_part != part
                {
                    return Err(WireError::Invalid {
                        what: "Result",
                        why: "bundle index or part out of the announced order",
                    }
                    .into());
                }
                if first {
                    remaining[bi] -= 1;
                    bundle_index = Some(bi);
                }
                // Label parts are decrypted only for bundles where one of our items matched.
                if !first && hits.is_empty() {
                    continue;
                }
                let ct = ctx.trimmed_from_wire(r.take(r.remaining(), "Result.ciphertext")?, trim, "Result")?;
                let slots = sk.decrypt(&ct)?;
                if first {
                    for lb in 0..bpb {
                        if let Some(item) = table.bins[bi * bpb + lb]
                            && slots[lb * k..(lb + 1) * k].iter().all(|&v| v == 0)
                        {
                            matched[item as usize] = true;
                            hits.push((lb, item));
                        }
                    }
                    label_felts = vec![Vec::with_capacity(parts * k); hits.len()];
                } else {
                    for (h, &(lb, _)) in hits.iter().enumerate() {
                        label_felts[h].extend_from_slice(&slots[lb * k..(lb + 1) * k]);
                    }
                }
            }
            if parts > 0 {
                for (h, &(_, item)) in hits.iter().enumerate() {
                    let record = felts_to_record(&label_felts[h], record_bytes, fb);
                    labels[item as usize] = open_label(&outputs[item as usize], &record);
                }
            }
        }
        let outcome = if let Some(l) = &layout {
            let rows = matched
                .iter()
                .enumerate()
                .filter(|(_, m)| **m)
                .map(|(i, _)| (i, labels[i].clone().unwrap_or_default()))
                .collect();
            Outcome::Labelled { columns: l.columns.clone(), rows }
        } else {
            Outcome::Intersection(matched.iter().enumerate().filter(|(_, m)| **m).map(|(i, _)| i).collect())
        };
        Ok::<_, Error>((outcome, counts.iter().copied().max().unwrap_or(0)))
    })?;
    report.detail("false_match_log2", format!("{:.1}", p.false_match_log2(items.len(), worst_bundles)));
    Ok(outcome)
}
