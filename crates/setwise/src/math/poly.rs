//! Polynomials over any [`PrimeField`], coefficients lowest degree first: the product of
//! linear factors, evaluation, interpolation of several value lists at shared points,
//! and adding or removing one interpolation point in linear time.

use super::field::PrimeField;
use rayon::prelude::*;

/// Points from which interpolation splits its work over threads.
const PARALLEL_FROM: usize = 256;

/// Coefficients of `∏ (z − r)` over the roots: monic, degree `roots.len()`.
pub fn from_roots<F: PrimeField>(f: F, roots: &[F::Elem]) -> Vec<F::Elem> {
    let mut c = vec![f.zero(); roots.len() + 1];
    c[0] = f.one();
    for (d, &r) in roots.iter().enumerate() {
        mul_linear(f, &mut c[..d + 2], r);
    }
    c
}

/// The product `a·b` by the schoolbook rule (empty if either is): the quadratic product,
/// for short factors and as a second computation in tests.
pub fn mul<F: PrimeField>(f: F, a: &[F::Elem], b: &[F::Elem]) -> Vec<F::Elem> {
    if a.is_empty() || b.is_empty() {
        return Vec::new();
    }
    let mut out = vec![f.zero(); a.len() + b.len() - 1];
    for (i, &x) in a.iter().enumerate() {
        out[i..i + b.len()].iter_mut().zip(b).for_each(|(o, &y)| *o = f.mul_add(x, y, *o));
    }
    out
}

/// The derivative of `c`: `c.len() − 1` coefficients (none for a constant).
pub fn derivative<F: PrimeField>(f: F, c: &[F::Elem]) -> Vec<F::Elem> {
    c.iter().enumerate().skip(1).map(|(k, &v)| f.mul(v, f.elem(k as u64))).collect()
}

/// Multiplies `c` (degree below `c.len() − 1`) by `(z − r)` in place.
fn mul_linear<F: PrimeField>(f: F, c: &mut [F::Elem], r: F::Elem) {
    let neg = f.neg(r);
    for i in (0..c.len()).rev() {
        let lower = if i > 0 { c[i - 1] } else { f.zero() };
        c[i] = f.mul_add(c[i], neg, lower);
    }
}

/// The value at `x` (Horner).
#[inline]
pub fn eval<F: PrimeField>(f: F, coeffs: &[F::Elem], x: F::Elem) -> F::Elem {
    coeffs.iter().rev().fold(f.zero(), |acc, &c| f.mul_add(acc, x, c))
}

/// The quotient of the monic `m` by `(z − r)` into `q` (length `deg m`), when `r` is a
/// root (synthetic division).
#[inline]
pub(crate) fn divide_linear<F: PrimeField>(f: F, m: &[F::Elem], r: F::Elem, q: &mut [F::Elem]) {
    let mut carry = f.zero();
    for k in (0..q.len()).rev() {
        carry = f.mul_add(carry, r, m[k + 1]);
        q[k] = carry;
    }
}

/// Points worked on together by [`eval_many`] and [`divide_linear_many`]: each step of
/// Horner's rule or of synthetic division waits on the one before, so a single point is
/// bound by a multiplication's latency; independent chains side by side fill the wait.
const LANES: usize = 4;

/// The values at each of `xs` into `out` (Horner, [`LANES`] points at a time).
fn eval_many<F: PrimeField>(f: F, coeffs: &[F::Elem], xs: &[F::Elem], out: &mut [F::Elem]) {
    for (xc, oc) in xs.chunks(LANES).zip(out.chunks_mut(LANES)) {
        let (mut x, mut acc) = ([f.zero(); LANES], [f.zero(); LANES]);
        x[..xc.len()].copy_from_slice(xc);
        for &c in coeffs.iter().rev() {
            for l in 0..LANES {
                acc[l] = f.mul_add(acc[l], x[l], c);
            }
        }
        oc.copy_from_slice(&acc[..oc.len()]);
    }
}

