//! The VOLE-PSI sender: silent VOLE, the receiver's store, one tag per item.

use super::mask::SenderShare;
use super::messages::TAGS;
use super::{Hashes, check_sizes, oprf};
use crate::crypto::rng::shuffle;
use crate::error::Result;
use crate::math::gf128::Gf128;
use crate::net::Channel;
use crate::protocols::{Context, Report, Security};
use crate::wire::tags::send_tags;

/// Runs the sender's side on its distinct `items`, withstanding `security`. The sender
/// learns nothing.
pub fn sender<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    ctx: &Context,
    security: Security,
    items: &[I],
    report: &mut Report,
) -> Result<()> {
    check_sizes(ctx)?;
    if ctx.has_empty_side() {
        return Ok(()); // the intersection is empty: nothing to send
    }
    let hashes = Hashes::new(ctx, security);
    let share = match security {
        Security::Malicious => Some(SenderShare::commit(ch, ctx.id)?),
        Security::SemiHonest => None,
    };
    let phases = ["silent VOLE, items hashed alongside", "receive the store"];
    let (key, hashed) = oprf::hold_key(ch, ctx.id, security, &hashes, ctx.receiver_size(), items, report, phases)?;
    let w = match share {
        Some(share) => share.open(ch)?,
        None => Gf128::ZERO,
    };
    let meter = report.meter(hashed.len());
    let mut tags: Vec<u128> =
        report.phase("compute tags", ch, |_| key.eval_with(&hashed, &meter, |_, x, v| hashes.tag(x, v + w)));
    report.phase("send tags", ch, |ch| {
        shuffle(&mut tags);
        send_tags(&TAGS, ch, hashes.len(), &tags, "sending tags")
    })
}
