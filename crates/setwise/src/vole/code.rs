//! The compressing code of dual LPN: expand-convolute (Raghuraman, Rindal, Tanguy,
//! "Expand-Convolute Codes for Pseudorandom Correlation Generators from LPN", Crypto
//! 2023, ePrint 2023/882), systematic, with expander weight 7 and a 24-bit convolution,
//! shaped as libOTe's `ExConv7x24` over GF(2^128).
//!
//! [`ExConv::dual_encode`] maps a vector x of `n` elements to `k` elements:
//! `x[..k] + Expand(Conv(Conv(x[k..])))`, where
//! - `Conv` is the convolution accumulator: for each row i in order, `x[i]` is added to
//!   `x[i + 1 + j]` for each of 24 pseudorandom bits b_{i,j} that are set, and always to
//!   `x[i + 25]`, which is then multiplied by the field element x (indices modulo n − k,
//!   so the last rows wrap around). It runs twice, with independent bits, as libOTe does
//!   (a single pass is weak when the expander lands in a short region near the end);
//! - `Expand` gives output i the sum of 7 entries, one pseudorandom entry in each of
//!   7 equal segments of the accumulated vector (a regular expander).
//!
//! The map is linear over GF(2^128), so applied to both sides of a sparse VOLE
//! `c = b + e·Δ` it gives `G·c = G·b + (G·e)·Δ`; dual LPN says G·e is pseudorandom when
//! e has regular noise of weight t. The code's bits come from AES in counter mode under a
//! seed both parties derive from the session.
//!
//! **Why the multiplication.** With additions alone G would be binary while the noise
//! lives in GF(2^128): G·e would be 128 binary syndromes of the noise's bit-slices, all
//! with one support of size t, and a peer who knows about t + 64 of the VOLE receiver's
//! VOLE-PSI items could find that support by linear algebra, then e and the receiver's
//! store (the "splitting attack"; module `splitting_attack` runs it). libOTe multiplies
//! the same accumulator entry by a constant outside GF(2) for this reason
//! (`CoeffCtxGF128::mulConst` in `libOTe/Tools/CoeffCtx.h`, applied in
//! `ExConvCode::accOne`; its constant is 0xFC5F989D in GCM's representation). setwise
//! multiplies by x ([`Gf128::mul_x`]: a shift and a reduction), which lies in no proper
//! subfield, so G's entries are polynomials in x over GF(2) and the slices mix.
//!
//! Where setwise differs from libOTe's bits (not its shape): each row draws 24 fresh bits
//! (libOTe's rows share 16 with the next), and each of the 7 expander entries is uniform
//! in its own seventh of the vector (libOTe's weight-7 regular expander: 4 regular, 3
//! uniform).

use super::{Tell, untold};
use crate::crypto::prg::Prg;
use crate::math::gf128::Gf128;
use rayon::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};
use zeroize::Zeroize;

/// Entries of the accumulated vector summed into each output.
pub const EXPANDER_WEIGHT: usize = 7;
/// Pseudorandom diagonals of the convolution (plus one fixed diagonal after them).
pub const CONV_WIDTH: usize = 24;
/// Outputs generated per expander task (their positions come from one PRG call).
const EXPAND_CHUNK: usize = 1 << 12;
/// Outputs whose positions are drawn per PRG call (on the stack).
const EXPAND_BATCH: usize = 64;
/// Convolution rows per PRG call (their bits on the stack).
const CONV_CHUNK: usize = 1 << 12;
/// Rows between two reports of the (sequential) convolution's progress.
const TELL_ROWS: usize = 1 << 18;

/// An expand-convolute code from `n` noisy positions down to `k` outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExConv {
    k: usize,
    n: usize,
    seed: u128,
    /// Without the accumulator's multiplication (the broken code, for the attack test).
    binary: bool,
}