/// The quotients of the monic `m` by `(z − r)` for each root `r` of `rs` (at most
/// [`LANES`]) into `qs`, one row of `deg m` per root (synthetic division).
#[inline]
fn divide_linear_many<F: PrimeField>(f: F, m: &[F::Elem], rs: &[F::Elem], qs: &mut [F::Elem]) {
    let len = m.len() - 1;
    let (mut r, mut carry) = ([f.zero(); LANES], [f.zero(); LANES]);
    r[..rs.len()].copy_from_slice(rs);
    for k in (0..len).rev() {
        for l in 0..LANES {
            carry[l] = f.mul_add(carry[l], r[l], m[k + 1]);
        }
        for (l, &c) in carry.iter().enumerate().take(rs.len()) {
            qs[l * len + k] = c;
        }
    }
}

/// Interpolation over the points `xs`: for each value list in `ys`, the coefficients
/// (`xs.len()` of them) of the polynomial of degree below `xs.len()` through
/// `(xs[j], ys[j])`. Lagrange form from `M(z) = ∏(z − x_j)`:
/// `Σ_j y_j·w_j·M(z)/(z − x_j)` with `w_j = 1/M'(x_j)` (one batched inversion), so all
/// value lists share the O(n²) work on the points. Returns the index of a repeated point
/// if the points are not distinct.
pub fn interpolate<F: PrimeField>(f: F, xs: &[F::Elem], ys: &[&[F::Elem]]) -> Result<Vec<Vec<F::Elem>>, usize> {
    interpolate_over(f, xs, &from_roots(f, xs), ys)
}

/// [`interpolate`] given `m = from_roots(xs)`, for a caller that needs `m` as well.
pub fn interpolate_over<F: PrimeField>(
    f: F,
    xs: &[F::Elem],
    m: &[F::Elem],
    ys: &[&[F::Elem]],
) -> Result<Vec<Vec<F::Elem>>, usize> {
    let n = xs.len();
    assert!(ys.iter().all(|y| y.len() == n), "one value per point");
    assert_eq!(m.len(), n + 1, "m has the points as roots");
    if n == 0 {
        return Ok(vec![Vec::new(); ys.len()]);
    }
    // w_j = 1 / M'(x_j); M'(x_j) is zero exactly when x_j repeats.
    let derivative = derivative(f, m);
    let mut weights = vec![f.zero(); n];
    if n >= PARALLEL_FROM {
        xs.par_chunks(LANES * 16)
            .zip(weights.par_chunks_mut(LANES * 16))
            .for_each(|(x, w)| eval_many(f, &derivative, x, w));
    } else {
        eval_many(f, &derivative, xs, &mut weights);
    }
    f.batch_invert(&mut weights)?;
    // Each block of points adds its terms into wide sums, reduced every `capacity` terms.
    let block_sum = |points: std::ops::Range<usize>| {
        let mut wide = vec![vec![F::Wide::default(); n]; ys.len()];
        let mut qs = vec![f.zero(); n * LANES];
        let mut pending = 0;
        for start in points.clone().step_by(LANES) {
            let lanes = start..(start + LANES).min(points.end);
            divide_linear_many(f, m, &xs[lanes.clone()], &mut qs);
            for (j, q) in lanes.zip(qs.chunks_exact(n)) {
                if pending == f.wide_capacity() {
                    wide.iter_mut().flatten().for_each(|w| *w = f.widen(f.wide_reduce(*w)));
                    pending = 0;
                }
                for (acc, y) in wide.iter_mut().zip(ys) {
                    let c = f.mul(y[j], weights[j]);
                    f.wide_mul_add_slice(acc, c, q);
                }
                pending += 1;
            }
        }
        wide.into_iter().map(|v| v.into_iter().map(|w| f.wide_reduce(w)).collect::<Vec<_>>()).collect::<Vec<_>>()
    };
    if n < PARALLEL_FROM {
        return Ok(block_sum(0..n));
    }
    let block = n.div_ceil(rayon::current_num_threads() * 4).max(16);
    let zero = || vec![vec![f.zero(); n]; ys.len()];
    Ok((0..n).into_par_iter().step_by(block).map(|start| block_sum(start..(start + block).min(n))).reduce(
        zero,
        |mut a, b| {
            a.iter_mut().flatten().zip(b.iter().flatten()).for_each(|(x, &y)| *x = f.add(*x, y));
            a
        },
    ))
}

/// The degree of a monic (non-zero) polynomial: the index of its last non-zero coefficient.
fn degree<F: PrimeField>(f: F, c: &[F::Elem]) -> usize {
    c.iter().rposition(|&v| v != f.zero()).unwrap_or(0)
}

