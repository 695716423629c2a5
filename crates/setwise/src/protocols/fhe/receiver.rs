//! The FHE-PSI receiver: holds the BFV secret key and learns the intersection.

use super::messages;
use super::{FheParams, item_felts, slot};
use crate::error::{Error, Result};
use crate::he::{HeContext, QueryLevels, SecretKey};
use crate::math::zp::Zp;
use crate::net::Channel;
use crate::protocols::Outcome;
use crate::protocols::he_query::send_query;
use crate::protocols::{Context, Report};
use crate::wire::msg::Message;

/// Runs the receiver's side on its distinct `items`; returns the indices of the items
/// in the intersection.
pub fn receiver<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    ctx: &Context,
    items: &[I],
    report: &mut Report,
) -> Result<Outcome> {
    let Some(p) = FheParams::choose(ctx.receiver_size(), ctx.sender_size()) else {
        return Ok(Outcome::Intersection(Vec::new()));
    };
    report.detail("fhe", p.describe());
    let (bfv, plan) = (HeContext::new(&p.he).map_err(he)?, p.plan());
    let t = bfv.plain_modulus();
    let zp = Zp::new(t);
    let mut sk = SecretKey::generate(&bfv);
    let felts = item_felts(ctx, items, p.felts, t);
    report.phase("encrypt and send query", ch, |ch| {
        let vectors = (0..p.receiver_cts).flat_map(|c| {
            let mut base = vec![0u64; bfv.slots()];
            let first = c * p.items_per_ct;
            let here = items.len().min(first + p.items_per_ct) - first;
            for r in 0..p.replicas {
                for i in 0..here {
                    for f in 0..p.felts {
                        base[slot(&p, r, i, f)] = felts[(first + i) * p.felts + f];
                    }
                }
            }
            plan.sources()
                .iter()
                .map(move |&e| base.iter().map(|&v| zp.pow(v, e as u64)).collect::<Vec<u64>>())
                .collect::<Vec<_>>()
        });
        send_query::<{ messages::KEY }, { messages::QUERY }>(
            ch,
            &mut sk,
            &QueryLevels::at_level_zero(plan.key_levels()),
            vectors,
        )
    })?;
    let chunks = ctx.sender_size().div_ceil(p.degree);
    report.phase("decrypt results", ch, |ch| {
        let mut matched = vec![false; items.len()];
        for c in 0..p.receiver_cts {
            let first = c * p.items_per_ct;
            let here = items.len().min(first + p.items_per_ct) - first;
            for g in 0..p.groups {
                let ct = messages::Result::recv(ch, "receiving results", (&bfv, bfv.last_level()))?.0;
                let slots = sk.decrypt(&ct).map_err(he)?;
                for r in (0..p.replicas).filter(|r| g * p.replicas + r < chunks) {
                    for (i, m) in matched[first..first + here].iter_mut().enumerate() {
                        *m |= (0..p.felts).all(|f| slots[slot(&p, r, i, f)] == 0);
                    }
                }
            }
        }
        Ok(Outcome::Intersection(matched.iter().enumerate().filter(|(_, m)| **m).map(|(i, _)| i).collect()))
    })
}

fn he(e: crate::he::HeError) -> Error {
    e.into()
}
