//! The DH-PSI sender over a channel.

use super::messages::{DOUBLE_BLINDED, RECEIVER_BLINDED, SENDER_BLINDED};
use super::steps::SenderState;
use crate::error::Result;
use crate::net::Channel;
use crate::protocols::{Context, Operation, Report};

/// Runs the sender's side on its distinct `items`. The sender learns nothing.
pub fn sender<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    ctx: &Context,
    op: Operation,
    items: &[I],
    report: &mut Report,
) -> Result<()> {
    let state = SenderState::new(ctx.id, op)?;
    let meter = report.meter(items.len());
    let own = report.phase("blind own items", ch, |_| state.blind_own_metered(items, &meter));
    let blinded = report.phase("receive receiver items", ch, |ch| {
        RECEIVER_BLINDED.recv_all(ch, ctx.receiver_size(), "receiving receiver items")
    })?;
    report.phase("re-blind and send", ch, |ch| {
        std::thread::scope(|s| {
            // Re-blinding the receiver's items overlaps sending our own.
            let doubled = s.spawn(|| state.reblind(&blinded));
            SENDER_BLINDED.send(ch, &own, "sending own items")?;
            let doubled = doubled.join().expect("re-blinding does not panic")?;
            DOUBLE_BLINDED.send(ch, &doubled, "sending re-blinded receiver items")
        })
    })
}
