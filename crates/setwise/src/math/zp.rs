//! Arithmetic modulo a word-sized prime ([`Zp`]): the BFV plaintext moduli the FHE
//! protocols compute in, with Barrett reduction below 2^32 (every plaintext modulus
//! here), and a deterministic primality test. Polynomials over it are in
//! [`poly`](super::poly).

use super::field::PrimeField;

/// The field of integers modulo a prime `m`, with a precomputed reciprocal: below 2^32 a
/// reduction is a multiply-high and a subtraction instead of a 64-bit division, which is
/// what the interpolation loops spend their time on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Zp {
    m: u64,
    /// `⌊(2^64 − 1)/m⌋`, or 0 when `m` does not fit the fast path.
    r: u64,
}

/// Moduli below this bound reduce sums of up to [`LAZY_TERMS`] products once, at the
/// end: each product is below 2^48, so 2^15 of them stay below 2^63.
const LAZY_BELOW: u64 = 1 << 24;
/// Products summed before a reduction, below [`LAZY_BELOW`].
const LAZY_TERMS: usize = 1 << 15;

impl Zp {
    /// The integers modulo `m > 1` (prime for inverses to exist).
    pub fn new(m: u64) -> Self {
        Self { m, r: if m <= 1 << 32 { u64::MAX / m } else { 0 } }
    }

    /// The modulus.
    pub fn modulus(self) -> u64 {
        self.m
    }

    /// `x mod m` for any `x` when `m ≤ 2^32` (Barrett: the quotient estimate is at most
    /// one short, so one conditional subtraction finishes).
    #[inline]
    fn reduce(self, x: u64) -> u64 {
        if self.r == 0 {
            return x % self.m;
        }
        let q = ((x as u128 * self.r as u128) >> 64) as u64;
        let y = x - q * self.m;
        if y >= self.m { y - self.m } else { y }
    }

    /// `(a·b + c) mod m` for `a, b, c < m`.
    #[inline]
    pub fn mul_add(self, a: u64, b: u64, c: u64) -> u64 {
        if self.r != 0 {
            // For m ≤ 2^32, a·b + c ≤ m(m − 1) < 2^64.
            self.reduce(a * b + c)
        } else {
            ((a as u128 * b as u128 + c as u128) % self.m as u128) as u64
        }
    }

    /// `a·b mod m` for `a, b < m`.
    #[inline]
    pub fn mul(self, a: u64, b: u64) -> u64 {
        self.mul_add(a, b, 0)
    }

    /// `a^e mod m` (square and multiply).
    pub fn pow(self, a: u64, mut e: u64) -> u64 {
        let (mut r, mut a) = (1 % self.m, a % self.m);
        while e > 0 {
            if e & 1 == 1 {
                r = self.mul(r, a);
            }
            a = self.mul(a, a);
            e >>= 1;
        }
        r
    }

    /// `a⁻¹` for prime `m` and `a ≠ 0` (Fermat: `a^(m−2)`).
    pub fn inv(self, a: u64) -> u64 {
        self.pow(a, self.m - 2)
    }
}

impl PrimeField for Zp {
    type Elem = u64;
    type Wide = u64;

    fn one(self) -> u64 {
        1 % self.m
    }

    fn elem(self, v: u64) -> u64 {
        self.reduce(v)
    }

    #[inline]
    fn add(self, a: u64, b: u64) -> u64 {
        let s = a.wrapping_add(b);
        if s >= self.m || s < a { s.wrapping_sub(self.m) } else { s }
    }

    #[inline]
    fn sub(self, a: u64, b: u64) -> u64 {
        if a >= b { a - b } else { a.wrapping_sub(b).wrapping_add(self.m) }
    }

    #[inline]
    fn mul(self, a: u64, b: u64) -> u64 {
        Zp::mul(self, a, b)
    }

    #[inline]
    fn mul_add(self, a: u64, b: u64, c: u64) -> u64 {
        Zp::mul_add(self, a, b, c)
    }

