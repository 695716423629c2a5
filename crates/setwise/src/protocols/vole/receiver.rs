//! The VOLE-PSI receiver: silent VOLE, store, own tags, match.

use super::mask::Committed;
use super::messages::TAGS;
use super::{Hashes, check_sizes, oprf};
use crate::error::Result;
use crate::hashing::join::TagJoin;
use crate::math::gf128::Gf128;
use crate::net::Channel;
use crate::protocols::{Context, Outcome, Report, Security};
use crate::wire::tags::recv_tags;

/// Runs the receiver's side on its distinct `items`, withstanding `security`; returns
/// the intersection (sorted indices into `items`).
pub fn receiver<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    ctx: &Context,
    security: Security,
    items: &[I],
    report: &mut Report,
) -> Result<Outcome> {
    check_sizes(ctx)?;
    if ctx.has_empty_side() {
        return Ok(Outcome::Intersection(Vec::new())); // the sender skips the run too
    }
    let hashes = Hashes::new(ctx, security);
    let committed = match security {
        Security::Malicious => Some(Committed::recv(ch)?),
        Security::SemiHonest => None,
    };
    let phases = ["silent VOLE, store encoded alongside", "send the store"];
    let evaluated = oprf::evaluate(ch, ctx.id, security, &hashes, items, report, phases)?;
    let w = match committed {
        Some(c) => c.exchange(ch, ctx.id)?,
        None => Gf128::ZERO,
    };
    let meter = report.meter(items.len());
    let own = report.phase("compute own tags", ch, |_| {
        let (tags, items) = evaluated.eval_ordered(&meter, |_, x, v| hashes.tag(x, v + w));
        TagJoin::new(tags, items, ctx.sender_size())
    });
    report.phase("match", ch, |ch| {
        let mut join = own;
        recv_tags(&TAGS, ch, hashes.len(), ctx.sender_size(), "receiving tags", |t| join.add(t))?;
        Ok(Outcome::Intersection(join.matches()))
    })
}
