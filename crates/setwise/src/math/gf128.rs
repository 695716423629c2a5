//! GF(2^128) for VOLE and OKVS: RustCrypto's POLYVAL field (`polyval::hazmat`, RFC 8452
//! §3, the polynomial x^128 + x^127 + x^126 + x^121 + 1), constant time.
//!
//! POLYVAL's product is Montgomery's: `a ∘ b = a·b·x^-128`. Read every element `e` as
//! the representative of `e·x^-128` and `∘` is the field's multiplication, with
//! [`Gf128::ONE`] = x^128 mod p as its identity: the map is a field isomorphism, so
//! VOLE relations and linear algebra hold as in the plain representation. Addition is
//! XOR in both.
//!
//! `polyval`'s field element multiplies in portable constant-time software (its CLMUL
//! backend serves only the universal hash), ~10× slower than the instruction; on x86-64
//! with PCLMULQDQ the product is taken with it (module `clmul`) and reduced as POLYVAL
//! does, and the two are checked against each other.

use polyval::hazmat::FieldElement;
use std::ops::{Add, AddAssign, Mul, MulAssign};
use zeroize::Zeroize;

/// An element of GF(2^128) (in POLYVAL's Montgomery representation; see the module).
/// Laid out as its `u128` (the OKVS's vector loads read a slice of them as 64-bit lanes).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, Zeroize)]
#[repr(transparent)]
pub struct Gf128(pub u128);

impl std::fmt::Debug for Gf128 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Gf128({:#034x})", self.0)
    }
}

impl Gf128 {
    /// The additive identity.
    pub const ZERO: Self = Self(0);
    /// The multiplicative identity: x^128 mod p = x^127 + x^126 + x^121 + 1.
    pub const ONE: Self = Self((1 << 127) | (1 << 126) | (1 << 121) | 1);

    /// From 16 little-endian bytes (any 16 bytes are an element).
    pub fn from_bytes(b: [u8; 16]) -> Self {
        Self(u128::from_le_bytes(b))
    }

    /// The 16 little-endian bytes.
    pub fn to_bytes(self) -> [u8; 16] {
        self.0.to_le_bytes()
    }

    /// Two elements from 32 bytes (a message that carries two).
    pub fn pair_from_bytes(b: [u8; 32]) -> [Self; 2] {
        let (lo, hi) = b.split_at(16);
        [lo, hi].map(|h| Self::from_bytes(h.try_into().expect("16 bytes")))
    }

    /// Two elements as 32 bytes.
    pub fn pair_to_bytes(pair: [Self; 2]) -> [u8; 32] {
        let mut b = [0u8; 32];
        b[..16].copy_from_slice(&pair[0].to_bytes());
        b[16..].copy_from_slice(&pair[1].to_bytes());
        b
    }

    /// `self` to the power `e` (square and multiply).
    pub fn pow(self, mut e: u128) -> Self {
        let (mut acc, mut base) = (Self::ONE, self);
        while e > 0 {
            if e & 1 == 1 {
                acc *= base;
            }
            base *= base;
            e >>= 1;
        }
        acc
    }

    /// `self·x`, for x the field's generator (POLYVAL's polynomial is x's minimal
    /// polynomial, of degree 128, so x lies in no proper subfield): a shift and a
    /// reduction, without a branch on the element. In the Montgomery representation the
    /// element's representative is shifted, since (a·x)·x^-128 = (a·x^-128)·x.
    #[inline]
    pub fn mul_x(self) -> Self {
        // x^128 = x^127 + x^126 + x^121 + 1 modulo the polynomial: ONE's representative.
        let carry = 0u128.wrapping_sub(self.0 >> 127);
        Self((self.0 << 1) ^ (carry & Self::ONE.0))
    }

    /// The inverse (`None` for zero): self^(2^128 − 2).
    pub fn inverse(self) -> Option<Self> {
        (self != Self::ZERO).then(|| self.pow(u128::MAX - 1))
    }
}

