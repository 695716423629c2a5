//! IKNP OT extension (Ishai–Kilian–Nissim–Petrank, CRYPTO 2003): κ = 128
//! base OTs with the roles reversed give any number of random OTs with chosen choice bits.
//!
//! The extension receiver (choices r) holds base-OT key pairs (k0_i, k1_i); the extension
//! sender holds k_{s_i} for random s. Row i of the matrices is G(k): AES-128 keyed by k in
//! counter mode. The receiver sends u_i = G(k0_i) ⊕ G(k1_i) ⊕ r; the sender forms
//! q_i = G(k_{s_i}) ⊕ s_i·u_i. Column j then satisfies q_j = t_j ⊕ r_j·s, and the outputs
//! are H(j, q_j), H(j, q_j ⊕ s) for the sender and H(j, t_j) for the receiver, with H the
//! tweakable correlation-robust hash π(π(x) ⊕ j) ⊕ π(x) of Guo–Katz–Wang–Yu (S&P 2020),
//! π fixed-key AES (key derived from the session). The matrix travels in chunks of 2^14
//! columns, so memory stays bounded.
//!
//! Malicious (`Security::Malicious`): the base OTs are Masny–Rindal's, and the receiver
//! proves it used one choice bit per column in every row (Keller, Orsini, Scholl,
//! "Actively Secure OT Extension with Optimal Overhead", CRYPTO 2015, Fig. 7): with
//! challenges χ_j ∈ GF(2^128) (here from the transcript, Fiat–Shamir), it sends
//! x = Σ χ_j·r_j and t = Σ χ_j·t_j, and the sender checks Σ χ_j·q_j = t + x·s. 256 extra
//! OTs with random choices hide the real ones in x. A cheating receiver passes only by
//! guessing bits of s, learning ℓ of them with probability 2^-ℓ, as KOS allows.

use super::base::{base_receive, base_send};
use super::messages::{CorrectionChunk, KosCheck};
use super::{Block, KAPPA};
use crate::crypto::dst::{self, Domain, SessionId};
use crate::crypto::prg::Prg;
use crate::crypto::rng::fill_os;
use crate::crypto::security::Security;
use crate::error::{Deviation, Result};
use crate::math::gf128::Gf128;
use crate::net::Channel;
use crate::wire::msg::Message;
use aes::Aes128;
use aes::cipher::{Array, BlockCipherEncrypt, KeyInit};
use rayon::prelude::*;
use zeroize::Zeroizing;

/// OTs per chunk of the correction matrix (256 KiB on the wire).
const CHUNK: usize = 1 << 14;

/// Extra OTs with random choices that a malicious-secure extension sacrifices to hide the
/// choice bits in its check: κ + σ = 128 + 40 in KOS, rounded up to whole blocks.
const KOS_PAD: usize = 256;

/// The KOS check's challenge for one chunk: a generator seeded by the transcript of the
/// matrix so far, this chunk included (Fiat–Shamir: the receiver is bound to the chunk's
/// columns before it can know their χ).
fn challenge(transcript: &mut blake3::Hasher, chunk: &[[u8; 16]]) -> Prg {
    transcript.update(chunk.as_flattened());
    Prg::from_transcript(transcript)
}

/// OTs run for `n` wanted at `security`.
fn padded(n: usize, security: Security) -> usize {
    match security {
        Security::SemiHonest => n,
        Security::Malicious => n + KOS_PAD,
    }
}

