//! A key's row: a band of `w` random bits at a random start, from a fixed-key AES hash
//! of the key under the store's seed, and the parameters (ε, w) by set size.

use super::OkvsParams;
use crate::math::gf128::Gf128;
use aes::Aes128;
use aes::cipher::{Array, BlockCipherEncrypt, KeyInit};

/// Widest band supported (bits).
pub const MAX_BAND: usize = 256;
const WORDS: usize = MAX_BAND / 64;

/// Expansion ε of every store: 10 % more columns than keys.
pub const EPSILON: f64 = 0.1;

/// RB-OKVS's fits of the statistical security λ = a·w − b for ε = 0.1 at n = 2^16,
/// 2^20 and 2^24 (Bienstock et al., USENIX Security 2023, §5; ePrint 2023/903):
/// (log2 n, a, b).
const FITS: [(u32, f64, f64); 3] = [(16, 0.2740, 11.61), (20, 0.2691, 15.21), (24, 0.2751, 19.83)];

/// Statistical security of every store: failure ≤ 2^-40 per encoding.
pub const LAMBDA: f64 = 40.0;

/// The band width `w` for a system of `n` keys at ε = [`EPSILON`] failing with
/// probability ≤ 2^-`lambda`: the fit of the next size up (smaller systems fail less at
/// the same width), beyond 2^24 the 2^24 fit with `b` growing as it does between the
/// fitted sizes (+4.6 per ×16).
pub(super) fn width(n: usize, lambda: f64) -> usize {
    let log_n = usize::BITS - n.max(2).saturating_sub(1).leading_zeros();
    let (a, b) = match FITS.iter().find(|(l, _, _)| log_n <= *l) {
        Some(&(_, a, b)) => (a, b),
        None => (FITS[2].1, FITS[2].2 + 4.6 * f64::from(log_n - 24) / 4.0),
    };
    (((lambda + b) / a).ceil() as usize).min(MAX_BAND)
}

/// One row of the system: `bits` (bit j is column `start + j`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Band {
    /// The first column of the band.
    pub start: usize,
    bits: [u64; WORDS],
}

impl Band {
    /// The offset of the lowest set bit, if any.
    pub fn lowest(&self) -> Option<usize> {
        self.bits.iter().enumerate().find(|(_, w)| **w != 0).map(|(i, w)| i * 64 + w.trailing_zeros() as usize)
    }

    /// Bit `j` (column `start + j`).
    pub fn get(&self, j: usize) -> bool {
        j < MAX_BAND && (self.bits[j / 64] >> (j % 64)) & 1 == 1
    }

    /// XORs `other` into this band, `other` starting `shift` columns before this one
    /// (its bits below column `self.start` must be zero).
    pub fn xor_shifted(&mut self, other: &Band, shift: usize) {
        let (words, bits) = (shift / 64, shift % 64);
        for i in 0..WORDS {
            let lo = other.bits.get(i + words).copied().unwrap_or(0);
            let hi = other.bits.get(i + words + 1).copied().unwrap_or(0);
            self.bits[i] ^= if bits == 0 { lo } else { (lo >> bits) | (hi << (64 - bits)) };
        }
    }

    /// ⟨band, columns⟩: the XOR of the columns its set bits select. Every set bit must
    /// name a column of `columns` (bands are drawn inside their bin).
    pub fn dot(&self, columns: &[Gf128]) -> Gf128 {
        let window = &columns[self.start..];
        // The columns up to the highest set bit (none past the window: checked below).
        let reach =
            self.bits.iter().rposition(|&w| w != 0).map_or(0, |i| i * 64 + 64 - self.bits[i].leading_zeros() as usize);
        assert!(reach <= window.len(), "a band reaching past its bin's columns");
        #[cfg(target_arch = "x86_64")]
        if let Some(acc) = wide::dot(&self.bits, &window[..reach]) {
            return Gf128(acc);
        }
        Gf128(sparse_dot(&self.bits, window))
    }
}