    fn inv(self, a: u64) -> Option<u64> {
        (a != 0).then(|| Zp::inv(self, a))
    }

    fn wide_capacity(self) -> usize {
        if self.m < LAZY_BELOW { LAZY_TERMS } else { 1 }
    }

    #[inline]
    fn wide_mul_add(self, acc: u64, a: u64, b: u64) -> u64 {
        if self.m < LAZY_BELOW { acc + a * b } else { Zp::mul_add(self, a, b, acc) }
    }

    fn wide_mul_add_slice(self, acc: &mut [u64], a: u64, b: &[u64]) {
        if self.m < LAZY_BELOW {
            // Both factors are below 2^24: as 32-bit operands widened to 64, the products
            // are the vector unit's 32×32→64 multiply (four or eight per instruction).
            let a = a as u32 as u64;
            acc.iter_mut().zip(b).for_each(|(w, &x)| *w += a * (x as u32 as u64));
        } else {
            acc.iter_mut().zip(b).for_each(|(w, &x)| *w = Zp::mul_add(self, a, x, *w));
        }
    }

    fn wide_reduce(self, w: u64) -> u64 {
        self.reduce(w)
    }

    fn widen(self, a: u64) -> u64 {
        a
    }
}

/// Deterministic Miller–Rabin for 64-bit integers.
pub fn is_prime(n: u64) -> bool {
    if n < 2 {
        return false;
    }
    for p in [2u64, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37] {
        if n.is_multiple_of(p) {
            return n == p;
        }
    }
    let z = Zp::new(n);
    let (mut d, mut s) = (n - 1, 0);
    while d.is_multiple_of(2) {
        d /= 2;
        s += 1;
    }
    'witness: for a in [2u64, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37] {
        let mut x = z.pow(a, d);
        if x == 1 || x == n - 1 {
            continue;
        }
        for _ in 1..s {
            x = z.mul(x, x);
            if x == n - 1 {
                continue 'witness;
            }
        }
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primes() {
        let known = [2u64, 3, 65537, 1032193, 4611686018427387847];
        assert!(known.iter().all(|&p| is_prime(p)));
        assert!(![0u64, 1, 4, 561, 1032195, 4611686018427387849].iter().any(|&n| is_prime(n)));
    }

    #[test]
    fn arithmetic_matches_u128_division() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for m in [2u64, 3, 40961, 2056193, (1 << 31) - 1, (1 << 32) - 5, 1 << 32, (1 << 61) - 1, u64::MAX - 58] {
            let z = Zp::new(m);
            let wide = |v: u128| (v % m as u128) as u64;
            for _ in 0..10_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let (a, b, c) = (x % m, (x >> 17) % m, (x >> 5) % m);
                assert_eq!(z.mul_add(a, b, c), wide(a as u128 * b as u128 + c as u128), "m={m}");
                assert_eq!(PrimeField::add(z, a, b), wide(a as u128 + b as u128), "m={m}");
                assert_eq!(PrimeField::sub(z, a, b), wide(a as u128 + m as u128 - b as u128), "m={m}");
                assert_eq!(z.elem(x), x % m);
            }
            let top = m - 1;
            assert_eq!(z.mul_add(top, top, top), wide(top as u128 * top as u128 + top as u128));
        }
        let z = Zp::new(2056193);
        assert_eq!(z.mul(z.inv(12345), 12345), 1);
        assert_eq!(PrimeField::inv(z, 0), None);
    }

    #[test]
    fn lazy_sums_reduce_to_the_same_element() {
        let z = Zp::new(40961);
        let terms: Vec<(u64, u64)> = (0..z.wide_capacity() as u64).map(|i| (40960 - i % 7, 40960 - i % 11)).collect();
        let wide = terms.iter().fold(z.widen(5), |acc, &(a, b)| z.wide_mul_add(acc, a, b));
        let exact = terms.iter().fold(5, |acc, &(a, b)| z.mul_add(a, b, acc));
        assert_eq!(z.wide_reduce(wide), exact);
    }
}
