//! The VOLE-PSI receiver: silent VOLE, store, own tags, match.

use super::messages::{STORE, StoreSeed, TAGS};
use super::{Hashes, check_sizes, store_params};
use crate::error::{Error, Result};
use crate::hashing::join::TagJoin;
use crate::net::Channel;
use crate::okvs::Okvs;
use crate::protocols::{Context, Outcome, Report};
use crate::vole::silent_receive;
use crate::wire::msg::Message;
use crate::wire::stream::CHUNK;
use crate::wire::tags::recv_tags;
use rayon::prelude::*;

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
    let params = store_params(items.len());
    // The store does not depend on the VOLE: hash and encode on a second thread while
    // the VOLE runs (its steps wait for the peer part of the time).
    let (vole, prepared) = std::thread::scope(|s| {
        let prepare = s.spawn(|| {
            let t = std::time::Instant::now();
            let hashed = hashes.items(items);
            let store = Okvs::encode(params, &hashed);
            (hashed, store, t.elapsed())
        });
        let vole =
            report.phase("silent VOLE, store encoded alongside", ch, |ch| silent_receive(ch, ctx.id, params.columns));
        (vole, prepare.join().expect("the store encoding panicked"))
    });
    let (vole, (hashed, store, took)) = (vole?, prepared);
    report.detail("hash items and encode the store", format!("{:.3} s", took.as_secs_f64()));
    let store = store.map_err(|_| {
        Error::Params(
            "the store could not be encoded with 8 seeds (probability ≤ 2^-320); are the items distinct?".into(),
        )
    })?;
    report.phase("send the store", ch, |ch| {
        StoreSeed(*store.seed()).send(ch, "sending the store")?;
        // Chunk by chunk: no second store-sized buffer.
        for (p, a) in store.columns().chunks(CHUNK).zip(vole.a.chunks(CHUNK)) {
            let masked: Vec<[u8; 16]> = p.par_iter().zip(a).map(|(p, a)| (*p + *a).to_bytes()).collect();
            STORE.send_chunk(ch, &masked, "sending the store")?;
        }
        Ok::<_, Error>(())
    })?;
    let own = report.phase("compute own tags", ch, |_| {
        let c = Okvs::from_parts(*store.seed(), params, vole.c)?;
        let tags = c.decode_with(&hashed, |&(k, _)| k, |i, &(k, _), v| (hashes.tag(k, v), i as u32));
        Ok::<_, Error>(TagJoin::new(tags, ctx.sender_size()))
    })?;
    report.phase("match", ch, |ch| {
        let mut join = own;
        recv_tags(&TAGS, ch, hashes.len(), ctx.sender_size(), "receiving tags", |t| join.add(t))?;
        Ok(Outcome::Intersection(join.matches()))
    })
}