/// The dot product bit by bit: one read per set bit (about half the band's width).
fn sparse_dot(bits: &[u64; WORDS], window: &[Gf128]) -> u128 {
    let mut acc = 0u128;
    for (i, &word) in bits.iter().enumerate() {
        let mut w = word;
        while w != 0 {
            acc ^= window[i * 64 + w.trailing_zeros() as usize].0;
            w &= w - 1;
        }
    }
    acc
}

/// The dot product with masked vector loads: four columns per AVX-512 load, the band's
/// bits as the mask, so there is no branch per bit (the bit loop mispredicts on random
/// bands; decoding is a fifth of VOLE-PSI's time). AVX2's masked loads were slower here
/// than the bit loop (okvs-speed at 2^20: decode 0.123–0.131 s against 0.102–0.105 s,
/// AVX-512 0.077–0.084 s), so CPUs without AVX-512 keep the loop. `unsafe` only to call
/// the `target_feature` function once the feature is detected and for the masked loads,
/// which read no lane whose bit is clear and none past `window` (lanes past its end are
/// masked off).
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod wide {
    use super::WORDS;
    use crate::math::gf128::Gf128;
    use std::arch::x86_64::*;

    /// The dot product of `bits` with `window` (no set bit past it), or `None` without
    /// AVX-512.
    #[inline]
    pub(super) fn dot(bits: &[u64; WORDS], window: &[Gf128]) -> Option<u128> {
        // SAFETY: the CPU has AVX-512F; `window` is read only where masked in.
        std::arch::is_x86_feature_detected!("avx512f").then(|| unsafe { dot512(bits, window) })
    }

    /// Bit j of `bits` from column `at` on, `n` of them (n ≤ 4), the rest cleared.
    #[inline(always)]
    fn nibble(bits: &[u64; WORDS], at: usize, n: usize) -> usize {
        // `at` is a multiple of 4, so the group never straddles two words.
        ((bits[at / 64] >> (at % 64)) as usize) & ((1 << n) - 1)
    }

    /// 4 bits to 8: each column is two 64-bit lanes.
    const SPREAD: [u8; 16] = {
        let mut t = [0u8; 16];
        let mut i = 0;
        while i < 16 {
            let mut b = 0;
            while b < 4 {
                if i >> b & 1 == 1 {
                    t[i] |= 0b11 << (2 * b);
                }
                b += 1;
            }
            i += 1;
        }
        t
    };

    #[target_feature(enable = "avx512f")]
    unsafe fn dot512(bits: &[u64; WORDS], window: &[Gf128]) -> u128 {
        // Loads across two 64-byte lines are as fast here as realigning the band to
        // avoid them (measured: shifting the bits first was slower).
        let base = window.as_ptr().cast::<i64>();
        let mut acc = _mm512_setzero_si512();
        let mut at = 0;
        while at < window.len() {
            let k = SPREAD[nibble(bits, at, (window.len() - at).min(4))];
            // SAFETY: lanes of columns ≥ window.len() are masked off and not read.
            let v = unsafe { _mm512_maskz_loadu_epi64(k, base.wrapping_add(2 * at)) };
            acc = _mm512_xor_si512(acc, v);
            at += 4;
        }
        let half = _mm256_xor_si256(_mm512_castsi512_si256(acc), _mm512_extracti64x4_epi64::<1>(acc));
        fold(_mm_xor_si128(_mm256_castsi256_si128(half), _mm256_extracti128_si256::<1>(half)))
    }

    #[inline(always)]
    fn fold(x: __m128i) -> u128 {
        let mut out = [0u64; 2];
        // SAFETY: `out` is 16 writable bytes; the store is unaligned.
        unsafe { _mm_storeu_si128(out.as_mut_ptr().cast(), x) };
        u128::from(out[0]) | (u128::from(out[1]) << 64)
    }

    #[cfg(test)]
    mod tests {
        use super::super::{Band, MAX_BAND, sparse_dot};
        use super::*;
        use rand::RngExt;

        /// The vector path against the bit loop, for bands ending anywhere in a load (the
        /// masked tail) and windows ending right after the last set bit.
        #[test]
        fn the_vector_dot_matches_the_bit_loop() {
            let mut rng = rand::rng();
            let columns: Vec<Gf128> = (0..MAX_BAND + 4).map(|_| Gf128(rng.random())).collect();
            for (reach, skew) in (0..=MAX_BAND).flat_map(|r| (0..4).map(move |k| (r, k))) {
                let mut bits: [u64; WORDS] = std::array::from_fn(|_| rng.random());
                for j in reach..MAX_BAND {
                    bits[j / 64] &= !(1u64 << (j % 64));
                }
                if reach > 0 && rng.random::<bool>() {
                    bits[(reach - 1) / 64] |= 1 << ((reach - 1) % 64);
                }
                // Windows at each offset in a 64-byte line, in a buffer ending right after
                // them.
                let buffer = columns[..reach + skew].to_vec();
                let window = &buffer[skew..];
                let want = sparse_dot(&bits, window);
                assert_eq!(Band { start: skew, bits }.dot(&buffer).0, want, "reach {reach}");
                if std::arch::is_x86_feature_detected!("avx512f") {
                    // SAFETY: the CPU has AVX-512F.
                    assert_eq!(unsafe { dot512(&bits, window) }, want, "avx512, reach {reach}");
                }
            }
        }
    }
}

