//! Arithmetic modulo a word-sized prime, and polynomials over it.

/// `a·b mod m` for `a, b < m`. Moduli below 2^32 (every plaintext modulus here) stay in
/// u64 arithmetic: a 128-bit division is a slow library call, and it dominated
/// interpolating a sender database.
#[inline]
pub fn mul_mod(a: u64, b: u64, m: u64) -> u64 {
    if m <= 1 << 32 { (a * b) % m } else { ((a as u128 * b as u128) % m as u128) as u64 }
}

/// `a^e mod m`.
pub fn pow_mod(mut a: u64, mut e: u64, m: u64) -> u64 {
    let mut r = 1 % m;
    a %= m;
    debug_assert!(m > 0);
    while e > 0 {
        if e & 1 == 1 {
            r = mul_mod(r, a, m);
        }
        a = mul_mod(a, a, m);
        e >>= 1;
    }
    r
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
    let (mut d, mut s) = (n - 1, 0);
    while d.is_multiple_of(2) {
        d /= 2;
        s += 1;
    }
    'witness: for a in [2u64, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37] {
        let mut x = pow_mod(a, d, n);
        if x == 1 || x == n - 1 {
            continue;
        }
        for _ in 1..s {
            x = mul_mod(x, x, n);
            if x == n - 1 {
                continue 'witness;
            }
        }
        return false;
    }
    true
}

/// Coefficients (lowest first) of `∏ (z − r)` over the roots, modulo the prime `m`:
/// a monic polynomial of degree `roots.len()`.
pub fn from_roots(roots: &[u64], m: u64) -> Vec<u64> {
    let mut c = Vec::with_capacity(roots.len() + 1);
    c.push(1 % m);
    for &r in roots {
        let neg = (m - r % m) % m;
        c.push(0);
        for i in (0..c.len()).rev() {
            let lower = if i > 0 { c[i - 1] } else { 0 };
            c[i] = (mul_mod(c[i], neg, m) + lower) % m;
        }
    }
    c
}

/// Evaluates coefficients (lowest first) at `x` modulo `m` (Horner).
pub fn eval(coeffs: &[u64], x: u64, m: u64) -> u64 {
    let x = x % m;
    coeffs.iter().rev().fold(0, |acc, &c| (mul_mod(acc, x, m) + c) % m)
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
    fn roots_vanish_and_nothing_else_does() {
        let m = 1032193;
        let roots = [5, 17, 1032192, 99];
        let c = from_roots(&roots, m);
        assert_eq!(c.len(), 5);
        assert_eq!(c[4], 1);
        for r in roots {
            assert_eq!(eval(&c, r, m), 0);
        }
        for x in [0, 1, 6, 100, 1000] {
            let direct = roots.iter().fold(1, |acc, &r| mul_mod(acc, (x + m - r) % m, m));
            assert_eq!(eval(&c, x, m), direct);
        }
        assert_eq!(from_roots(&[], m), vec![1]);
    }
}
