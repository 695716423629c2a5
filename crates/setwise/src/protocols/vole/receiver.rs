//! The VOLE-PSI receiver: silent VOLE, store, own tags, match.

use super::messages::TAGS;
use super::{Hashes, check_sizes, oprf};
use crate::error::Result;
use crate::hashing::join::TagJoin;
use crate::net::Channel;
use crate::protocols::{Context, Outcome, Report};
use crate::wire::tags::recv_tags;

/// Runs the receiver's side on its distinct `items`; returns the intersection (sorted
/// indices into `items`).
pub fn receiver<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    ctx: &Context,
    items: &[I],
    report: &mut Report,
) -> Result<Outcome> {
    check_sizes(ctx)?;
    if ctx.has_empty_side() {
        return Ok(Outcome::Intersection(Vec::new())); // the sender skips the run too
    }
    let hashes = Hashes::new(ctx);
    let phases = ["silent VOLE, store encoded alongside", "send the store"];
    let evaluated = oprf::evaluate(ch, ctx.id, &hashes, items, report, phases)?;
    let meter = report.meter(items.len());
    let own = report.phase("compute own tags", ch, |_| {
        let (tags, items) = evaluated.eval_ordered(&meter, |_, k, v| hashes.tag(k, v));
        TagJoin::new(tags, items, ctx.sender_size())
    });
    report.phase("match", ch, |ch| {
        let mut join = own;
        recv_tags(&TAGS, ch, hashes.len(), ctx.sender_size(), "receiving tags", |t| join.add(t))?;
        Ok(Outcome::Intersection(join.matches()))
    })
}