/// The extension sender: `n` random OTs withstanding `security`; returns (m0_j, m1_j)
/// for each, wiped when dropped. Malicious: the KOS check (Keller–Orsini–Scholl,
/// CRYPTO 2015) that the receiver used one choice bit per column in all κ rows.
pub fn extend_send(
    ch: &mut impl Channel,
    sid: SessionId,
    n: usize,
    security: Security,
) -> Result<Zeroizing<Vec<[Block; 2]>>> {
    let mut s_bytes = Zeroizing::new([0u8; 16]);
    fill_os(&mut *s_bytes);
    let s = Zeroizing::new(u128::from_le_bytes(*s_bytes));
    let choices = Zeroizing::new((0..KAPPA).map(|i| (*s >> i) & 1 == 1).collect::<Vec<bool>>());
    let seeds = base_receive(ch, sid, &choices, security)?;
    let prgs: Vec<Prg> = seeds.iter().map(|&k| Prg::new(k)).collect();
    let hash = CrHash::new(sid);
    let total = padded(n, security);
    let mut transcript = Domain::new(dst::OT_KOS_CHALLENGE, sid).hasher();
    let mut q_sum = Gf128::ZERO;
    let mut out = Zeroizing::new(Vec::with_capacity(n));
    for start in (0..total).step_by(CHUNK) {
        let blocks = (total - start).min(CHUNK).div_ceil(128);
        let u = CorrectionChunk::recv(ch, "receiving the OT extension matrix", KAPPA * blocks)?.0;
        let rows: Vec<Zeroizing<Vec<u128>>> = prgs
            .par_iter()
            .enumerate()
            .map(|(i, prg)| {
                let mut row = Zeroizing::new(prg.blocks(start / 128, blocks));
                // Row i takes u_i where s_i = 1, without a branch on s.
                let mask = 0u128.wrapping_sub((*s >> i) & 1);
                for (x, ub) in row.iter_mut().zip(&u[i * blocks..(i + 1) * blocks]) {
                    *x ^= u128::from_le_bytes(*ub) & mask;
                }
                row
            })
            .collect();
        let q = Zeroizing::new(columns(&rows, blocks));
        let take = (total - start).min(CHUNK);
        if security == Security::Malicious {
            let chi = challenge(&mut transcript, &u);
            q_sum += chi.combine(take, |j| Gf128(q[j]));
        }
        let keep = n.saturating_sub(start).min(take);
        let h0 = Zeroizing::new(hash.hash(&q[..keep], start));
        let flipped = Zeroizing::new(q[..keep].iter().map(|x| x ^ *s).collect::<Vec<u128>>());
        let h1 = Zeroizing::new(hash.hash(&flipped, start));
        out.extend(h0.iter().zip(h1.iter()).map(|(a, b)| [*a, *b]));
    }
    if security == Security::Malicious {
        // Column j is q_j = t_j + r_j·s for one bit r_j in every row, so Σχ_j·q_j = t + x·s.
        let [x, t] = Gf128::pair_from_bytes(KosCheck::recv(ch, "receiving the OT extension check", ())?.0);
        if q_sum != t + x * Gf128(*s) {
            return Err(Deviation::FailedCheck {
                what: "the OT extension matrix (KOS)",
                meaning: "the receiver's choice bits differ between rows, as when probing the sender's secret",
            }
            .into());
        }
    }
    Ok(out)
}

/// The extension receiver with `choices`, withstanding `security`; returns m_{r_j} for
/// each, wiped when dropped.
pub fn extend_receive(
    ch: &mut impl Channel,
    sid: SessionId,
    choices: &[bool],
    security: Security,
) -> Result<Zeroizing<Vec<Block>>> {
    let n = choices.len();
    let total = padded(n, security);
    // The padding's choices are random: they mask the real ones in the check.
    let mut pad = Zeroizing::new([0u8; KOS_PAD / 8]);
    fill_os(&mut *pad);
    let choice = |j: usize| if j < n { choices[j] } else { (pad[(j - n) / 8] >> ((j - n) % 8)) & 1 == 1 };
    let keys = base_send(ch, sid, KAPPA, security)?;
    let prgs: Vec<[Prg; 2]> = keys.iter().map(|&[k0, k1]| [Prg::new(k0), Prg::new(k1)]).collect();
    let hash = CrHash::new(sid);
    let mut transcript = Domain::new(dst::OT_KOS_CHALLENGE, sid).hasher();
    let (mut x_sum, mut t_sum) = (Gf128::ZERO, Gf128::ZERO);
    let mut out = Zeroizing::new(Vec::with_capacity(n));
    for start in (0..total).step_by(CHUNK) {
        let take = (total - start).min(CHUNK);
        let blocks = take.div_ceil(128);
        let mut r = Zeroizing::new(vec![0u128; blocks]);
        for j in 0..take {
            r[j / 128] |= u128::from(choice(start + j)) << (j % 128);
        }
        let (t, u): (Vec<Zeroizing<Vec<u128>>>, Vec<Vec<u128>>) = prgs
            .par_iter()
            .map(|[p0, p1]| {
                let t = Zeroizing::new(p0.blocks(start / 128, blocks));
                let g1 = p1.blocks(start / 128, blocks);
                let u = t.iter().zip(g1.iter()).zip(r.iter()).map(|((a, b), c)| a ^ b ^ c).collect();
                (t, u)
            })
            .unzip();
        let chunk = CorrectionChunk(u.iter().flatten().map(|x| x.to_le_bytes()).collect());
        chunk.send(ch, "sending the OT extension matrix")?;
        let cols = Zeroizing::new(columns(&t, blocks));
        if security == Security::Malicious {
            let chi = challenge(&mut transcript, &chunk.0);
            // r_j as 0 or 1 in the field, without a branch on the choice bit.
            let bit = |j: usize| Gf128(Gf128::ONE.0 & 0u128.wrapping_sub((r[j / 128] >> (j % 128)) & 1));
            x_sum += chi.combine(take, bit);
            t_sum += chi.combine(take, |j| Gf128(cols[j]));
        }
        let keep = n.saturating_sub(start).min(take);
        out.extend_from_slice(&Zeroizing::new(hash.hash(&cols[..keep], start)));
    }
    if security == Security::Malicious {
        KosCheck(Gf128::pair_to_bytes([x_sum, t_sum])).send(ch, "sending the OT extension check")?;
    }
    Ok(out)
}

