//! The unbalanced-PSI receiver: a small set queried against the sender's database.

use super::labels::{LABEL_NONCE, felts_to_record, open_label};
use super::messages::{self, OPRF_REQUEST, OPRF_RESPONSE, Params, ResultHeader, ResultPart};
use super::{digest, locate};
use crate::crypto::dst;
use crate::crypto::oprf;
use crate::error::{Deviation, Error, Result};
use crate::hashing::cuckoo::CuckooTable;
use crate::he::{HeContext, SecretKey};
use crate::math::zp::Zp;
use crate::net::Channel;
use crate::protocols::he_query::send_query;
use crate::protocols::{Context, Outcome, Report};
use crate::wire::WireError;
use crate::wire::msg::Message;
use crate::wire::text::{MAX_SHOWN, printable};

/// Queries the sender with distinct `items`; returns the indices of the matching ones.
/// With `expect_fingerprint`, refuses parameters with another fingerprint.
pub fn receiver<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    ctx: &Context,
    items: &[I],
    expect_fingerprint: Option<&str>,
    report: &mut Report,
) -> Result<Outcome> {
    let Params { params: p, labels: layout } = Params::recv(ch, "receiving parameters", ())?;
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
        return Err(Error::params(
            "receiver_size",
            format!("{} items; the sender's parameters allow at most {} per query", items.len(), p.receiver_max()),
        ));
    }
    let outputs = report.phase("OPRF", ch, |ch| {
        let (blinding, blinded) = oprf::blind(items, dst::UNBALANCED_OPRF);
        OPRF_REQUEST.send(ch, &blinded, "sending the OPRF request")?;
        let evaluated = OPRF_RESPONSE.recv_all(ch, items.len(), "receiving the OPRF response")?;
        oprf::finalize(blinding, items, &evaluated, dst::UNBALANCED_OPRF_OUT)
            .map_err(|index| Error::InvalidPoint { what: "OprfResponse", index })
    })?;
    if items.is_empty() {
        return Ok(Outcome::Intersection(Vec::new()));
    }
    let (k, bpb) = (p.item_params.felts_per_item, p.bins_per_bundle());
    let zp = Zp::new(p.seal_params.plain_modulus);
    let (mut candidates, mut felts) = (Vec::with_capacity(items.len()), Vec::with_capacity(items.len()));
    for o in &outputs {
        let (mut b, mut f) = (Vec::new(), Vec::new());
        locate(&p, &digest(o), &mut b, &mut f);
        candidates.push(b);
        felts.push(f);
    }
    // With no more items than the parameters allow, a table that cannot be built is the
    // sender's parameters' doing (honest ones fail with negligible probability).
    let table = CuckooTable::build(&candidates, p.table_params.table_size)
        .map_err(|e| Deviation::UnfitParams { what: "parameters (cuckoo table size)", why: e.to_string() })?;
    // The parameters are the sender's: if its message decoded and validated but they
    // still cannot be used, that is its doing, not this side's.
    let unusable = |e: &dyn std::fmt::Display| Deviation::UnusableParams { why: printable(&e.to_string(), MAX_SHOWN) };
    let bfv = HeContext::new(&p.he()).map_err(|e| unusable(&e))?;
    let mut sk = SecretKey::generate(&bfv);
    let plan = p.plan().map_err(|e| unusable(&e))?;
    report.phase("encrypt and send query", ch, |ch| {
        let vectors = (0..p.bundle_indices()).flat_map(|bi| {
            let mut slots = vec![0u64; bfv.slots()];
            for lb in 0..bpb {
                if let Some(item) = table.bins[bi * bpb + lb] {
                    slots[lb * k..(lb + 1) * k].copy_from_slice(&felts[item as usize]);
                }
            }
            plan.sources()
                .iter()
                .map(move |&e| slots.iter().map(|&v| zp.pow(v, e as u64)).collect::<Vec<u64>>())
                .collect::<Vec<_>>()
        });
        send_query::<{ messages::KEY }, { messages::QUERY }>(ch, &mut sk, &p.query_levels_in(&plan), vectors)
    })?;
    let (outcome, worst_bundles) = report.phase("decrypt results", ch, |ch| {
        let n = p.bundle_indices();
        // Every sender item sits in at most hash_func_count bundles.
        let max_total = ctx.sender_size().saturating_mul(p.table_params.hash_func_count);
        let ResultHeader(counts) = ResultHeader::recv(ch, "receiving results", (n, max_total))?;
        let total: usize = counts.iter().sum();
        let mut matched = vec![false; items.len()];
        let mut labels: Vec<Option<Vec<u8>>> = vec![None; items.len()];
        let mut remaining = counts.clone();
        let trim = bfv.result_trim();
        let result_bytes = bfv.trimmed_bytes(trim);
        let (fb, record_bytes) = (p.felt_bits(), layout.as_ref().map_or(0, |l| l.record_bytes));
        for _ in 0..total {
            // One bundle: the matching result (part 0), then `parts` label results.
            let mut bundle_index = None;
            let mut hits: Vec<(usize, u32)> = Vec::new();
            let mut label_felts: Vec<Vec<u64>> = Vec::new();
            for part in 0..=parts {
                let result = ResultPart::recv(ch, "receiving results", (n, result_bytes))?;
                let bi = result.bundle_index;
                let first = part == 0;
                if (first && remaining[bi] == 0) || (!first && bundle_index != Some(bi)) || result.part != part {
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
                let ct = result.ciphertext(&bfv, trim)?;
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