/// Adds the point `x` to an interpolation kept incrementally, in O(d) per polynomial
/// instead of redoing the O(d²) interpolation. `roots` is `∏(z − x_j)` over the current
/// `d` points (monic); `polys[p]` is the polynomial of degree < `d` through
/// `(x_j, y_pj)`, zero-padded to `roots.len()`. Afterwards `roots` has the root `x` and
/// each `polys[p]` also passes through `(x, ys[p])`: `P + (y − P(x))/M(x) · M`, the same
/// coefficients as interpolating all points anew. `scratch` is reused between calls.
/// Returns `None` (and changes nothing) if `x` is already a point or the slices have no
/// room for degree `d + 1`.
pub fn add_point<F: PrimeField>(
    f: F,
    roots: &mut [F::Elem],
    polys: &mut [&mut [F::Elem]],
    x: F::Elem,
    ys: &[F::Elem],
    scratch: &mut Vec<F::Elem>,
) -> Option<()> {
    let d = degree(f, roots);
    if d + 1 >= roots.len() || polys.iter().any(|p| p.len() < roots.len()) {
        return None;
    }
    // Horner on M and every P at once: independent chains keep the multiplier busy.
    scratch.clear();
    scratch.resize(polys.len() + 1, f.zero());
    let (mx, px) = scratch.split_first_mut().expect("one value for M");
    for i in (0..=d).rev() {
        *mx = f.mul_add(*mx, x, roots[i]);
        for (v, p) in px.iter_mut().zip(polys.iter()) {
            // P has degree < d: its coefficient d is zero.
            *v = f.mul_add(*v, x, p[i]);
        }
    }
    let inv = f.inv(*mx)?;
    for ((p, &y), &v) in polys.iter_mut().zip(ys).zip(px.iter()) {
        let s = f.mul(f.sub(y, v), inv);
        p[..=d].iter_mut().zip(&roots[..=d]).for_each(|(pi, &ri)| *pi = f.mul_add(s, ri, *pi));
    }
    mul_linear(f, &mut roots[..d + 2], x);
    Some(())
}

/// Removes the point `x` from an interpolation kept as in [`add_point`]: `M ← M/(z − x)`
/// by synthetic division, and `P ← P − P_{d−1}·M`, which drops `P`'s degree below `d − 1`
/// and keeps its values at the other points (the same coefficients as interpolating them
/// anew). `scratch` is reused between calls. Returns `None` (and changes nothing) if `x`
/// is not a root.
pub fn remove_point<F: PrimeField>(
    f: F,
    roots: &mut [F::Elem],
    polys: &mut [&mut [F::Elem]],
    x: F::Elem,
    scratch: &mut Vec<F::Elem>,
) -> Option<()> {
    let d = degree(f, roots);
    if d == 0 {
        return None;
    }
    scratch.clear();
    scratch.resize(d, f.zero());
    divide_linear(f, &roots[..=d], x, scratch);
    if f.mul_add(scratch[0], x, roots[0]) != f.zero() {
        return None;
    }
    for p in polys.iter_mut() {
        let c = f.neg(p[d - 1]);
        p[..d].iter_mut().zip(scratch.iter()).for_each(|(pi, &qi)| *pi = f.mul_add(c, qi, *pi));
    }
    roots[..d].copy_from_slice(scratch);
    roots[d] = f.zero();
    Some(())
}

#[cfg(test)]
mod tests {
    use super::super::fp128::{F128, Fp128, P};
    use super::super::zp::Zp;
    use super::*;

    /// Interpolation passes through every point, in both fields, below and above the
    /// parallel threshold, with several value lists.
    fn passes_through<F: PrimeField>(f: F, point: impl Fn(u64) -> F::Elem, value: impl Fn(u64, u64) -> F::Elem) {
        for n in [0u64, 1, 2, 7, 64, 300] {
            let xs: Vec<F::Elem> = (0..n).map(&point).collect();
            let a: Vec<F::Elem> = (0..n).map(|i| value(i, 1)).collect();
            let b: Vec<F::Elem> = (0..n).map(|i| value(i, 2)).collect();
            let polys = interpolate(f, &xs, &[&a, &b]).unwrap();
            for (poly, ys) in polys.iter().zip([&a, &b]) {
                assert_eq!(poly.len(), n as usize);
                for (x, y) in xs.iter().zip(ys.iter()) {
                    assert_eq!(eval(f, poly, *x), *y);
                }
            }
        }
        let repeated = [point(3), point(4), point(3)];
        assert_eq!(interpolate(f, &repeated, &[&[f.one(); 3]]), Err(0));
    }

