//! The VOLE-PSI sender: silent VOLE, the receiver's store, one tag per item.

use super::messages::TAGS;
use super::{Hashes, check_sizes, oprf};
use crate::crypto::rng::shuffle;
use crate::error::Result;
use crate::net::Channel;
use crate::protocols::{Context, Report};
use crate::wire::tags::send_tags;

/// Runs the sender's side on its distinct `items`. The sender learns nothing.
pub fn sender<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    ctx: &Context,
    items: &[I],
    report: &mut Report,
) -> Result<()> {
    check_sizes(ctx)?;
    if ctx.has_empty_side() {
        return Ok(()); // the intersection is empty: nothing to send
    }
    let hashes = Hashes::new(ctx);
    let phases = ["silent VOLE, items hashed alongside", "receive the store"];
    let (key, hashed) = oprf::hold_key(ch, ctx.id, &hashes, ctx.receiver_size(), items, report, phases)?;
    let meter = report.meter(hashed.len());
    let mut tags: Vec<u128> =
        report.phase("compute tags", ch, |_| key.eval_with(&hashed, &meter, |_, k, v| hashes.tag(k, v)));
    report.phase("send tags", ch, |ch| {
        shuffle(&mut tags);
        send_tags(&TAGS, ch, hashes.len(), &tags, "sending tags")
    })
}
