//! Products of polynomials over GF(2^128 − 159) in O(n log n), for the O(n log² n)
//! interpolation and evaluation of [`fastpoly`](super::fastpoly).
//!
//! The field has no large power-of-two roots of unity, so coefficients are taken modulo
//! five primes q = c·2^25 + 1 in [2^61, 2^62), multiplied there by number-theoretic
//! transforms, and recovered by the Chinese remainder theorem (Garner's mixed radix). The
//! recovery is exact: a sum of two products (the most a caller forms) has coefficients
//! below 2n·p² < 2^(257 + log n), and the primes' product is above 2^309, so any n below
//! 2^52 (transforms stop at 2^25).
//!
//! Arithmetic modulo each q is Montgomery's with R = 2^64 and values kept lazily in
//! [0, 2q). A [`Spectrum`] holds a polynomial's five transforms, so that a caller forming
//! `a·b + c·d` transforms each factor once and inverts once.

use super::fp128::F128;
use rayon::prelude::*;
use std::sync::{Arc, OnceLock, RwLock};

/// log2 of the largest transform: every prime is 1 mod 2^25.
pub const MAX_LOG: u32 = 25;

/// How many primes.
const K: usize = 5;

/// The primes (the five largest c·2^25 + 1 below 2^62, found by search) and a root of
/// unity of order exactly 2^25 modulo each; the tests check both facts.
const MODULI: [(u64, u64); K] = [
    (0x3fff_ffff_fa00_0001, 0x2b5b_11b0_b21a_85f1),
    (0x3fff_ffff_ea00_0001, 0x1262_3932_f0e0_87ce),
    (0x3fff_ffff_cc00_0001, 0x2734_0ac4_988c_17e0),
    (0x3fff_ffff_9600_0001, 0x2aa8_1bb7_695a_e7c2),
    (0x3fff_ffff_5e00_0001, 0x3cd3_f054_a599_c280),
];

/// One prime's Montgomery constants.
#[derive(Clone, Copy)]
struct Prime {
    q: u64,
    /// −q⁻¹ mod 2^64.
    neg_inv: u64,
    /// R mod q (Montgomery's 1).
    r1: u64,
}

impl Prime {
    const fn new(q: u64) -> Prime {
        // Newton's iteration for q⁻¹ mod 2^64: each step doubles the correct low bits.
        let mut inv = q;
        let mut i = 0;
        while i < 6 {
            inv = inv.wrapping_mul(2u64.wrapping_sub(q.wrapping_mul(inv)));
            i += 1;
        }
        Prime { q, neg_inv: inv.wrapping_neg(), r1: ((1u128 << 64) % q as u128) as u64 }
    }

    /// t·R⁻¹ mod q, in [0, 2q) for t < q·2^64 (so for products of lazy values, < 4q²).
    #[inline(always)]
    fn redc(self, t: u128) -> u64 {
        let m = (t as u64).wrapping_mul(self.neg_inv);
        ((t + m as u128 * self.q as u128) >> 64) as u64
    }

    /// a·b·R⁻¹ mod q in [0, 2q), for a, b < 2q.
    #[inline(always)]
    fn mul(self, a: u64, b: u64) -> u64 {
        self.redc(a as u128 * b as u128)
    }

    /// A value below 4q brought below 2q.
    #[inline(always)]
    fn lazy(self, v: u64) -> u64 {
        if v >= 2 * self.q { v - 2 * self.q } else { v }
    }

    /// A value below 2q brought below q.
    #[inline(always)]
    fn canonical(self, v: u64) -> u64 {
        if v >= self.q { v - self.q } else { v }
    }

    /// `x·R⁻¹ mod q` for a field element x = hi·2^64 + lo: hi + lo·R⁻¹, in [0, 2q).
    #[inline(always)]
    fn residue(self, x: F128) -> u64 {
        let v = x.value();
        self.lazy(self.redc(v as u64 as u128) + self.redc((v >> 64) * self.r1 as u128))
    }

    /// `a^e mod q`, plain (not Montgomery) arithmetic: setup only.
    fn pow(self, a: u64, mut e: u64) -> u64 {
        let (mut base, mut acc) = (a as u128 % self.q as u128, 1u128);
        while e > 0 {
            if e & 1 == 1 {
                acc = acc * base % self.q as u128;
            }
            base = base * base % self.q as u128;
            e >>= 1;
        }
        acc as u64
    }

