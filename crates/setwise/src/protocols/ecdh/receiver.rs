//! The DH-PSI receiver over a channel.

use super::messages::{DOUBLE_BLINDED, RECEIVER_BLINDED, SENDER_BLINDED};
use super::steps::ReceiverState;
use crate::error::Result;
use crate::net::Channel;
use crate::protocols::{Context, Operation, Outcome, Report};
use crate::wire::stream::CHUNK;

/// Runs the receiver's side on its distinct `items`; returns the intersection (indices
/// into `items`) or its size.
pub fn receiver<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    ctx: &Context,
    op: Operation,
    items: &[I],
    report: &mut Report,
) -> Result<Outcome> {
    let state = ReceiverState::new(ctx.id, op, items.len())?;
    report.phase("blind and send own items", ch, |ch| {
        items.chunks(CHUNK).enumerate().try_for_each(|(i, chunk)| {
            RECEIVER_BLINDED.send_chunk(ch, &state.blind(chunk), (i * CHUNK, items.len()), "sending blinded items")
        })
    })?;
    let mut matcher = state.matcher(ctx.sender_size());
    report.phase("re-blind sender items", ch, |ch| {
        SENDER_BLINDED
            .recv(ch, ctx.sender_size(), "receiving sender items", |at, chunk| matcher.add_sender(at, chunk))?;
        matcher.sender_done()
    })?;
    report.phase("match", ch, |ch| {
        DOUBLE_BLINDED.recv(ch, items.len(), "receiving re-blinded items", |at, chunk| {
            matcher.match_chunk(at, chunk);
            Ok(())
        })
    })?;
    Ok(matcher.outcome())
}