impl ExConv {
    /// The code for `k` outputs from `n` positions under `seed`. `n − k` must be at least
    /// the convolution's reach and the expander's weight.
    pub fn new(k: usize, n: usize, seed: u128) -> crate::error::Result<Self> {
        if k == 0 || n < k + 2 * (CONV_WIDTH + 1) || (n - k) < EXPANDER_WEIGHT {
            return Err(crate::error::Error::params(
                "code_size",
                format!(
                    "expand-convolute code from {n} to {k} positions: needs k ≥ 1 and n ≥ k + {}",
                    2 * (CONV_WIDTH + 1)
                ),
            ));
        }
        Ok(Self { k, n, seed, binary: false })
    }

    /// The code with additions only, open to the splitting attack (test only).
    #[cfg(test)]
    pub(crate) fn binary(k: usize, n: usize, seed: u128) -> crate::error::Result<Self> {
        Ok(Self { binary: true, ..Self::new(k, n, seed)? })
    }

    /// Outputs of the code.
    pub fn outputs(&self) -> usize {
        self.k
    }

    /// Inputs of the code.
    pub fn inputs(&self) -> usize {
        self.n
    }

    /// Replaces `x` (of [`inputs`](Self::inputs) elements) by its first
    /// [`outputs`](Self::outputs) elements after the dual encoding. `x` may hold several
    /// vectors lane by lane ([`Lanes`]): each is encoded as if alone, and each of the
    /// expander's random reads fetches all of them at once.
    pub fn dual_encode<T: Lanes>(&self, x: &mut Vec<T>) {
        self.dual_encode_told(x, &untold);
    }

    /// [`dual_encode`](Self::dual_encode), telling `tell` of the rows convolved (both
    /// passes) and then of the outputs expanded.
    pub fn dual_encode_told<T: Lanes>(&self, x: &mut Vec<T>, tell: Tell) {
        assert_eq!(x.len(), self.n, "the code's input length");
        let (head, parity) = x.split_at_mut(self.k);
        // The two passes read disjoint parts (2^62 blocks apart) of the seed's stream.
        let rows = 2 * parity.len() as u64;
        let half = parity.len() as u64;
        let pass = |parity: &mut [T], stream: usize, before: u64| {
            let tell = |done| tell("code rows", before + done, rows);
            match self.binary {
                false => convolve::<T, true>(parity, Prg::new(self.seed), stream, &tell),
                true => convolve::<T, false>(parity, Prg::new(self.seed), stream, &tell),
            }
        };
        pass(parity, 0, 0);
        pass(parity, 1 << 62, half);
        self.expand(parity, head, tell);
        // The parity part derives from the VOLE's secrets: wiped before it is let go.
        x[self.k..].iter_mut().for_each(Zeroize::zeroize);
        x.truncate(self.k);
        x.shrink_to_fit();
    }

    /// Adds to each of `out`'s k entries its 7 expander entries of `parity`.
    fn expand<T: Lanes>(&self, parity: &[T], out: &mut [T], tell: Tell) {
        let step = parity.len() / EXPANDER_WEIGHT;
        let prg = Prg::new(self.seed ^ (1 << 127));
        let (done, total) = (AtomicU64::new(0), out.len() as u64);
        // Per output 7 positions of 64 bits: 3.5 blocks; 4 blocks keep it aligned.
        out.par_chunks_mut(EXPAND_CHUNK).enumerate().for_each(|(c, chunk)| {
            let mut rand = [0u128; 4 * EXPAND_BATCH];
            for (b, outs) in chunk.chunks_mut(EXPAND_BATCH).enumerate() {
                let first = c * EXPAND_CHUNK + b * EXPAND_BATCH;
                prg.fill(4 * first, &mut rand[..4 * outs.len()]);
                for (o, r) in outs.iter_mut().zip(rand.chunks_exact(4)) {
                    for w in 0..EXPANDER_WEIGHT {
                        let word = (r[w / 2] >> (64 * (w % 2))) as u64;
                        // A uniform position in segment w (multiply-shift, not a division).
                        let at = ((u128::from(word) * step as u128) >> 64) as usize;
                        o.xor(&parity[w * step + at]);
                    }
                }
            }
            tell("outputs", done.fetch_add(chunk.len() as u64, Ordering::Relaxed) + chunk.len() as u64, total);
        });
    }
}