    /// `a·b mod q`, plain arithmetic: setup only.
    fn mul_plain(self, a: u64, b: u64) -> u64 {
        (a as u128 * b as u128 % self.q as u128) as u64
    }

    /// a (plain, < q) in Montgomery form, a·R mod q.
    fn to_mont(self, a: u64) -> u64 {
        self.mul_plain(a, self.r1)
    }
}

const PRIMES: [Prime; K] = {
    let mut out = [Prime { q: 0, neg_inv: 0, r1: 0 }; K];
    let mut i = 0;
    while i < K {
        out[i] = Prime::new(MODULI[i].0);
        i += 1;
    }
    out
};

/// Twiddle factors for transforms up to `size`: `fwd[i][h + j] = w_{2h}^j·R mod q_i` for
/// each stage half-length h (a power of two below `size`) and j < h, where w_{2h} is a
/// root of order 2h; `inv` the same for w_{2h}⁻¹. One contiguous run per stage.
struct Tables {
    size: usize,
    fwd: Vec<Vec<u64>>,
    inv: Vec<Vec<u64>>,
}

impl Tables {
    fn new(size: usize) -> Tables {
        let stage_roots = |p: Prime, root: u64| {
            let mut t = vec![0u64; size];
            let mut h = 1;
            while h < size {
                // The root of order 2h is root^(2^25 / 2h).
                let w = p.to_mont(p.pow(root, (1u64 << MAX_LOG) / (2 * h as u64)));
                let mut m = p.r1;
                for slot in &mut t[h..2 * h] {
                    *slot = m;
                    m = p.canonical(p.mul(m, w));
                }
                h *= 2;
            }
            t
        };
        let (fwd, inv) = (0..K)
            .into_par_iter()
            .map(|i| {
                let (p, root) = (PRIMES[i], MODULI[i].1);
                let root_inv = p.pow(root, (1u64 << MAX_LOG) - 1);
                (stage_roots(p, root), stage_roots(p, root_inv))
            })
            .unzip();
        Tables { size, fwd, inv }
    }
}

/// The tables for transforms of `size`, built once and grown (doubled) when a larger
/// transform first asks. They are built with no lock held: building runs on the thread
/// pool, whose workers may meanwhile take other jobs that ask for the tables. Two threads
/// may then build the same tables at once; the spare copy is dropped.
fn tables(size: usize) -> Arc<Tables> {
    static TABLES: RwLock<Option<Arc<Tables>>> = RwLock::new(None);
    let current = TABLES.read().unwrap_or_else(|e| e.into_inner()).clone();
    if let Some(t) = current.as_ref()
        && t.size >= size
    {
        return t.clone();
    }
    let built = Arc::new(Tables::new(size.max(current.map_or(1 << 12, |t| 2 * t.size))));
    let mut slot = TABLES.write().unwrap_or_else(|e| e.into_inner());
    match slot.as_ref() {
        // Another thread built tables at least as large meanwhile.
        Some(t) if t.size >= built.size => t.clone(),
        _ => {
            *slot = Some(built.clone());
            built
        }
    }
}

/// Forward transform in place (decimation in frequency: natural order in, bit-reversed
/// out), values in [0, 2q) in and out.
fn forward(p: Prime, a: &mut [u64], tw: &[u64]) {
    let two_q = 2 * p.q;
    let mut h = a.len() / 2;
    while h >= 1 {
        let w = &tw[h..2 * h];
        for block in a.chunks_exact_mut(2 * h) {
            let (x, y) = block.split_at_mut(h);
            for ((x, y), &w) in x.iter_mut().zip(y.iter_mut()).zip(w) {
                let (u, v) = (*x, *y);
                *x = p.lazy(u + v);
                *y = p.mul(u + two_q - v, w);
            }
        }
        h /= 2;
    }
}

/// Inverse transform in place, unscaled (decimation in time: bit-reversed order in,
/// natural out), values in [0, 2q) in and out.
fn inverse(p: Prime, a: &mut [u64], tw: &[u64]) {
    let two_q = 2 * p.q;
    let mut h = 1;
    while h < a.len() {
        let w = &tw[h..2 * h];
        for block in a.chunks_exact_mut(2 * h) {
            let (x, y) = block.split_at_mut(h);
            for ((x, y), &w) in x.iter_mut().zip(y.iter_mut()).zip(w) {
                let (u, t) = (*x, p.mul(*y, w));
                *x = p.lazy(u + t);
                *y = p.lazy(u + two_q - t);
            }
        }
        h *= 2;
    }
}

