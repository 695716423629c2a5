//! A pseudorandom generator from AES-128 in counter mode: a 128-bit seed expands to
//! any number of 128-bit blocks (OT extension rows, noisy-VOLE pads).

use crate::math::gf128::Gf128;
use aes::Aes128;
use aes::cipher::{Array, BlockCipherEncrypt, KeyInit};

/// The generator of one seed.
pub struct Prg(Aes128);

impl Prg {
    /// The generator seeded with `seed`.
    pub fn new(seed: u128) -> Self {
        Self(Aes128::new(&Array(seed.to_le_bytes())))
    }

    /// The generator seeded by a transcript's hash so far: Fiat–Shamir challenges that
    /// the party who wrote the transcript cannot know before it is fixed.
    pub fn from_transcript(transcript: &blake3::Hasher) -> Self {
        Self::new(u128::from_le_bytes(transcript.finalize().as_bytes()[..16].try_into().expect("16 bytes")))
    }

    /// Blocks `first .. first + n` of the stream.
    pub fn blocks(&self, first: usize, n: usize) -> Vec<u128> {
        let mut out = vec![0u128; n];
        self.fill(first, &mut out);
        out
    }

    /// Blocks `first ..` of the stream into `out` (no allocation).
    pub fn fill(&self, first: usize, out: &mut [u128]) {
        self.each(first, out.len(), |i, b| out[i] = b);
    }

    /// Calls `f(i, block first + i)` for `i < n`, in order, encrypting a batch of blocks
    /// at a time on the stack.
    pub fn each(&self, first: usize, n: usize, mut f: impl FnMut(usize, u128)) {
        const BATCH: usize = 64;
        let mut buf = [Array([0u8; 16]); BATCH];
        for start in (0..n).step_by(BATCH) {
            let len = BATCH.min(n - start);
            for (j, b) in buf[..len].iter_mut().enumerate() {
                *b = Array(((first + start + j) as u128).to_le_bytes());
            }
            self.0.encrypt_blocks(&mut buf[..len]);
            for (j, b) in buf[..len].iter().enumerate() {
                f(start + j, u128::from_le_bytes(b.0));
            }
        }
    }

    /// Σ χ_i·value(i) over i < n in GF(2^128), with χ_i block i of the stream: the random
    /// linear combination of the consistency checks (KOS, the noisy VOLE's, Ferret's).
    /// Runs on all threads, in pieces of 2^12 with the χ on the stack.
    pub fn combine(&self, n: usize, value: impl Fn(usize) -> Gf128 + Sync) -> Gf128 {
        use rayon::prelude::*;
        const PIECE: usize = 1 << 12;
        (0..n.div_ceil(PIECE))
            .into_par_iter()
            .map(|p| {
                let mut sum = Gf128::ZERO;
                let start = p * PIECE;
                self.each(start, PIECE.min(n - start), |j, chi| sum += Gf128(chi) * value(start + j));
                sum
            })
            .reduce(|| Gf128::ZERO, |a, b| a + b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_is_deterministic_positional_and_seeded() {
        let (a, b) = (Prg::new(1), Prg::new(2));
        let s = a.blocks(0, 10);
        assert_eq!(a.blocks(3, 4), s[3..7]);
        assert_ne!(b.blocks(0, 10), s);
        assert_eq!(s.iter().collect::<std::collections::HashSet<_>>().len(), 10);
        let long = a.blocks(5, 200);
        assert_eq!(long[..5], s[5..]);
        let mut part = [0u128; 70];
        a.fill(100, &mut part);
        assert_eq!(part, long[95..165]);
    }

    #[test]
    fn combine_is_the_plain_sum_of_products() {
        let (chi, n) = (Prg::new(9), 10_000);
        let value = |i: usize| Gf128((i as u128 + 1) * 0x9e37_79b9_7f4a_7c15);
        let plain = chi.blocks(0, n).iter().enumerate().fold(Gf128::ZERO, |acc, (i, c)| acc + Gf128(*c) * value(i));
        assert_eq!(chi.combine(n, value), plain);
        assert_eq!(chi.combine(0, value), Gf128::ZERO);
    }
}
