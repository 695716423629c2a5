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

/// A modulus with a precomputed reciprocal: below 2^32 (every plaintext modulus here) a
/// reduction is a multiply-high and a subtraction instead of a 64-bit division, which is
/// what the interpolation loops spend their time on.
#[derive(Debug, Clone, Copy)]
pub struct Modulus {
    m: u64,
    /// `⌊(2^64 − 1)/m⌋`, or 0 when `m` does not fit the fast path.
    r: u64,
}

impl Modulus {
    /// The modulus `m > 1`.
    pub fn new(m: u64) -> Self {
        Self { m, r: if m <= 1 << 32 { u64::MAX / m } else { 0 } }
    }

    /// `x mod m` for any `x` when `m ≤ 2^32` (Barrett: the quotient estimate is at most
    /// one short, so one conditional subtraction finishes).
    #[inline]
    fn reduce(self, x: u64) -> u64 {
        let q = ((x as u128 * self.r as u128) >> 64) as u64;
        let y = x - q * self.m;
        if y >= self.m { y - self.m } else { y }
    }

    /// `(a·b + c) mod m` for `a, b, c < m`.
    #[inline]
    pub fn mul_add(self, a: u64, b: u64, c: u64) -> u64 {
        // For m ≤ 2^32, a·b + c ≤ m(m − 1) < 2^64.
        if self.r != 0 { self.reduce(a * b + c) } else { mul_add_mod(a, b, c, self.m) }
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

    /// `Σ` of coefficients (lowest first) times powers of `x` (Horner).
    fn eval(self, coeffs: &[u64], x: u64) -> u64 {
        let x = x % self.m;
        coeffs.iter().rev().fold(0, |acc, &c| self.mul_add(acc, x, c))
    }
}

/// `a^e mod m` for `m > 0`.
pub fn pow_mod(a: u64, e: u64, m: u64) -> u64 {
    Modulus::new(m).pow(a, e)
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
    let md = Modulus::new(m);
    let mut c = vec![0; roots.len() + 1];
    c[0] = 1 % m;
    for (d, &r) in roots.iter().enumerate() {
        mul_linear(&mut c[..d + 2], r, md);
    }
    c
}

/// Multiplies `c` (lowest first, degree below `c.len() − 1`) by `(z − r)` in place.
fn mul_linear(c: &mut [u64], r: u64, md: Modulus) {
    let neg = (md.m - r % md.m) % md.m;
    for i in (0..c.len()).rev() {
        let lower = if i > 0 { c[i - 1] } else { 0 };
        c[i] = md.mul_add(c[i], neg, lower);
    }
}

/// The degree of a monic (nonzero) polynomial: the index of its last nonzero coefficient.
fn degree(c: &[u64]) -> usize {
    c.iter().rposition(|&v| v != 0).unwrap_or(0)
}

/// Adds the point `x` to an interpolation kept incrementally, in O(d) per polynomial
/// instead of redoing the O(d²) interpolation. `roots` is `∏(z − x_j)` over the current
/// `d` points (monic); `polys[p]` is the polynomial of degree < `d` through
/// `(x_j, y_pj)`, zero-padded to `roots.len()`. Afterwards `roots` has the root `x` and
/// each `polys[p]` also passes through `(x, ys[p])`: `P + (y − P(x))/M(x) · M`, the same
/// coefficients as interpolating all points anew. `scratch` is reused between calls.
/// Returns `None` (and changes nothing) if `x` is already a point or the slices have no
/// room for degree `d + 1`.
pub fn add_point(
    roots: &mut [u64],
    polys: &mut [&mut [u64]],
    x: u64,
    ys: &[u64],
    m: u64,
    scratch: &mut Vec<u64>,
) -> Option<()> {
    let md = Modulus::new(m);
    let d = degree(roots);
    if d + 1 >= roots.len() || polys.iter().any(|p| p.len() < roots.len()) {
        return None;
    }
    let x = x % m;
    // Horner on M and every P at once: independent chains keep the multiplier busy.
    scratch.clear();
    scratch.resize(polys.len() + 1, 0);
    let (mx, px) = scratch.split_first_mut().expect("one value for M");
    for i in (0..=d).rev() {
        *mx = md.mul_add(*mx, x, roots[i]);
        for (v, p) in px.iter_mut().zip(polys.iter()) {
            // P has degree < d: its coefficient d is zero.
            *v = md.mul_add(*v, x, p[i]);
        }
    }
    if *mx == 0 {
        return None;
    }
    let inv = md.inv(*mx);
    for ((p, &y), &v) in polys.iter_mut().zip(ys).zip(px.iter()) {
        let s = md.mul((y % m + m - v) % m, inv);
        p[..=d].iter_mut().zip(&roots[..=d]).for_each(|(pi, &ri)| *pi = md.mul_add(s, ri, *pi));
    }
    mul_linear(&mut roots[..d + 2], x, md);
    Some(())
}

/// Removes the point `x` from an interpolation kept as in [`add_point`]: `M ← M/(z − x)`
/// by synthetic division, and `P ← P − P_{d−1}·M`, which drops `P`'s degree below `d − 1`
/// and keeps its values at the other points (the same coefficients as interpolating them
/// anew). `scratch` is reused between calls. Returns `None` (and changes nothing) if `x`
/// is not a root.
pub fn remove_point(roots: &mut [u64], polys: &mut [&mut [u64]], x: u64, m: u64, scratch: &mut Vec<u64>) -> Option<()> {
    let md = Modulus::new(m);
    let d = degree(roots);
    if d == 0 {
        return None;
    }
    let x = x % m;
    scratch.clear();
    scratch.resize(d, 0);
    let mut carry = 0;
    for i in (1..=d).rev() {
        carry = md.mul_add(carry, x, roots[i]);
        scratch[i - 1] = carry;
    }
    if md.mul_add(carry, x, roots[0]) != 0 {
        return None;
    }
    for p in polys.iter_mut() {
        let c = (m - p[d - 1] % m) % m;
        p[..d].iter_mut().zip(scratch.iter()).for_each(|(pi, &qi)| *pi = md.mul_add(c, qi, *pi));
    }
    roots[..d].copy_from_slice(scratch);
    roots[d] = 0;
    Some(())
}

/// `a⁻¹ mod m` for prime `m` and `a ≠ 0` (Fermat).
pub fn inv_mod(a: u64, m: u64) -> u64 {
    Modulus::new(m).inv(a)
}

/// Interpolation over the distinct points `xs` modulo the prime `m`: for each value
/// list in `ys`, the coefficients (lowest first, `xs.len()` of them) of the polynomial of
/// degree < `xs.len()` through `(xs[j], ys[j])`. Lagrange form from `M(x) = ∏(x − x_j)`:
/// `L = Σ_j y_j·w_j·M(x)/(x − x_j)` with `w_j = 1/M'(x_j)` (one batched inversion), so
/// all value lists share the O(n²) work on the points. Returns `None` if two points are
/// equal.
pub fn interpolate(xs: &[u64], ys: &[&[u64]], m: u64) -> Option<Vec<Vec<u64>>> {
    let md = Modulus::new(m);
    let n = xs.len();
    let mut out = vec![vec![0u64; n]; ys.len()];
    if n == 0 {
        return Some(out);
    }
    // M'(x_j) = ∏_{i≠j} (x_j − x_i); invert all n at once (Montgomery's trick).
    let d: Vec<u64> =
        (0..n).map(|j| (0..n).filter(|&i| i != j).fold(1, |acc, i| md.mul(acc, (xs[j] + m - xs[i]) % m))).collect();
    if d.contains(&0) {
        return None;
    }
    let mut prefix = Vec::with_capacity(n);
    let mut acc = 1;
    for &v in &d {
        prefix.push(acc);
        acc = md.mul(acc, v);
    }
    let mut inv = md.inv(acc);
    let mut w = vec![0u64; n];
    for j in (0..n).rev() {
        w[j] = md.mul(inv, prefix[j]);
        inv = md.mul(inv, d[j]);
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
            carry = md.mul_add(carry, xs[j], big[k + 1]);
            q[k] = carry;
        }
        for (o, y) in out.iter_mut().zip(ys) {
            let c = md.mul(y[j] % m, w[j]);
            if lazy {
                o.iter_mut().zip(&q).for_each(|(ok, &qk)| *ok += c * qk);
            } else {
                o.iter_mut().zip(&q).for_each(|(ok, &qk)| *ok = md.mul_add(c, qk, *ok));
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
    Modulus::new(m).eval(coeffs, x)
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
    fn barrett_reduction_matches_division() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for m in [2u64, 3, 40961, 2056193, (1 << 31) - 1, (1 << 32) - 5, 1 << 32, (1 << 61) - 1] {
            let md = Modulus::new(m);
            for _ in 0..10_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let (a, b, c) = (x % m, (x >> 17) % m, (x >> 5) % m);
                assert_eq!(md.mul_add(a, b, c), ((a as u128 * b as u128 + c as u128) % m as u128) as u64, "m={m}");
            }
            let top = m - 1;
            assert_eq!(md.mul_add(top, top, top), ((top as u128 * top as u128 + top as u128) % m as u128) as u64);
        }
    }

    #[test]
    fn incremental_points_match_interpolating_anew() {
        let m = 40961;
        let xs: Vec<u64> = (0..40).map(|i| (i * 7919 + 13) % m).collect();
        let ys: Vec<Vec<u64>> = (0..3).map(|p| xs.iter().map(|x| (x * (p + 3) + 11) % m).collect()).collect();
        let (mut roots, mut polys) = (vec![0u64; 42], vec![vec![0u64; 42]; 3]);
        roots[0] = 1;
        let mut scratch = Vec::new();
        let mut ps: Vec<&mut [u64]> = polys.iter_mut().map(|p| &mut p[..]).collect();
        for (j, &x) in xs.iter().enumerate() {
            add_point(&mut roots, &mut ps, x, &[ys[0][j], ys[1][j], ys[2][j]], m, &mut scratch).unwrap();
        }
        assert!(
            add_point(&mut roots, &mut ps, xs[5], &[1, 2, 3], m, &mut scratch).is_none(),
            "a repeated point is refused"
        );
        // Remove every third point; the rest must be what interpolating them anew gives.
        let kept: Vec<usize> = (0..40).filter(|j| j % 3 != 0).collect();
        for j in (0..40).filter(|j| j % 3 == 0) {
            remove_point(&mut roots, &mut ps, xs[j], m, &mut scratch).unwrap();
        }
        assert!(remove_point(&mut roots, &mut ps, xs[0], m, &mut scratch).is_none(), "an absent point is refused");
        drop(ps);
        let kx: Vec<u64> = kept.iter().map(|&j| xs[j]).collect();
        let ky: Vec<Vec<u64>> = ys.iter().map(|y| kept.iter().map(|&j| y[j]).collect()).collect();
        let want = interpolate(&kx, &ky.iter().map(Vec::as_slice).collect::<Vec<_>>(), m).unwrap();
        let mut want_roots = from_roots(&kx, m);
        want_roots.resize(42, 0);
        assert_eq!(roots, want_roots);
        for (p, w) in polys.iter().zip(&want) {
            assert_eq!(&p[..w.len()], &w[..]);
            assert!(p[w.len()..].iter().all(|&c| c == 0));
        }
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