/// A polynomial's transforms modulo the five primes, of one power-of-two size, scaled by
/// R⁻¹ (the residues are taken as x·R⁻¹, which costs less than x); products of spectra
/// carry R⁻³, which [`Spectrum::recover`] removes.
pub struct Spectrum {
    res: Vec<Vec<u64>>,
}

impl Spectrum {
    /// The transforms of `a` (at most `size` coefficients) at `size`, a power of two of
    /// at most 2^[`MAX_LOG`].
    pub fn of(a: &[F128], size: usize) -> Spectrum {
        assert!(size.is_power_of_two() && size <= 1 << MAX_LOG && a.len() <= size, "transform size");
        let t = tables(size);
        let res = (0..K)
            .into_par_iter()
            .map(|i| {
                let p = PRIMES[i];
                let mut v = vec![0u64; size];
                v.iter_mut().zip(a).for_each(|(d, &c)| *d = p.residue(c));
                forward(p, &mut v, &t.fwd[i]);
                v
            })
            .collect();
        Spectrum { res }
    }

    /// The transform of the product `a·b` (two transforms of one size).
    pub fn product(a: &Spectrum, b: &Spectrum) -> Spectrum {
        assert_eq!(a.res[0].len(), b.res[0].len(), "transforms of one size");
        let res = (0..K)
            .into_par_iter()
            .map(|i| {
                let p = PRIMES[i];
                a.res[i].iter().zip(&b.res[i]).map(|(&x, &y)| p.mul(x, y)).collect()
            })
            .collect();
        Spectrum { res }
    }

    /// Adds the transform of the product `a·b` (the same size) to this product's.
    pub fn add_product(&mut self, a: &Spectrum, b: &Spectrum) {
        assert!(a.res[0].len() == self.res[0].len() && b.res[0].len() == self.res[0].len(), "transforms of one size");
        self.res.par_iter_mut().enumerate().for_each(|(i, acc)| {
            let p = PRIMES[i];
            for ((s, &x), &y) in acc.iter_mut().zip(&a.res[i]).zip(&b.res[i]) {
                *s = p.lazy(*s + p.mul(x, y));
            }
        });
    }

    /// The first `len` coefficients of the product this is the transform of. Only for
    /// what [`product`](Self::product) and [`add_product`](Self::add_product) make: a
    /// plain transform carries another scale.
    pub fn recover(mut self, len: usize) -> Vec<F128> {
        let size = self.res[0].len();
        assert!(len <= size, "at most the transform's size");
        let (t, c) = (tables(size), crt());
        self.res.par_iter_mut().enumerate().for_each(|(i, v)| {
            let p = PRIMES[i];
            inverse(p, v, &t.inv[i]);
            let scale = c.scale[i][size.trailing_zeros() as usize];
            v[..len].iter_mut().for_each(|x| *x = p.canonical(p.mul(*x, scale)));
        });
        let mut out = vec![F128::ZERO; len];
        out.par_chunks_mut(1 << 12).enumerate().for_each(|(chunk, out)| {
            for (k, o) in out.iter_mut().enumerate() {
                let at = (chunk << 12) + k;
                *o = c.combine(std::array::from_fn(|i| self.res[i][at]));
            }
        });
        out
    }
}

/// The constants of recovery: `scale[i][log]` undoes an inverse transform's size 2^log
/// and the R⁻³ of a product (multiplying by it in Montgomery form is ·size⁻¹·R⁴·R⁻¹);
/// Garner's `inv[i][j] = q_j⁻¹·R mod q_i` (j < i) and `radix[i] = ∏_{j<i} q_j mod p` in
/// the field.
struct Crt {
    scale: [[u64; MAX_LOG as usize + 1]; K],
    inv: [[u64; K]; K],
    radix: [F128; K],
}

fn crt() -> &'static Crt {
    static CRT: OnceLock<Crt> = OnceLock::new();
    CRT.get_or_init(|| {
        let mut inv = [[0u64; K]; K];
        let mut radix = [F128::ONE; K];
        let mut scale = [[0u64; MAX_LOG as usize + 1]; K];
        for i in 0..K {
            let p = PRIMES[i];
            let r4 = p.pow(p.r1, 4);
            for (log, s) in scale[i].iter_mut().enumerate() {
                *s = p.mul_plain(p.pow(1 << log, p.q - 2), r4);
            }
            for j in 0..i {
                inv[i][j] = p.to_mont(p.pow(PRIMES[j].q % p.q, p.q - 2));
            }
            if i > 0 {
                radix[i] = radix[i - 1] * F128::reduce(PRIMES[i - 1].q as u128);
            }
        }
        Crt { scale, inv, radix }
    })
}

