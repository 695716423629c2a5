//! The FHE-PSI sender: evaluates its chunks' polynomials on the receiver's ciphertexts.

use super::messages;
use super::{FheParams, item_felts, slot};
use crate::crypto::rng::{csprng, shuffle};
use crate::error::{Error, Result};
use crate::he::{Ciphertext, Evaluator, HeContext, HeError, Powers, QueryLevels};
use crate::math::poly::from_roots;
use crate::math::zp::Zp;
use crate::net::Channel;
use crate::protocols::he_query::recv_query;
use crate::protocols::{Context, Report};
use crate::wire::msg::send_message;
use rand::RngExt;
use rayon::prelude::*;

/// Results computed in parallel before they are sent: bounds memory, overlaps the
/// receiver's decryption with our next batch.
const BATCH: usize = 32;

/// Runs the sender's side on its distinct `items`. The sender learns nothing.
pub fn sender<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    ctx: &Context,
    items: &[I],
    report: &mut Report,
) -> Result<()> {
    let Some(p) = FheParams::choose(ctx.receiver_size(), ctx.sender_size()) else {
        return Ok(());
    };
    report.detail("fhe", p.describe());
    let (bfv, plan) = (HeContext::new(&p.he).map_err(Error::from)?, p.plan());
    let t = bfv.plain_modulus();
    // Chunk polynomials, per chunk and felt: coefficients of ∏ (z − b_f) over the chunk.
    let polys = report.phase("interpolate chunks", ch, |_| {
        let mut felts = item_felts(ctx, items, p.felts, t);
        let mut order: Vec<usize> = (0..items.len()).collect();
        shuffle(&mut order);
        let mut shuffled = Vec::with_capacity(felts.len());
        order.iter().for_each(|&i| shuffled.extend_from_slice(&felts[i * p.felts..(i + 1) * p.felts]));
        felts = shuffled;
        felts
            .par_chunks(p.degree * p.felts)
            .map(|chunk| {
                (0..p.felts)
                    .map(|f| {
                        let roots: Vec<u64> = chunk.iter().skip(f).step_by(p.felts).copied().collect();
                        from_roots(Zp::new(t), &roots)
                    })
                    .collect::<Vec<_>>()
            })
            .collect::<Vec<_>>()
    });
    let (keys, query) = report.phase("receive query", ch, |ch| {
        recv_query::<{ messages::KEY }, { messages::QUERY }>(
            ch,
            &bfv,
            &QueryLevels::at_level_zero(plan.key_levels()),
            p.receiver_cts * plan.sources().len(),
        )
    })?;
    let ev = Evaluator::new(&keys);
    let powers: Vec<Powers> = report.phase("derive powers", ch, |_| {
        query
            .par_chunks(plan.sources().len())
            .map(|sources| plan.evaluate(&ev, sources.to_vec()))
            .collect::<Result<_, HeError>>()
    })?;
    report.phase("evaluate and send", ch, |ch| {
        let jobs: Vec<(usize, usize)> = (0..p.receiver_cts).flat_map(|c| (0..p.groups).map(move |g| (c, g))).collect();
        for batch in jobs.chunks(BATCH) {
            let results = batch
                .par_iter()
                .map(|&(c, g)| {
                    evaluate_group(&ev, &bfv, &p, &polys, g, &powers[c]).and_then(|mut r| {
                        r.mod_switch_to_last()?;
                        Ok(r.to_bytes())
                    })
                })
                .collect::<Result<Vec<_>, HeError>>()?;
            for r in results {
                send_message(ch, messages::RESULT, &r, "sending results")?;
            }
        }
        Ok(())
    })
}

/// `Σ_i (r ⊙ a_i) · c^i` for group `g`: in replica `k`'s slots, the polynomial of chunk
/// `g·replicas + k`; in slots without a chunk, the constant 1. `r` is fresh, uniformly
/// random and non-zero in every slot, so a non-root slot decrypts to a uniform non-zero
/// value. Public for the noise-budget test; result at level 0.
#[doc(hidden)]
pub fn evaluate_group(
    ev: &Evaluator<'_>,
    bfv: &HeContext,
    p: &FheParams,
    polys: &[Vec<Vec<u64>>],
    g: usize,
    powers: &Powers,
) -> Result<Ciphertext, HeError> {
    let (t, n, d) = (bfv.plain_modulus(), bfv.slots(), p.degree);
    let zp = Zp::new(t);
    let mut coeffs = vec![vec![0u64; n]; d + 1];
    coeffs[0].fill(1);
    for k in 0..p.replicas {
        let Some(chunk) = polys.get(g * p.replicas + k) else {
            break;
        };
        for i in 0..p.items_per_ct {
            for (f, poly) in chunk.iter().enumerate() {
                let s = slot(p, k, i, f);
                for (m, c) in coeffs.iter_mut().enumerate() {
                    c[s] = poly.get(m).copied().unwrap_or(0);
                }
            }
        }
    }
    let mut rng = csprng();
    let r: zeroize::Zeroizing<Vec<u64>> = zeroize::Zeroizing::new((0..n).map(|_| rng.random_range(1..t)).collect());
    // The mask hides the non-matches: zeroized, as the rows are.
    let masked: zeroize::Zeroizing<Vec<u64>> = zeroize::Zeroizing::new(
        coeffs.iter().flat_map(|c| c.iter().zip(r.iter()).map(|(&a, &r)| zp.mul(a, r))).collect(),
    );
    let pts = bfv.encode_rows(&masked, 0)?;
    let cts: Vec<&Ciphertext> = (1..=d as u32)
        .map(|e| powers.get(e).ok_or_else(|| HeError::Op(format!("power {e} missing"))))
        .collect::<Result<_, _>>()?;
    ev.dot_rows(bfv, &cts, pts.all().slice(1..d + 1), Some(pts.all().slice(0..1)))
}