/// What the code adds up: one vector of field elements, or several side by side.
pub trait Lanes: Copy + Send + Sync + Zeroize {
    /// `self += other`.
    fn xor(&mut self, other: &Self);
    /// `self += other` where `mask` is all ones, nothing where it is zero.
    fn xor_masked(&mut self, other: &Self, mask: u128);
    /// `self = self·x` ([`Gf128::mul_x`]).
    fn times_x(&mut self);
}

impl Lanes for Gf128 {
    #[inline]
    fn xor(&mut self, other: &Self) {
        self.0 ^= other.0;
    }

    #[inline]
    fn xor_masked(&mut self, other: &Self, mask: u128) {
        self.0 ^= other.0 & mask;
    }

    #[inline]
    fn times_x(&mut self) {
        *self = self.mul_x();
    }
}

impl<const L: usize> Lanes for [Gf128; L] {
    #[inline]
    fn xor(&mut self, other: &Self) {
        for (a, b) in self.iter_mut().zip(other) {
            a.0 ^= b.0;
        }
    }

    #[inline]
    fn xor_masked(&mut self, other: &Self, mask: u128) {
        for (a, b) in self.iter_mut().zip(other) {
            a.0 ^= b.0 & mask;
        }
    }

    #[inline]
    fn times_x(&mut self) {
        for a in self.iter_mut() {
            *a = a.mul_x();
        }
    }
}