/// Maps keys to bins and bands under a seed: three AES blocks per key, the first giving
/// the bin (its high half) and the band's start in its bin (its low half), the other two
/// the band's 256 bits (of which `w` are kept).
pub struct BandHasher {
    aes: Aes128,
    params: OkvsParams,
}

impl BandHasher {
    /// The hasher of the store with `seed` and `params`.
    pub fn new(seed: &[u8; 16], params: OkvsParams) -> Self {
        assert!(params.band <= MAX_BAND && params.band < params.bin_columns(), "band {params:?}");
        Self { aes: Aes128::new(&Array(*seed)), params }
    }

    /// The band of `key`, its start counted in its bin. Keys are uniformly random
    /// (hashes of items), so a counter XORed into the key gives independent blocks.
    pub fn band(&self, key: u128) -> Band {
        let mut out = [Band { start: 0, bits: [0; WORDS] }];
        self.bands(&[key], &mut out);
        out[0]
    }

    /// [`band`](Self::band) of each of `keys` into `out` (as long): the AES blocks of
    /// all keys in one call, which the cipher pipelines.
    pub fn bands(&self, keys: &[u128], out: &mut [Band]) {
        assert_eq!(keys.len(), out.len(), "a band per key");
        for (keys, out) in keys.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
            let mut blocks = [Array([0u8; 16]); 3 * BATCH];
            for (k, b) in keys.iter().zip(blocks.chunks_exact_mut(3)) {
                for (i, block) in b.iter_mut().enumerate() {
                    *block = Array((k ^ i as u128).to_le_bytes());
                }
            }
            let blocks = &mut blocks[..3 * keys.len()];
            self.aes.encrypt_blocks(blocks);
            for (o, b) in out.iter_mut().zip(blocks.chunks_exact(3)) {
                let [a, b, c] = [0, 1, 2].map(|i| u128::from_le_bytes(b[i].0));
                *o = self.band_of(a, b, c);
            }
        }
    }

    fn band_of(&self, a: u128, b: u128, c: u128) -> Band {
        let start = self.start_of(a);
        // The first bit is always set (as in the paper's and Google's implementation):
        // every row has a pivot at its start before elimination.
        let mut bits = [b as u64 | 1, (b >> 64) as u64, c as u64, (c >> 64) as u64];
        let w = self.params.band;
        for (i, word) in bits.iter_mut().enumerate() {
            let keep = w.saturating_sub(i * 64).min(64);
            *word &= if keep == 64 { u64::MAX } else { (1u64 << keep) - 1 };
        }
        Band { start, bits }
    }

    /// The bin of each of `keys` into `out` (as long), one AES block per key.
    pub fn bins(&self, keys: &[u128], out: &mut [u32]) {
        assert_eq!(keys.len(), out.len(), "a bin per key");
        if self.params.bins == 1 {
            out.fill(0);
            return;
        }
        for (keys, out) in keys.chunks(3 * BATCH).zip(out.chunks_mut(3 * BATCH)) {
            let mut blocks = [Array([0u8; 16]); 3 * BATCH];
            let blocks = &mut blocks[..keys.len()];
            for (k, b) in keys.iter().zip(blocks.iter_mut()) {
                *b = Array(k.to_le_bytes());
            }
            self.aes.encrypt_blocks(blocks);
            for (o, b) in out.iter_mut().zip(blocks.iter()) {
                *o = scale((u128::from_le_bytes(b.0) >> 64) as u64, self.params.bins) as u32;
            }
        }
    }

    /// The bin of `key` (one AES block instead of the band's three).
    pub fn bin(&self, key: u128) -> usize {
        if self.params.bins == 1 {
            return 0;
        }
        let mut block = Array(key.to_le_bytes());
        self.aes.encrypt_block(&mut block);
        scale((u128::from_le_bytes(block.0) >> 64) as u64, self.params.bins)
    }

    fn start_of(&self, first_block: u128) -> usize {
        scale(first_block as u64, self.params.bin_columns() - self.params.band + 1)
    }
}

