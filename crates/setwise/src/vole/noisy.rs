//! A short VOLE from 128 base OTs (Gilboa's product; the "noisy VOLE" of silent VOLE):
//! the sender holds Δ, the receiver y_0 … y_{t−1}; the receiver ends with z_j and the
//! sender with z'_j = z_j + y_j·Δ. Semi-honest.
//!
//! With e_k = the element whose representation is bit k, Δ = Σ_k Δ_k·e_k (addition is
//! XOR of representations), so y·Δ = Σ_k Δ_k·(y·e_k). For each bit k the sender, as OT
//! receiver with choice Δ_k, gets one of the receiver's two seeds (q0_k, q1_k); the
//! receiver sends `u_k[j] = G(q0_k)[j] + G(q1_k)[j] + y_j·e_k` and keeps
//! `z_j = Σ_k G(q0_k)[j]`; the sender sums `G(q_{Δ_k})[j] + Δ_k·u_k[j] = G(q0_k)[j] + Δ_k·y_j·e_k`
//! over k.
//! Cost: 128 base OTs and 128·t field elements from receiver to sender.

use super::messages::NOISY_CORRECTIONS;
use crate::crypto::dst::SessionId;
use crate::crypto::prg::Prg;
use crate::error::Result;
use crate::math::gf128::Gf128;
use crate::net::Channel;
use crate::ot::{base_receive, base_send};
use rayon::prelude::*;

/// Bits of Δ: one OT each.
const BITS: usize = 128;

/// The sender, holding `delta`: z'_j for `t` receiver values.
pub fn noisy_send(ch: &mut impl Channel, sid: SessionId, delta: Gf128, t: usize) -> Result<Vec<Gf128>> {
    let choices: Vec<bool> = (0..BITS).map(|k| (delta.0 >> k) & 1 == 1).collect();
    let seeds = base_receive(ch, sid, &choices)?;
    let u = NOISY_CORRECTIONS.recv_all(ch, BITS * t, "receiving the noisy VOLE")?;
    let rows: Vec<Vec<u128>> = (0..BITS)
        .into_par_iter()
        .map(|k| {
            let mut row = Prg::new(seeds[k]).blocks(0, t);
            if choices[k] {
                for (x, c) in row.iter_mut().zip(&u[k * t..(k + 1) * t]) {
                    *x ^= u128::from_le_bytes(*c);
                }
            }
            row
        })
        .collect();
    Ok((0..t).map(|j| Gf128(rows.iter().fold(0, |acc, r| acc ^ r[j]))).collect())
}

/// The receiver, holding `ys`: z_j for each.
pub fn noisy_receive(ch: &mut impl Channel, sid: SessionId, ys: &[Gf128]) -> Result<Vec<Gf128>> {
    let t = ys.len();
    let seeds = base_send(ch, sid, BITS)?;
    let (rows, corrections): (Vec<Vec<u128>>, Vec<Vec<[u8; 16]>>) = seeds
        .par_iter()
        .enumerate()
        .map(|(k, &[q0, q1])| {
            let (g0, g1) = (Prg::new(q0).blocks(0, t), Prg::new(q1).blocks(0, t));
            let e_k = Gf128(1 << k);
            let u = (0..t).map(|j| (g0[j] ^ g1[j] ^ (ys[j] * e_k).0).to_le_bytes()).collect();
            (g0, u)
        })
        .unzip();
    let corrections: Vec<[u8; 16]> = corrections.concat();
    NOISY_CORRECTIONS.send(ch, &corrections, "sending the noisy VOLE")?;
    Ok((0..t).map(|j| Gf128(rows.iter().fold(0, |acc, r| acc ^ r[j]))).collect())
}