impl Crt {
    /// The field element of the integer below ∏ q_i with residues `r` (each canonical).
    #[inline]
    fn combine(&self, r: [u64; K]) -> F128 {
        let mut v = [0u64; K];
        let mut x = F128::ZERO;
        for i in 0..K {
            let p = PRIMES[i];
            let mut t = r[i];
            for (&vj, &inv) in v[..i].iter().zip(&self.inv[i]) {
                // v_j < q_j < 2·q_i (every prime is in [2^61, 2^62)), so this stays positive.
                t = p.mul(t + 2 * p.q - vj, inv);
            }
            v[i] = p.canonical(t);
            x = x + F128::reduce(v[i] as u128) * self.radix[i];
        }
        x
    }
}

/// `a·b`, of length `a.len() + b.len() − 1` (empty if either is).
pub fn mul(a: &[F128], b: &[F128]) -> Vec<F128> {
    if a.is_empty() || b.is_empty() {
        return Vec::new();
    }
    let len = a.len() + b.len() - 1;
    let size = len.next_power_of_two();
    Spectrum::product(&Spectrum::of(a, size), &Spectrum::of(b, size)).recover(len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::fp128::{Fp128, P, sample};

    fn is_prime(n: u64) -> bool {
        let p = Prime::new(n);
        let (mut d, mut s) = (n - 1, 0);
        while d % 2 == 0 {
            d /= 2;
            s += 1;
        }
        // Deterministic for 64-bit n with these bases.
        [2u64, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37].iter().all(|&a| {
            let mut x = p.pow(a, d);
            if x == 1 || x == n - 1 {
                return true;
            }
            (1..s).any(|_| {
                x = p.mul_plain(x, x);
                x == n - 1
            })
        })
    }

    #[test]
    fn the_moduli_are_primes_with_roots_of_order_2_25() {
        for (q, root) in MODULI {
            assert!(is_prime(q), "{q:#x} is prime");
            assert!((1u64 << 61..1u64 << 62).contains(&q), "{q:#x} is in [2^61, 2^62)");
            assert_eq!((q - 1) % (1 << MAX_LOG), 0);
            let p = Prime::new(q);
            assert_eq!(p.pow(root, 1 << (MAX_LOG - 1)), q - 1, "root^(2^24) = −1: order exactly 2^25");
            assert_eq!(q.wrapping_mul(p.neg_inv.wrapping_neg()), 1, "q·q⁻¹ = 1 mod 2^64");
        }
    }

    fn schoolbook(a: &[F128], b: &[F128]) -> Vec<F128> {
        crate::math::poly::mul(Fp128, a, b)
    }

    /// Products agree with the schoolbook product, at sizes around powers of two and with
    /// the largest coefficients (p − 1), where the integer product is largest.
    #[test]
    fn products_agree_with_schoolbook() {
        for (la, lb) in [(1, 1), (1, 7), (2, 2), (16, 17), (33, 64), (100, 300), (513, 511)] {
            let (a, b) = (sample(la, la as u128), sample(lb, 1 << 64 | lb as u128));
            assert_eq!(mul(&a, &b), schoolbook(&a, &b), "{la}×{lb}");
            let top = vec![F128::new(P - 1).unwrap(); la];
            let top_b = vec![F128::new(P - 1).unwrap(); lb];
            assert_eq!(mul(&top, &top_b), schoolbook(&top, &top_b), "(p−1)s {la}×{lb}");
        }
        assert!(mul(&[], &[F128::ONE]).is_empty());
    }

    /// a·b + c·d formed in the transform agrees with the two products added.
    #[test]
    fn sums_of_products_in_the_transform() {
        let (a, b, c, d) = (sample(40, 1), sample(50, 2), sample(45, 3), sample(44, 4));
        let mut s = Spectrum::product(&Spectrum::of(&a, 128), &Spectrum::of(&b, 128));
        s.add_product(&Spectrum::of(&c, 128), &Spectrum::of(&d, 128));
        let want: Vec<F128> = schoolbook(&a, &b)
            .iter()
            .zip(schoolbook(&c, &d).iter().chain([F128::ZERO; 2].iter()))
            .map(|(x, y)| *x + *y)
            .collect();
        assert_eq!(s.recover(89), want);
    }
}