/// Keys hashed per AES call (the cipher pipelines the blocks of one call).
pub(crate) const BATCH: usize = 64;

/// A uniform 64-bit value scaled to `0..n` (Lemire's multiply-shift).
fn scale(x: u64, n: usize) -> usize {
    ((u128::from(x) * n as u128) >> 64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngExt;

    #[test]
    fn the_shifted_xor_adds_the_other_bands_dot_product() {
        let mut rng = rand::rng();
        let columns: Vec<Gf128> = (0..1000).map(|_| Gf128(rng.random())).collect();
        for shift in [0, 1, 63, 64, 65, 130, 200, 255] {
            let mut a = Band { start: 100, bits: std::array::from_fn(|_| rng.random()) };
            // Elimination guarantees `a` has no bits before the other band's start.
            for j in 0..shift {
                a.bits[j / 64] &= !(1u64 << (j % 64));
            }
            let mut b = Band { start: 100 + shift, bits: std::array::from_fn(|_| rng.random()) };
            let before = b.dot(&columns);
            b.xor_shifted(&a, shift);
            assert_eq!(b.dot(&columns), before + a.dot(&columns), "shift {shift}");
        }
    }

    #[test]
    fn widths_follow_the_fits() {
        let w = |n| width(n, LAMBDA);
        assert_eq!((w(1), w(1 << 16), w(1 << 20), w(1 << 24)), (189, 189, 206, 218));
        assert_eq!(w((1 << 16) + 1), 206);
        assert!(w(1 << 28) > 218 && w(usize::MAX) == MAX_BAND);
        assert_eq!(width(1 << 16, 50.0), 225);
    }

    #[test]
    fn bands_are_inside_the_store_and_as_wide_as_asked() {
        let params = OkvsParams { columns: 500, band: 100, bins: 1 };
        let h = BandHasher::new(&[1; 16], params);
        let mut widest = 0;
        for k in 0..2000u128 {
            let b = h.band(k.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835));
            assert!(b.start + params.band <= params.columns);
            assert!((params.band..MAX_BAND).all(|j| !b.get(j)));
            widest = widest.max((0..params.band).rev().find(|&j| b.get(j)).unwrap_or(0));
        }
        assert_eq!(widest, params.band - 1);
    }
}
