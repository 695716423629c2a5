//! The unbalanced-PSI sender: answers one receiver's query from a shared database.

use super::SenderDb;
use super::eval::{derive_powers, evaluate};
use super::messages::{self, OPRF_REQUEST, OPRF_RESPONSE, Params, ResultHeader, ResultPart};
use crate::error::{Error, Result};
use crate::he::{Evaluator, HeError, Powers};
use crate::net::Channel;
use crate::protocols::he_query::recv_query;
use crate::protocols::{Context, Report};
use crate::wire::msg::Message;
use rayon::prelude::*;

/// Bundles evaluated in parallel before their results are sent (`auto`'s cost model
/// counts the rounds this makes).
pub(super) const BATCH: usize = 16;

/// Answers one query. The sender learns nothing about the receiver's items.
pub fn sender(ch: &mut impl Channel, ctx: &Context, db: &SenderDb, report: &mut Report) -> Result<()> {
    let key = db.key()?;
    let p = db.params();
    report.detail("parameters", format!("{} ({})", p.fingerprint(), db.info().preset));
    Params { params: p.clone(), labels: db.label_layout().cloned() }.send(ch, "sending parameters")?;
    // A query larger than the database's parameters allow is the receiver's doing.
    ctx.check_peer_size("this database's parameters", p.receiver_max(), "query at most that many items at once")?;
    report.phase("OPRF", ch, |ch| {
        let blinded = OPRF_REQUEST.recv_all(ch, ctx.receiver_size(), "receiving the OPRF request")?;
        let evaluated =
            key.evaluate_blinded(&blinded).map_err(|index| Error::InvalidPoint { what: "OprfRequest", index })?;
        OPRF_RESPONSE.send(ch, &evaluated, "sending the OPRF response")
    })?;
    if ctx.receiver_size() == 0 {
        return Ok(());
    }
    let plan = p.plan()?;
    let he = db.context();
    let low = p.query_params.ps_low_degree;
    let level = db.eval_level();
    let (keys, query) = report.phase("receive query", ch, |ch| {
        recv_query::<{ messages::KEY }, { messages::QUERY }>(
            ch,
            he,
            &p.query_levels_at(&plan, level),
            p.bundle_indices() * plan.sources().len(),
        )
    })?;
    let ev = Evaluator::new(&keys);
    let powers: Vec<Powers> = report.phase("derive powers", ch, |_| {
        query
            .par_chunks(plan.sources().len())
            .map(|s| derive_powers(&ev, &plan, s.to_vec(), low, level))
            .collect::<Result<_, HeError>>()
    })?;
    report.phase("evaluate and send", ch, |ch| {
        let counts = db.bundle_counts();
        let trim = he.result_trim();
        ResultHeader(counts.clone()).send(ch, "sending the result header")?;
        let jobs: Vec<(usize, usize)> =
            counts.iter().enumerate().flat_map(|(bi, &c)| (0..c).map(move |b| (bi, b))).collect();
        for batch in jobs.chunks(BATCH) {
            // Per bundle: the matching polynomial (part 0), then each label part.
            let results = batch
                .par_iter()
                .map(|&(bi, b)| {
                    db.with_bundle_plaintexts(bi, b, |plaintexts| {
                        plaintexts
                            .chunks(p.table_params.max_items_per_bin + 1)
                            .map(|coeffs| {
                                let mut r = evaluate(&ev, he, &powers[bi], coeffs, low)?;
                                r.mod_switch_to_last()?;
                                r.to_trimmed_bytes(he, trim)
                            })
                            .collect::<Result<Vec<_>, HeError>>()
                            .map(|parts| (bi, parts))
                    })?
                    .map_err(Error::from)
                })
                .collect::<Result<Vec<_>>>()?;
            for (bundle_index, parts) in results {
                for (part, bytes) in parts.into_iter().enumerate() {
                    ResultPart { bundle_index, part, bytes }.send(ch, "sending results")?;
                }
            }
        }
        Ok(())
    })
}