/// The columns of a κ × (128·blocks) bit matrix given as rows of blocks: column j's bit i
/// is row i's bit j.
fn columns<R: AsRef<[u128]> + Sync>(rows: &[R], blocks: usize) -> Vec<u128> {
    (0..blocks)
        .into_par_iter()
        .flat_map_iter(|b| {
            let mut m: [u128; 128] = std::array::from_fn(|i| rows[i].as_ref()[b]);
            transpose128(&mut m);
            m
        })
        .collect()
}

/// Transposes a 128 × 128 bit matrix in place (bit c of word r ↔ bit r of word c), by
/// swapping off-diagonal blocks of halving size (Hacker's Delight §7-3).
pub fn transpose128(m: &mut [u128; 128]) {
    let mut width = 64;
    let mut mask: u128 = u64::MAX as u128; // low `width` bits of every 2·width
    while width > 0 {
        for r in 0..128 {
            if r & width == 0 {
                let t = ((m[r] >> width) ^ m[r + width]) & mask;
                m[r] ^= t << width;
                m[r + width] ^= t;
            }
        }
        width /= 2;
        mask ^= mask << width;
    }
}

/// The tweakable correlation-robust hash H(x, j) = π(π(x) ⊕ j) ⊕ π(x).
struct CrHash(Aes128);

impl CrHash {
    fn new(sid: SessionId) -> Self {
        let k = Domain::new(dst::OT_CRHASH_KEY, sid).hash64(b"fixed AES key");
        Self(Aes128::new(&Array(k[..16].try_into().expect("16 bytes"))))
    }

    /// H(x_i, first + i) for each i.
    fn hash(&self, xs: &[u128], first: usize) -> Vec<u128> {
        xs.par_chunks(1024)
            .enumerate()
            .flat_map_iter(|(c, chunk)| {
                let mut px: Vec<Array<u8, _>> = chunk.iter().map(|x| Array(x.to_le_bytes())).collect();
                self.0.encrypt_blocks(&mut px);
                let px: Vec<u128> = px.iter().map(|a| u128::from_le_bytes(a.0)).collect();
                let base = (first + c * 1024) as u128;
                let mut y: Vec<Array<u8, _>> =
                    px.iter().enumerate().map(|(i, p)| Array((p ^ (base + i as u128)).to_le_bytes())).collect();
                self.0.encrypt_blocks(&mut y);
                y.into_iter().zip(px).map(|(a, p)| u128::from_le_bytes(a.0) ^ p).collect::<Vec<_>>()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transpose_matches_the_definition() {
        let mut m: [u128; 128] =
            std::array::from_fn(|i| u128::from_le_bytes(*blake3::hash(&[i as u8]).as_bytes().first_chunk().unwrap()));
        let orig = m;
        transpose128(&mut m);
        for (r, row) in orig.iter().enumerate() {
            for (c, col) in m.iter().enumerate() {
                assert_eq!((col >> r) & 1, (row >> c) & 1, "({r}, {c})");
            }
        }
        transpose128(&mut m);
        assert_eq!(m, orig);
    }

    #[test]
    fn hash_separates_tweaks_and_inputs() {
        let h = CrHash::new(SessionId([1; 32]));
        let a = h.hash(&[5, 5, 6], 0);
        assert_ne!(a[0], a[1], "same input, different tweak");
        assert_ne!(a[1], a[2]);
        assert_eq!(h.hash(&[5], 1)[0], a[1], "the tweak is the global index");
    }
}
