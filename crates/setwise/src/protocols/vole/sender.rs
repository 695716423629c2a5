//! The VOLE-PSI sender: silent VOLE, the receiver's store, one tag per item.

use super::messages::{STORE, StoreSeed, TAGS};
use super::{Hashes, check_sizes, store_params};
use crate::crypto::rng::shuffle;
use crate::error::Result;
use crate::math::gf128::Gf128;
use crate::net::Channel;
use crate::okvs::Okvs;
use crate::protocols::{Context, Report};
use crate::vole::silent_send;
use crate::wire::msg::Message;
use crate::wire::tags::send_tags;
use rayon::prelude::*;

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
    let params = store_params(ctx.receiver_size());
    let (vole, hashed) = std::thread::scope(|s| {
        let hashed = s.spawn(|| hashes.items(items));
        let vole =
            report.phase("silent VOLE, items hashed alongside", ch, |ch| silent_send(ch, ctx.id, params.columns));
        (vole, hashed.join().expect("hashing panicked"))
    });
    let vole = vole?;
    let delta = vole.delta;
    let store = report.phase("receive the store", ch, |ch| {
        let StoreSeed(seed) = StoreSeed::recv(ch, "receiving the store", ())?;
        // K = B + A·Δ, column by column as the chunks come.
        let mut k = vole.b;
        STORE.recv(ch, params.columns, "receiving the store", |at, chunk| {
            k[at..at + chunk.len()].par_iter_mut().zip(chunk).for_each(|(k, a)| *k += Gf128::from_bytes(*a) * delta);
            Ok(())
        })?;
        Okvs::from_parts(seed, params, k)
    })?;
    let mut tags: Vec<u128> = report.phase("compute tags", ch, |_| {
        store.decode_with(&hashed, |&(k, _)| k, |_, &(k, h), d| hashes.tag(k, d + h * delta))
    });
    report.phase("send tags", ch, |ch| {
        shuffle(&mut tags);
        send_tags(&TAGS, ch, hashes.len(), &tags, "sending tags")
    })
}
