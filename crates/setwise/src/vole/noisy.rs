//! A short VOLE from 128 base OTs (Gilboa's product; the "noisy VOLE" of silent VOLE):
//! the sender holds Δ, the receiver y_0 … y_{t−1}; the receiver ends with z_j and the
//! sender with z'_j = z_j + y_j·Δ.
//!
//! With e_k = the element whose representation is bit k, Δ = Σ_k Δ_k·e_k (addition is
//! XOR of representations), so y·Δ = Σ_k Δ_k·(y·e_k). For each bit k the sender, as OT
//! receiver with choice Δ_k, gets one of the receiver's two seeds (q0_k, q1_k); the
//! receiver sends `u_k[j] = G(q0_k)[j] + G(q1_k)[j] + y_j·e_k` and keeps
//! `z_j = Σ_k G(q0_k)[j]`; the sender sums `G(q_{Δ_k})[j] + Δ_k·u_k[j] = G(q0_k)[j] + Δ_k·y_j·e_k`
//! over k.
//! Cost: 128 base OTs and 128·t field elements from receiver to sender.
//!
//! Malicious (`Security::Malicious`): base OTs of Masny–Rindal, and a check the sender
//! verifies, since a receiver that puts another y into the corrections of some bit k
//! makes the sender's outputs depend on Δ_k alone and could test guesses of it through
//! them later. The receiver adds one random entry (y_t, z_t); with challenges χ_j from
//! the corrections (Fiat–Shamir) it sends ŷ = Σ χ_j·y_j and ẑ = Σ χ_j·z_j over all t + 1
//! entries (the extra one masks the rest), and the sender checks Σ χ_j·z'_j = ẑ + ŷ·Δ.
//! A receiver that cheats on the bits k ∈ S passes only if Σ_{k∈S} Δ_k·e_k·(a_k − ŷ) = c
//! for the combinations a_k of its per-bit values, a condition on the bits of S that
//! holds with probability 2^-rank: it learns ℓ bits of Δ with probability 2^-ℓ, the
//! leakage KOS's check has (CRYPTO 2015) and silent VOLE tolerates (Ferret, CCS 2020).

use super::messages::{NOISY_CORRECTIONS, NoisyCheck};
use crate::crypto::dst::{self, Domain, SessionId};
use crate::crypto::prg::Prg;
use crate::crypto::rng::fill_os;
use crate::crypto::security::Security;
use crate::error::{Deviation, Result};
use crate::math::gf128::Gf128;
use crate::net::Channel;
use crate::ot::{base_receive, base_send};
use crate::wire::msg::Message;
use rayon::prelude::*;
use zeroize::Zeroizing;

/// Bits of Δ: one OT each.
const BITS: usize = 128;

/// Entries the receiver adds at `security`: the check's mask.
fn extra(security: Security) -> usize {
    usize::from(security == Security::Malicious)
}

/// The challenges of the check, from the corrections.
fn challenge(sid: SessionId, corrections: &[[u8; 16]]) -> Prg {
    let mut h = Domain::new(dst::VOLE_NOISY_CHALLENGE, sid).hasher();
    h.update(corrections.as_flattened());
    Prg::from_transcript(&h)
}

/// The sender, holding `delta`: z'_j for `t` receiver values, the peer held to them at
/// `security`.
pub fn noisy_send(
    ch: &mut impl Channel,
    sid: SessionId,
    delta: Gf128,
    t: usize,
    security: Security,
) -> Result<Zeroizing<Vec<Gf128>>> {
    let all = t + extra(security);
    let choices = Zeroizing::new((0..BITS).map(|k| (delta.0 >> k) & 1 == 1).collect::<Vec<bool>>());
    let seeds = base_receive(ch, sid, &choices, security)?;
    let u = NOISY_CORRECTIONS.recv_all(ch, BITS * all, "receiving the noisy VOLE")?;
    let rows: Vec<Zeroizing<Vec<u128>>> = (0..BITS)
        .into_par_iter()
        .map(|k| {
            let mut row = Zeroizing::new(Prg::new(seeds[k]).blocks(0, all));
            // Row k takes u_k where Δ_k = 1, without a branch on Δ.
            let mask = 0u128.wrapping_sub((delta.0 >> k) & 1);
            for (x, c) in row.iter_mut().zip(&u[k * all..(k + 1) * all]) {
                *x ^= u128::from_le_bytes(*c) & mask;
            }
            row
        })
        .collect();
    let mut out = Zeroizing::new((0..all).map(|j| Gf128(rows.iter().fold(0, |acc, r| acc ^ r[j]))).collect::<Vec<_>>());
    if security == Security::Malicious {
        let [y, z] = Gf128::pair_from_bytes(NoisyCheck::recv(ch, "receiving the noisy VOLE check", ())?.0);
        let ours = challenge(sid, &u).combine(all, |j| out[j]);
        if ours != z + y * delta {
            return Err(Deviation::FailedCheck {
                what: "the noisy VOLE",
                meaning: "the receiver used different values for different bits of Δ, as when probing Δ",
            }
            .into());
        }
        out.truncate(t);
    }
    Ok(out)
}

/// One OT seed's pad row, wiped when dropped.
type SecretRow = Zeroizing<Vec<u128>>;

/// The receiver, holding `ys`: z_j for each, held to them at `security`.
pub fn noisy_receive(
    ch: &mut impl Channel,
    sid: SessionId,
    ys: &[Gf128],
    security: Security,
) -> Result<Zeroizing<Vec<Gf128>>> {
    let mut ys = Zeroizing::new(ys.to_vec());
    if security == Security::Malicious {
        let mut mask = [0u8; 16];
        fill_os(&mut mask);
        ys.push(Gf128::from_bytes(mask));
    }
    let all = ys.len();
    let seeds = base_send(ch, sid, BITS, security)?;
    let (rows, corrections): (Vec<SecretRow>, Vec<Vec<[u8; 16]>>) = seeds
        .par_iter()
        .enumerate()
        .map(|(k, &[q0, q1])| {
            let (g0, g1) = (Zeroizing::new(Prg::new(q0).blocks(0, all)), Zeroizing::new(Prg::new(q1).blocks(0, all)));
            let e_k = Gf128(1 << k);
            let u = (0..all).map(|j| (g0[j] ^ g1[j] ^ (ys[j] * e_k).0).to_le_bytes()).collect();
            (g0, u)
        })
        .unzip();
    let corrections: Vec<[u8; 16]> = corrections.concat();
    NOISY_CORRECTIONS.send(ch, &corrections, "sending the noisy VOLE")?;
    let mut zs = Zeroizing::new((0..all).map(|j| Gf128(rows.iter().fold(0, |acc, r| acc ^ r[j]))).collect::<Vec<_>>());
    if security == Security::Malicious {
        let chi = challenge(sid, &corrections);
        let (y, z) = (chi.combine(all, |j| ys[j]), chi.combine(all, |j| zs[j]));
        NoisyCheck(Gf128::pair_to_bytes([y, z])).send(ch, "sending the noisy VOLE check")?;
        zs.truncate(all - 1);
    }
    Ok(zs)
}
