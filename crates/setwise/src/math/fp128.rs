//! The prime field GF(2^128 − 159), compact PSI's field; polynomials over it are in
//! [`poly`](super::poly).
//!
//! 2^128 − 159 is the largest prime below 2^128, so a uniformly random 128-bit string is a
//! field element except with probability 2^-120.6, and reduction is one fold of the high
//! half times 159. Elements are kept canonical (< p).

use super::field::PrimeField;

/// The modulus p = 2^128 − 159.
pub const P: u128 = u128::MAX - 158;
const C: u128 = 159; // 2^128 ≡ C (mod p)

/// An element of GF(p), canonical.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct F128(u128);

impl F128 {
    /// Zero.
    pub const ZERO: F128 = F128(0);
    /// One.
    pub const ONE: F128 = F128(1);

    /// `v` if it is canonical (< p).
    pub fn new(v: u128) -> Option<Self> {
        (v < P).then_some(Self(v))
    }

    /// `v mod p`.
    pub fn reduce(v: u128) -> Self {
        Self(if v >= P { v - P } else { v })
    }

    /// The canonical value.
    pub fn value(self) -> u128 {
        self.0
    }

    /// Little-endian bytes.
    pub fn to_bytes(self) -> [u8; 16] {
        self.0.to_le_bytes()
    }

    /// The element of little-endian `bytes`, if canonical.
    pub fn from_bytes(bytes: [u8; 16]) -> Option<Self> {
        Self::new(u128::from_le_bytes(bytes))
    }

    /// `self^e`.
    pub fn pow(self, mut e: u128) -> Self {
        let (mut base, mut acc) = (self, F128::ONE);
        while e > 0 {
            if e & 1 == 1 {
                acc = acc * base;
            }
            base = base * base;
            e >>= 1;
        }
        acc
    }

    /// The inverse (Fermat); `None` for zero.
    pub fn inv(self) -> Option<Self> {
        (self.0 != 0).then(|| self.pow(P - 2))
    }
}

impl std::ops::Add for F128 {
    type Output = F128;
    #[inline]
    fn add(self, o: F128) -> F128 {
        let (s, carry) = self.0.overflowing_add(o.0);
        // On carry the true sum is s + 2^128 ≡ s + C, and s + C < p since the sum < 2p.
        F128(if carry {
            s + C
        } else if s >= P {
            s - P
        } else {
            s
        })
    }
}

impl std::ops::Sub for F128 {
    type Output = F128;
    #[inline]
    fn sub(self, o: F128) -> F128 {
        // a − b + p = (a − b + 2^128) − C, which is ≥ C when a < b.
        F128(if self.0 >= o.0 { self.0 - o.0 } else { self.0.wrapping_sub(o.0).wrapping_sub(C) })
    }
}

impl std::ops::Neg for F128 {
    type Output = F128;
    fn neg(self) -> F128 {
        F128::ZERO - self
    }
}

impl std::ops::Mul for F128 {
    type Output = F128;
    #[inline]
    fn mul(self, o: F128) -> F128 {
        let (a0, a1) = (self.0 as u64 as u128, self.0 >> 64);
        let (b0, b1) = (o.0 as u64 as u128, o.0 >> 64);
        let (ll, lh, hl, hh) = (a0 * b0, a0 * b1, a1 * b0, a1 * b1);
        let (mid, c1) = lh.overflowing_add(hl);
        let (lo, c2) = ll.overflowing_add(mid << 64);
        let hi = hh + (mid >> 64) + ((c1 as u128) << 64) + c2 as u128;
        F128(fold(hi, lo))
    }
}

/// hi·2^128 + lo mod p, as hi·C + lo folded twice.
#[inline]
fn fold(hi: u128, lo: u128) -> u128 {
    let (t0, t1) = ((hi as u64 as u128) * C, (hi >> 64) * C); // each < 2^72; t1 has weight 2^64
    let (s, c1) = lo.overflowing_add(t0);
    let (s, c2) = s.overflowing_add(t1 << 64);
    let top = (t1 >> 64) + c1 as u128 + c2 as u128; // weight 2^128, < 2^9
    let (s, c3) = s.overflowing_add(top * C);
    let s = if c3 { s + C } else { s }; // after a wrap s is tiny, so this cannot wrap
    if s >= P { s - P } else { s }
}

