//! The unbalanced-PSI sender: answers one receiver's query from a shared database.

use super::eval::evaluate;
use super::{
    MAX_BUNDLES_PER_INDEX, SenderDb, TAG_OPRF_REQUEST, TAG_OPRF_RESPONSE, TAG_PARAMS, TAG_RESULT, TAG_RESULT_HEADER,
    TAGS,
};
use crate::error::{Error, NetContext, Result};
use crate::he::{Evaluator, HeError, Powers};
use crate::net::Channel;
use crate::protocols::chunks::{recv_all, send_records};
use crate::protocols::he_query::recv_query;
use crate::session::{Report, Session};
use crate::wire::Writer;
use rayon::prelude::*;

/// Results evaluated in parallel before they are sent.
const BATCH: usize = 16;

/// Answers one query. The sender learns nothing about the receiver's items.
pub fn sender(ch: &mut impl Channel, session: &Session, db: &SenderDb, report: &mut Report) -> Result<()> {
    let p = db.params();
    report.detail("parameters", format!("{} ({})", p.fingerprint(), db.info().preset));
    let mut w = Writer::default();
    w.u8(TAG_PARAMS).bytes(p.to_json().as_bytes());
    match db.label_layout() {
        None => w.u32(0).u32(0),
        Some(l) => {
            w.u32(l.record_bytes as u32).u32(l.columns.len() as u32);
            l.columns.iter().for_each(|c| {
                w.bytes(c.as_bytes());
            });
            &mut w
        }
    };
    ch.send(&w.into_vec()).during("sending parameters")?;
    let max = p.receiver_max();
    if session.receiver_size() > max {
        return Err(Error::Params(format!(
            "the receiver has {} items; this database's parameters allow at most {max} per query",
            session.receiver_size()
        )));
    }
    report.phase("OPRF", ch, |ch| {
        let blinded =
            recv_all(ch, TAG_OPRF_REQUEST, "OprfRequest", session.receiver_size(), "receiving the OPRF request")?;
        let evaluated =
            db.oprf().evaluate_blinded(&blinded).map_err(|index| Error::InvalidPoint { what: "OprfRequest", index })?;
        send_records(ch, TAG_OPRF_RESPONSE, &evaluated, "sending the OPRF response")
    })?;
    if session.receiver_size() == 0 {
        return Ok(());
    }
    let plan = p.plan().map_err(Error::Params)?;
    let ctx = db.context();
    let low = p.query_params.ps_low_degree;
    let (key, query) = report.phase("receive query", ch, |ch| {
        recv_query(ch, ctx, TAGS, plan.products() > 0 || low > 0, p.bundle_indices() * plan.sources().len())
    })?;
    let ev = Evaluator::new(key.as_ref());
    let powers: Vec<Powers> = report.phase("derive powers", ch, |_| {
        query.par_chunks(plan.sources().len()).map(|s| plan.evaluate(&ev, s.to_vec())).collect::<Result<_, HeError>>()
    })?;
    report.phase("evaluate and send", ch, |ch| {
        let counts = db.bundle_counts();
        let trim = ctx.result_trim();
        let mut w = Writer::default();
        w.u8(TAG_RESULT_HEADER).u32(counts.len() as u32);
        for &c in &counts {
            w.u32(c as u32);
        }
        ch.send(&w.into_vec()).during("sending the result header")?;
        debug_assert!(counts.iter().all(|&c| c <= MAX_BUNDLES_PER_INDEX));
        let jobs: Vec<(usize, usize)> =
            counts.iter().enumerate().flat_map(|(bi, &c)| (0..c).map(move |b| (bi, b))).collect();
        for batch in jobs.chunks(BATCH) {
            // Per bundle: the matching polynomial (part 0), then each label part.
            let results = batch
                .par_iter()
                .map(|&(bi, b)| {
                    let plaintexts = db.bundle_plaintexts(bi, b)?;
                    plaintexts
                        .chunks(p.table_params.max_items_per_bin + 1)
                        .map(|coeffs| {
                            let mut r = evaluate(&ev, &powers[bi], coeffs, low)?;
                            r.mod_switch_to_last()?;
                            r.to_trimmed_bytes(ctx, trim)
                        })
                        .collect::<Result<Vec<_>, HeError>>()
                        .map(|parts| (bi, parts))
                })
                .collect::<Result<Vec<_>, HeError>>()?;
            for (bi, parts) in results {
                for (part, bytes) in parts.iter().enumerate() {
                    let mut w = Writer::with_capacity(bytes.len() + 7);
                    w.u8(TAG_RESULT).u32(bi as u32).u16(part as u16).raw(bytes);
                    ch.send(&w.into_vec()).during("sending results")?;
                }
            }
        }
        Ok(())
    })
}