impl Add for Gf128 {
    type Output = Self;
    #[inline]
    #[allow(clippy::suspicious_arithmetic_impl)] // addition in characteristic 2 is XOR
    fn add(self, rhs: Self) -> Self {
        Self(self.0 ^ rhs.0)
    }
}

impl AddAssign for Gf128 {
    #[inline]
    #[allow(clippy::suspicious_op_assign_impl)] // addition in characteristic 2 is XOR
    fn add_assign(&mut self, rhs: Self) {
        self.0 ^= rhs.0;
    }
}

impl Mul for Gf128 {
    type Output = Self;
    #[inline]
    fn mul(self, rhs: Self) -> Self {
        #[cfg(target_arch = "x86_64")]
        if clmul::available() {
            return Self(clmul::mul(self.0, rhs.0));
        }
        Self(soft_mul(self.0, rhs.0))
    }
}

impl MulAssign for Gf128 {
    #[inline]
    fn mul_assign(&mut self, rhs: Self) {
        *self = *self * rhs;
    }
}

/// The portable product: `polyval`'s constant-time software multiplication.
fn soft_mul(a: u128, b: u128) -> u128 {
    u128::from(FieldElement::from(a) * FieldElement::from(b))
}

/// POLYVAL's product with the carry-less multiply instruction. The crate's one use of
/// `unsafe` outside tests: calling a `target_feature` function once the feature is
/// detected, and a 16-byte store into a local array, behind the safe [`mul`](clmul::mul).
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod clmul {
    use std::arch::x86_64::{__m128i, _mm_clmulepi64_si128, _mm_set_epi64x, _mm_storeu_si128};

    /// Whether this CPU has PCLMULQDQ (detected once, then a cached flag).
    #[inline]
    pub(super) fn available() -> bool {
        std::arch::is_x86_feature_detected!("pclmulqdq")
    }

    /// `a ∘ b = a·b·x^-128` mod POLYVAL's polynomial. Callers check [`available`].
    #[inline]
    pub(super) fn mul(a: u128, b: u128) -> u128 {
        // SAFETY: only called once `available()` said the CPU has PCLMULQDQ (SSE2, which
        // the loads and stores need, is part of x86-64).
        let [v0, v1, v2, v3] = unsafe { product(a, b) };
        reduce(v0, v1, v2, v3)
    }

    /// The 256-bit carry-less product, 64-bit words from the lowest: schoolbook with
    /// four multiplications (a0·b0, a0·b1 + a1·b0, a1·b1).
    #[target_feature(enable = "pclmulqdq")]
    unsafe fn product(a: u128, b: u128) -> [u64; 4] {
        let split = |x: u128| _mm_set_epi64x((x >> 64) as i64, x as i64);
        let (a, b) = (split(a), split(b));
        let words = |r: __m128i| {
            let mut out = [0u64; 2];
            // SAFETY: `out` is 16 writable bytes; the store is unaligned.
            unsafe { _mm_storeu_si128(out.as_mut_ptr().cast(), r) };
            out
        };
        let lo = words(_mm_clmulepi64_si128(a, b, 0x00));
        let hi = words(_mm_clmulepi64_si128(a, b, 0x11));
        let m0 = words(_mm_clmulepi64_si128(a, b, 0x10));
        let m1 = words(_mm_clmulepi64_si128(a, b, 0x01));
        [lo[0], lo[1] ^ m0[0] ^ m1[0], hi[0] ^ m0[1] ^ m1[1], hi[1]]
    }

    /// Montgomery reduction by x^128 for POLYVAL's polynomial, two 64-bit folds.
    #[inline]
    fn reduce(v0: u64, mut v1: u64, mut v2: u64, mut v3: u64) -> u128 {
        v2 ^= v0 ^ (v0 >> 1) ^ (v0 >> 2) ^ (v0 >> 7);
        v1 ^= (v0 << 63) ^ (v0 << 62) ^ (v0 << 57);
        v3 ^= v1 ^ (v1 >> 1) ^ (v1 >> 2) ^ (v1 >> 7);
        v2 ^= (v1 << 63) ^ (v1 << 62) ^ (v1 << 57);
        u128::from(v2) | (u128::from(v3) << 64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngExt;

    #[test]
    fn mul_x_is_the_product_with_x() {
        // x's representative is x·x^128 = x^129 mod p.
        let x = Gf128(plain_mul(Gf128::ONE.0, 2));
        assert_eq!(Gf128::ONE.mul_x(), x);
        let mut rng = rand::rng();
        for a in [0, 1, 1 << 127, u128::MAX].into_iter().chain((0..200).map(|_| rng.random::<u128>())) {
            assert_eq!(Gf128(a).mul_x(), Gf128(a) * x, "{a:#x}");
        }
    }

    /// The second computation: carry-less schoolbook product reduced bit by bit modulo
    /// x^128 + x^127 + x^126 + x^121 + 1 (bit i is the coefficient of x^i).
    fn plain_mul(a: u128, b: u128) -> u128 {
        let (mut lo, mut hi) = (0u128, 0u128);
        for i in 0..128 {
            if (b >> i) & 1 == 1 {
                lo ^= a << i;
                if i > 0 {
                    hi ^= a >> (128 - i);
                }
            }
        }
        // x^(128+k) = x^k·(x^127 + x^126 + x^121 + 1), from the top bit down.
        for k in (0..128).rev() {
            if (hi >> k) & 1 == 1 {
                hi ^= 1 << k;
                for shift in [127usize, 126, 121, 0] {
                    let d = k + shift;
                    if d >= 128 {
                        hi ^= 1 << (d - 128);
                    } else {
                        lo ^= 1 << d;
                    }
                }
            }
        }
        lo
    }

    fn random(n: usize) -> Vec<Gf128> {
        let mut rng = rand::rng();
        (0..n).map(|_| Gf128(rng.random())).collect()
    }

    #[test]
    fn the_product_is_the_plain_product_in_montgomery_form() {
        // a ∘ b = a·b·x^-128, so (a ∘ b)·x^128 = a·b, with x^128 mod p = ONE's bits.
        for w in random(200).chunks(2) {
            let (a, b) = (w[0], w[1]);
            assert_eq!(plain_mul((a * b).0, Gf128::ONE.0), plain_mul(a.0, b.0), "{a:?} {b:?}");
        }
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_instruction_and_the_software_agree() {
        if !clmul::available() {
            return; // nothing to compare on this CPU
        }
        let edges = [0, 1, u128::MAX, 1 << 127, u64::MAX as u128, Gf128::ONE.0];
        for &a in &edges {
            for &b in &edges {
                assert_eq!(clmul::mul(a, b), soft_mul(a, b), "{a:#x} {b:#x}");
            }
        }
        for w in random(2000).chunks(2) {
            assert_eq!(clmul::mul(w[0].0, w[1].0), soft_mul(w[0].0, w[1].0), "{w:?}");
        }
    }

    #[test]
    fn field_laws_hold() {
        for w in random(300).chunks(3) {
            let (a, b, c) = (w[0], w[1], w[2]);
            assert_eq!(a * Gf128::ONE, a);
            assert_eq!(a * b, b * a);
            assert_eq!((a * b) * c, a * (b * c));
            assert_eq!(a * (b + c), a * b + a * c);
            assert_eq!(a * a.inverse().unwrap(), Gf128::ONE);
            assert_eq!(a + a, Gf128::ZERO);
        }
        assert_eq!(Gf128::ZERO.inverse(), None);
        let a = random(1)[0];
        assert_eq!(Gf128::from_bytes(a.to_bytes()), a);
    }
}
