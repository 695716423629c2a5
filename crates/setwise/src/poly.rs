//! Arithmetic modulo a word-sized prime, and polynomials over it.

/// `a·b mod m` for `a, b < m`. Moduli below 2^32 (every plaintext modulus here) stay in
/// u64 arithmetic: a 128-bit division is a slow library call, and it dominated
/// interpolating a sender database.
#[inline]
pub fn mul_mod(a: u64, b: u64, m: u64) -> u64 {
    if m <= 1 << 32 { (a * b) % m } else { ((a as u128 * b as u128) % m as u128) as u64 }
}

/// `(a·b + c) mod m` for `a, b, c < m`, with one reduction when it fits in u64.
#[inline]
pub fn mul_add_mod(a: u64, b: u64, c: u64, m: u64) -> u64 {
    if m < 1 << 31 { (a * b + c) % m } else { (mul_mod(a, b, m) + c) % m }
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
            c[i] = mul_add_mod(c[i], neg, lower, m);
        }
    }
    c
}

/// `a⁻¹ mod m` for prime `m` and `a ≠ 0` (Fermat).
pub fn inv_mod(a: u64, m: u64) -> u64 {
    pow_mod(a, m - 2, m)
}

/// Interpolation over the distinct points `xs` modulo the prime `m`: for each value
/// list in `ys`, the coefficients (lowest first, `xs.len()` of them) of the polynomial of
/// degree < `xs.len()` through `(xs[j], ys[j])`. Lagrange form from `M(x) = ∏(x − x_j)`:
/// `L = Σ_j y_j·w_j·M(x)/(x − x_j)` with `w_j = 1/M'(x_j)` (one batched inversion), so
/// all value lists share the O(n²) work on the points. Returns `None` if two points are
/// equal.
pub fn interpolate(xs: &[u64], ys: &[&[u64]], m: u64) -> Option<Vec<Vec<u64>>> {
    let n = xs.len();
    let mut out = vec![vec![0u64; n]; ys.len()];
    if n == 0 {
        return Some(out);
    }
    // M'(x_j) = ∏_{i≠j} (x_j − x_i); invert all n at once (Montgomery's trick).
    let d: Vec<u64> =
        (0..n).map(|j| (0..n).filter(|&i| i != j).fold(1, |acc, i| mul_mod(acc, (xs[j] + m - xs[i]) % m, m))).collect();
    if d.contains(&0) {
        return None;
    }
    let mut prefix = Vec::with_capacity(n);
    let mut acc = 1;
    for &v in &d {
        prefix.push(acc);
        acc = mul_mod(acc, v, m);
    }
    let mut inv = inv_mod(acc, m);
    let mut w = vec![0u64; n];
    for j in (0..n).rev() {
        w[j] = mul_mod(inv, prefix[j], m);
        inv = mul_mod(inv, d[j], m);
    }
    let big = from_roots(xs, m); // degree n, monic
    let mut q = vec![0u64; n];
    // With m < 2^24 each product is < 2^48, so n ≤ 2^15 of them sum without overflow and
    // are reduced once at the end (the inner loop is the cost of building labels).
    let lazy = m < 1 << 24 && n <= 1 << 15;
    for j in 0..n {
        // q = M(x) / (x − x_j) by synthetic division (exact: x_j is a root).
        let mut carry = 0;
        for k in (0..n).rev() {
            carry = mul_add_mod(carry, xs[j], big[k + 1], m);
            q[k] = carry;
        }
        for (o, y) in out.iter_mut().zip(ys) {
            let c = mul_mod(y[j] % m, w[j], m);
            if lazy {
                o.iter_mut().zip(&q).for_each(|(ok, &qk)| *ok += c * qk);
            } else {
                o.iter_mut().zip(&q).for_each(|(ok, &qk)| *ok = (*ok + mul_mod(c, qk, m)) % m);
            }
        }
    }
    if lazy {
        out.iter_mut().flatten().for_each(|v| *v %= m);
    }
    Some(out)
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
    fn interpolation_passes_through_every_point() {
        let m = 2056193;
        for n in [0usize, 1, 2, 7, 64] {
            let xs: Vec<u64> = (0..n as u64).map(|i| (i * 7919 + 3) % m).collect();
            let a: Vec<u64> = (0..n as u64).map(|i| (i * i + 11) % m).collect();
            let b: Vec<u64> = (0..n as u64).map(|i| m - 1 - i).collect();
            let polys = interpolate(&xs, &[&a, &b], m).unwrap();
            for (poly, ys) in polys.iter().zip([&a, &b]) {
                assert_eq!(poly.len(), n);
                for (x, y) in xs.iter().zip(ys.iter()) {
                    assert_eq!(eval(poly, *x, m), *y);
                }
            }
        }
        assert!(interpolate(&[5, 5], &[&[1, 2]], m).is_none());
        // A modulus above the lazy-reduction bound takes the careful path.
        let big_m = 4611686018427387847;
        let xs = [3u64, 99, big_m - 5];
        let ys = [1u64, big_m - 1, 77];
        let p = &interpolate(&xs, &[&ys], big_m).unwrap()[0];
        assert!(xs.iter().zip(&ys).all(|(x, y)| eval(p, *x, big_m) == *y));
        assert_eq!(mul_mod(inv_mod(12345, m), 12345, m), 1);
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