/// `n` elements from a fixed generator seeded by `seed`, for tests.
#[cfg(test)]
pub(crate) fn sample(n: usize, seed: u128) -> Vec<F128> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(0x2360_ed05_1fc6_5da4_4385_df64_9fcc_f645).wrapping_add(0x5851_f42d_4c95_7f2d);
            F128::reduce(s)
        })
        .collect()
}

/// The field GF(2^128 − 159) itself, for the polynomial code ([`poly`](super::poly)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Fp128;

impl PrimeField for Fp128 {
    type Elem = F128;
    type Wide = F128;

    fn one(self) -> F128 {
        F128::ONE
    }

    fn elem(self, v: u64) -> F128 {
        F128(v as u128)
    }

    #[inline]
    fn add(self, a: F128, b: F128) -> F128 {
        a + b
    }

    #[inline]
    fn sub(self, a: F128, b: F128) -> F128 {
        a - b
    }

    #[inline]
    fn mul(self, a: F128, b: F128) -> F128 {
        a * b
    }

    fn inv(self, a: F128) -> Option<F128> {
        a.inv()
    }

    fn wide_capacity(self) -> usize {
        usize::MAX
    }

    #[inline]
    fn wide_mul_add(self, acc: F128, a: F128, b: F128) -> F128 {
        a * b + acc
    }

    fn wide_reduce(self, w: F128) -> F128 {
        w
    }

    fn widen(self, a: F128) -> F128 {
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A second multiplication: double-and-add over the bits of `b`.
    fn slow_mul(a: F128, b: F128) -> F128 {
        let mut acc = F128::ZERO;
        for bit in (0..128).rev() {
            acc = acc + acc;
            if (b.0 >> bit) & 1 == 1 {
                acc = acc + a;
            }
        }
        acc
    }

    fn elem() -> impl Strategy<Value = F128> {
        prop_oneof![
            any::<u128>().prop_map(F128::reduce),
            (0u128..1000).prop_map(|d| F128(P - 1 - d)),
            (0u128..1000).prop_map(F128),
        ]
    }

    proptest! {
        #[test]
        fn mul_agrees_with_double_and_add(a in elem(), b in elem()) {
            prop_assert_eq!(a * b, slow_mul(a, b));
            prop_assert!((a * b).0 < P);
        }

        #[test]
        fn add_sub_are_inverse(a in elem(), b in elem()) {
            prop_assert_eq!(a + b - b, a);
            prop_assert_eq!(a - b + b, a);
            prop_assert!((a + b).0 < P && (a - b).0 < P);
        }
    }

    #[test]
    fn known_products() {
        // (p − 1)² ≡ 1, 2^64 · 2^64 = 2^128 ≡ 159, (2^127)·2 ≡ 159.
        assert_eq!(F128(P - 1) * F128(P - 1), F128::ONE);
        assert_eq!(F128(1 << 64) * F128(1 << 64), F128(159));
        assert_eq!(F128(1 << 127) * F128(2), F128(159));
        assert_eq!(F128(P - 1) + F128(1), F128::ZERO);
        assert_eq!(F128::reduce(u128::MAX), F128(158));
    }

    #[test]
    fn fermat_and_inverses() {
        for v in [2u128, 3, 159, 1 << 100, P - 2] {
            let x = F128(v);
            assert_eq!(x.pow(P - 1), F128::ONE, "p is prime, so x^(p−1) = 1");
            assert_eq!(x * x.inv().unwrap(), F128::ONE);
        }
        assert_eq!(F128::ZERO.inv(), None);
        let mut v: Vec<F128> = (1..50u128).map(|i| F128(i * 0x1234_5678_9abc_def1)).collect();
        let orig = v.clone();
        Fp128.batch_invert(&mut v).unwrap();
        assert!(v.iter().zip(&orig).all(|(a, b)| *a * *b == F128::ONE));
        let mut z = vec![F128::ONE, F128::ZERO];
        assert_eq!(Fp128.batch_invert(&mut z), Err(1));
    }
}