    #[test]
    fn interpolation_in_every_field() {
        let m = 2056193;
        passes_through(Zp::new(m), |i| (i * 7919 + 3) % m, |i, s| (i * i * s + 11) % m);
        // Above the lazy-reduction bound, and above 2^32 (no Barrett fast path).
        for m in [(1u64 << 31) - 1, 4611686018427387847] {
            passes_through(Zp::new(m), |i| (i * 7919 + 3) % m, |i, s| (m - 1 - i * s) % m);
        }
        passes_through(
            Fp128,
            |i| F128::reduce((i as u128).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c) + 5),
            |i, s| F128::reduce(P - 1 - (i as u128) * s as u128),
        );
    }

    #[test]
    fn products_and_derivatives_by_hand() {
        let f = Zp::new(1_000_003);
        // (1 + 2z)(3 + z) = 3 + 7z + 2z², whose derivative is 7 + 4z.
        assert_eq!(mul(f, &[1, 2], &[3, 1]), vec![3, 7, 2]);
        assert_eq!(derivative(f, &[3, 7, 2]), vec![7, 4]);
        assert!(mul(f, &[], &[1]).is_empty() && derivative(f, &[5]).is_empty());
    }

    #[test]
    fn roots_vanish_and_nothing_else_does() {
        let m = 1032193;
        let f = Zp::new(m);
        let roots = [5, 17, 1032192, 99];
        let c = from_roots(f, &roots);
        assert_eq!(c.len(), 5);
        assert_eq!(c[4], 1);
        for r in roots {
            assert_eq!(eval(f, &c, r), 0);
        }
        for x in [0, 1, 6, 100, 1000] {
            let direct = roots.iter().fold(1, |acc, &r| f.mul(acc, (x + m - r) % m));
            assert_eq!(eval(f, &c, x), direct);
        }
        assert_eq!(from_roots(f, &[]), vec![1]);
    }

    #[test]
    fn incremental_points_match_interpolating_anew() {
        let m = 40961;
        let f = Zp::new(m);
        let xs: Vec<u64> = (0..40).map(|i| (i * 7919 + 13) % m).collect();
        let ys: Vec<Vec<u64>> = (0..3).map(|p| xs.iter().map(|x| (x * (p + 3) + 11) % m).collect()).collect();
        let (mut roots, mut polys) = (vec![0u64; 42], vec![vec![0u64; 42]; 3]);
        roots[0] = 1;
        let mut scratch = Vec::new();
        let mut ps: Vec<&mut [u64]> = polys.iter_mut().map(|p| &mut p[..]).collect();
        for (j, &x) in xs.iter().enumerate() {
            add_point(f, &mut roots, &mut ps, x, &[ys[0][j], ys[1][j], ys[2][j]], &mut scratch).unwrap();
        }
        assert!(add_point(f, &mut roots, &mut ps, xs[5], &[1, 2, 3], &mut scratch).is_none(), "a repeated point");
        // Remove every third point; the rest must be what interpolating them anew gives.
        let kept: Vec<usize> = (0..40).filter(|j| j % 3 != 0).collect();
        for j in (0..40).filter(|j| j % 3 == 0) {
            remove_point(f, &mut roots, &mut ps, xs[j], &mut scratch).unwrap();
        }
        assert!(remove_point(f, &mut roots, &mut ps, xs[0], &mut scratch).is_none(), "an absent point");
        drop(ps);
        let kx: Vec<u64> = kept.iter().map(|&j| xs[j]).collect();
        let ky: Vec<Vec<u64>> = ys.iter().map(|y| kept.iter().map(|&j| y[j]).collect()).collect();
        let want = interpolate(f, &kx, &ky.iter().map(Vec::as_slice).collect::<Vec<_>>()).unwrap();
        let mut want_roots = from_roots(f, &kx);
        want_roots.resize(42, 0);
        assert_eq!(roots, want_roots);
        for (p, w) in polys.iter().zip(&want) {
            assert_eq!(&p[..w.len()], &w[..]);
            assert!(p[w.len()..].iter().all(|&c| c == 0));
        }
    }
}