/// One convolution pass over `x` (wrapping at its end), with the bits of blocks
/// `stream..` of `prg`: 3 bytes per row; `MIX` multiplies the fixed diagonal's entry by
/// x after the row is added to it (without, the code is binary). `tell` is told the rows
/// done every [`TELL_ROWS`] and at the end.
fn convolve<T: Lanes, const MIX: bool>(x: &mut [T], prg: Prg, stream: usize, tell: &dyn Fn(u64)) {
    let size = x.len();
    // The rows whose reach stays inside the vector need no wrap test.
    let main = size - (CONV_WIDTH + 1);
    let mut block = stream;
    for start in (0..size).step_by(CONV_CHUNK) {
        if start % TELL_ROWS == 0 && start > 0 {
            tell(start as u64);
        }
        let rows = CONV_CHUNK.min(size - start);
        let blocks = (3 * rows).div_ceil(16);
        let mut bytes = [0u8; 16 * (3 * CONV_CHUNK).div_ceil(16)];
        prg.each(block, blocks, |j, b| bytes[16 * j..16 * j + 16].copy_from_slice(&b.to_le_bytes()));
        block += blocks;
        for r in 0..rows {
            let i = start + r;
            let bits = u32::from_le_bytes([bytes[3 * r], bytes[3 * r + 1], bytes[3 * r + 2], 0]);
            let xi = x[i];
            let mask = |j: usize| 0u128.wrapping_sub(((bits >> j) & 1) as u128);
            if i < main {
                let window = &mut x[i + 1..i + CONV_WIDTH + 2];
                for (j, y) in window[..CONV_WIDTH].iter_mut().enumerate() {
                    y.xor_masked(&xi, mask(j));
                }
                window[CONV_WIDTH].xor(&xi);
                if MIX {
                    window[CONV_WIDTH].times_x();
                }
            } else {
                for j in 0..CONV_WIDTH {
                    x[(i + 1 + j) % size].xor_masked(&xi, mask(j));
                }
                let last = &mut x[(i + CONV_WIDTH + 1) % size];
                last.xor(&xi);
                if MIX {
                    last.times_x();
                }
            }
        }
    }
    tell(size as u64);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random(n: usize, seed: u128) -> Vec<Gf128> {
        Prg::new(seed).blocks(0, n).into_iter().map(Gf128).collect()
    }

    fn encode(code: &ExConv, mut x: Vec<Gf128>) -> Vec<Gf128> {
        code.dual_encode(&mut x);
        x
    }

    #[test]
    fn the_encoding_is_linear() {
        for (k, n) in [(1, 60), (100, 200), (5000, 10_240), (9000, 18_432)] {
            let code = ExConv::new(k, n, 77).unwrap();
            let (a, b) = (random(n, 1), random(n, 2));
            let sum: Vec<Gf128> = a.iter().zip(&b).map(|(x, y)| *x + *y).collect();
            let (ea, eb, es) = (encode(&code, a), encode(&code, b), encode(&code, sum));
            assert_eq!(es.len(), k);
            for i in 0..k {
                assert_eq!(es[i], ea[i] + eb[i], "k = {k}, n = {n}, output {i}");
            }
        }
    }

    #[test]
    fn it_maps_a_sparse_vole_to_a_dense_one() {
        let (k, n, t) = (4000, 8192, 128);
        let code = ExConv::new(k, n, 5).unwrap();
        let delta = random(1, 9)[0];
        let b = random(n, 3);
        let mut e = vec![Gf128::ZERO; n];
        let noise = random(t, 4);
        for (j, y) in noise.iter().enumerate() {
            e[j * (n / t) + (j * 31) % (n / t)] = *y;
        }
        let c: Vec<Gf128> = b.iter().zip(&e).map(|(b, e)| *b + *e * delta).collect();
        let (b, a, c) = (encode(&code, b), encode(&code, e), encode(&code, c));
        assert!(a.iter().all(|x| *x != Gf128::ZERO), "every output is reached by the noise");
        for i in 0..k {
            assert_eq!(c[i], b[i] + a[i] * delta);
        }
    }

    #[test]
    fn one_noise_position_reaches_many_outputs() {
        // A unit vector in the parity part spreads through the convolution, so outputs
        // depend on far-away inputs (what makes G·e look random). Over GF(2) an output
        // is reached when an odd number of paths lead to it (about half); with the
        // multiplications the paths' coefficients differ and almost never cancel.
        let (k, n) = (1000, 2000);
        let reached = |code: ExConv| {
            let mut x = vec![Gf128::ZERO; n];
            x[k + 3] = Gf128::ONE;
            let out = encode(&code, x);
            (out.iter().filter(|v| **v != Gf128::ZERO).count(), out)
        };
        let (hit, _) = reached(ExConv::binary(k, n, 11).unwrap());
        assert!(hit > k / 4 && hit < 3 * k / 4, "{hit} of {k} outputs reached");
        let (hit, out) = reached(ExConv::new(k, n, 11).unwrap());
        assert!(hit > 9 * k / 10, "{hit} of {k} outputs reached");
        let binary = out.iter().filter(|v| **v == Gf128::ONE).count();
        assert!(binary < k / 10, "{binary} of {k} coefficients are 1");
    }

    #[test]
    fn lanes_are_encoded_as_if_alone() {
        let (k, n) = (3000, 6144);
        let code = ExConv::new(k, n, 21).unwrap();
        let (a, b) = (random(n, 7), random(n, 8));
        let mut pairs: Vec<[Gf128; 2]> = a.iter().zip(&b).map(|(x, y)| [*x, *y]).collect();
        code.dual_encode(&mut pairs);
        let (ea, eb) = (encode(&code, a), encode(&code, b));
        assert!(pairs.iter().zip(ea.iter().zip(&eb)).all(|(p, (x, y))| p == &[*x, *y]));
    }

    #[test]
    fn the_seed_fixes_the_code_and_bad_shapes_are_refused() {
        let x = random(400, 6);
        let (a, b) = (ExConv::new(200, 400, 1).unwrap(), ExConv::new(200, 400, 2).unwrap());
        assert_eq!(encode(&a, x.clone()), encode(&a, x.clone()));
        assert_ne!(encode(&a, x.clone()), encode(&b, x));
        assert!(ExConv::new(0, 100, 1).is_err());
        assert!(ExConv::new(100, 120, 1).is_err());
    }
}
