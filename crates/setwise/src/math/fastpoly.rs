//! Interpolation and multipoint evaluation over GF(2^128 − 159) in O(n log² n), on the
//! transform products of [`ntt`]: a subproduct tree over the points, a
//! remainder tree going down it, and the Lagrange sum combined going up (von zur Gathen
//! and Gerhard, *Modern Computer Algebra*, §10.1–10.3; the seed's §4.6 and RT21's C++,
//! through NTL, do the same). Leaves hold up to 32 points and use the quadratic code
//! of [`poly`], which is faster at that size; so do products with a short
//! factor.
//!
//! Both functions give exactly what their quadratic counterparts ([`poly::interpolate`],
//! [`poly::eval`]) give; the tests compare them.

use super::field::PrimeField;
use super::fp128::{F128, Fp128};
use super::ntt::{self, Spectrum};
use super::poly;
use rayon::prelude::*;

/// Points a leaf of the trees holds.
const LEAF: usize = 32;

/// Factors shorter than this are multiplied by the schoolbook rule (the transforms cost
/// more below it).
const SCHOOLBOOK_BELOW: usize = 48;

type Poly = Vec<F128>;

/// `a·b`.
pub fn mul(a: &[F128], b: &[F128]) -> Poly {
    if a.len().min(b.len()) < SCHOOLBOOK_BELOW { poly::mul(Fp128, a, b) } else { ntt::mul(a, b) }
}

/// `g` with `f·g ≡ 1 mod z^k`, for `f[0] ≠ 0` (Newton's iteration, doubling the precision:
/// if `f·g ≡ 1 + z^m·h mod z^2m` then `g − z^m·(g·h)` is correct to `z^2m`).
fn inverse_series(f: &[F128], k: usize) -> Poly {
    let mut g = vec![f[0].inv().expect("a monic polynomial's reversal starts with 1")];
    while g.len() < k {
        let m = g.len();
        let m2 = (2 * m).min(k);
        let f = &f[..f.len().min(m2)];
        let h = if m < SCHOOLBOOK_BELOW {
            let mut e = poly::mul(Fp128, f, &g);
            e.resize(m2, F128::ZERO);
            e.drain(..m);
            e
        } else {
            // f·g modulo z^size − 1 with size ≥ m2: what wraps (f·g has f.len() + m − 1 ≤
            // size + m − 1 coefficients) lands below m, where f·g is 1, 0, …, which is not read.
            let size = m2.next_power_of_two();
            let e = Spectrum::product(&Spectrum::of(f, size), &Spectrum::of(&g, size)).recover(m2);
            e[m..].to_vec()
        };
        let mut gh = mul(&g, &h);
        gh.resize(m2 - m, F128::ZERO);
        g.extend(gh.iter().map(|&c| -c));
    }
    g
}

/// `a` folded modulo `z^n − 1`.
fn fold(a: &[F128], n: usize) -> Poly {
    let mut out = a[..a.len().min(n)].to_vec();
    for chunk in a[out.len()..].chunks(n) {
        out.iter_mut().zip(chunk).for_each(|(o, &c)| *o = *o + c);
    }
    out
}

/// Each of `polys` modulo the monic `m` (degree d ≥ 1), by one shared inverse of `m`'s
/// reversal: for `a` of length `l = d + k` the quotient is `rev(rev(a)·rev(m)⁻¹ mod z^k)`,
/// and `a − q·m` needs only `q·m` modulo `z^n − 1` for a power of two `n ≥ d` with
/// `2n ≥ l`: `q·m` wraps at most once, and its coefficients from `d` on are `a`'s. The
/// transforms of the inverse and of `m` are shared by every polynomial.
fn rem_many<P: AsRef<[F128]>>(polys: &[P], m: &[F128]) -> Vec<Poly> {
    let d = m.len() - 1;
    let l = polys.iter().map(|a| a.as_ref().len()).max().unwrap_or(0);
    if l <= d {
        return polys.iter().map(|a| a.as_ref().to_vec()).collect();
    }
    let k = l - d;
    let rev_m: Poly = m.iter().rev().take(k).copied().collect();
    let inv = inverse_series(&rev_m, k);
    // Every polynomial is taken as `l` long (its missing top coefficients zero), so all
    // share the sizes.
    let top = |a: &[F128]| -> Poly { (d..l).rev().map(|i| a.get(i).copied().unwrap_or(F128::ZERO)).collect() };
    if k.min(d) < SCHOOLBOOK_BELOW {
        return polys
            .iter()
            .map(|a| {
                let a = a.as_ref();
                let mut q = mul(&top(a), &inv);
                q.truncate(k);
                q.reverse();
                let qm = mul(&q, m);
                (0..d).map(|i| a.get(i).copied().unwrap_or(F128::ZERO) - qm[i]).collect()
            })
            .collect();
    }
    let qsize = (2 * k - 1).next_power_of_two();
    let n = l.div_ceil(2).max(d).next_power_of_two();
    let (s_inv, s_m) = rayon::join(|| Spectrum::of(&inv, qsize), || Spectrum::of(&fold(m, n), n));
    polys
        .iter()
        .map(|a| {
            let a = a.as_ref();
            let mut q = Spectrum::product(&Spectrum::of(&top(a), qsize), &s_inv).recover(k);
            q.reverse();
            let wrapped = Spectrum::product(&Spectrum::of(&fold(&q, n), n), &s_m).recover(n);
            let at = |i: usize| a.get(i).copied().unwrap_or(F128::ZERO);
            (0..d).map(|i| at(i) - wrapped[i] + at(i + n)).collect()
        })
        .collect()
}

/// The subproduct tree over points: `levels[0]` the leaves' `∏(z − x)` over up to [`LEAF`]
/// consecutive points each, every level above the pairwise products of the one below (an
/// odd last node carried up as it is), the last level the root `M = ∏(z − x_j)`.
struct Tree {
    levels: Vec<Vec<Poly>>,
}

impl Tree {
    fn new(points: &[F128]) -> Tree {
        let leaves: Vec<Poly> = points.par_chunks(LEAF).map(|c| poly::from_roots(Fp128, c)).collect();
        let mut levels = vec![leaves];
        while let Some(top) = levels.last().filter(|l| l.len() > 1) {
            let next = top.par_chunks(2).map(|p| if let [a, b] = p { mul(a, b) } else { p[0].clone() }).collect();
            levels.push(next);
        }
        Tree { levels }
    }

    fn root(&self) -> &Poly {
        &self.levels[self.levels.len() - 1][0]
    }

    /// The values of each of `polys` at the tree's `points`: the remainders modulo each
    /// node going down, then Horner at the leaves.
    fn evaluate(&self, polys: &[&[F128]], points: &[F128]) -> Vec<Vec<F128>> {
        let mut rems: Vec<Vec<Poly>> = vec![rem_many(polys, self.root())];
        for level in self.levels[..self.levels.len() - 1].iter().rev() {
            rems = level.par_iter().enumerate().map(|(i, m)| rem_many(&rems[i / 2], m)).collect();
        }
        let mut out = vec![vec![F128::ZERO; points.len()]; polys.len()];
        for (p, out) in out.iter_mut().enumerate() {
            out.par_chunks_mut(LEAF).zip(points.par_chunks(LEAF)).zip(&rems).for_each(|((o, xs), r)| {
                o.iter_mut().zip(xs).for_each(|(v, &x)| *v = poly::eval(Fp128, &r[p], x));
            });
        }
        out
    }
}

/// The values of each of `polys` at each of `points` (`out[p][j] = polys[p](points[j])`),
/// as [`poly::eval`] gives them. Points are taken in groups about as many as the
/// polynomials' degree, each with a tree of its own, so a long list of points against a
/// short polynomial costs (points/degree) small trees, not one large one.
pub fn evaluate(polys: &[&[F128]], points: &[F128]) -> Vec<Vec<F128>> {
    let degree = polys.iter().map(|p| p.len()).max().unwrap_or(0);
    let group = degree.max(LEAF).next_power_of_two();
    let mut out = vec![Vec::with_capacity(points.len()); polys.len()];
    for chunk in points.chunks(group) {
        let values = Tree::new(chunk).evaluate(polys, chunk);
        out.iter_mut().zip(values).for_each(|(o, v)| o.extend(v));
    }
    out
}

/// Interpolation over the points `xs`, as [`poly::interpolate`] gives it (the same
/// coefficients; the index of a repeated point otherwise): `Σ_j y_j/M'(x_j)·M/(z − x_j)`,
/// with the `M'(x_j)` from the tree's remainders and the sum formed leaf by leaf and then
/// up the tree as `P_L·M_R + P_R·M_L`. The value lists share the tree and the weights.
pub fn interpolate(xs: &[F128], ys: &[&[F128]]) -> Result<Vec<Poly>, usize> {
    let n = xs.len();
    assert!(ys.iter().all(|y| y.len() == n), "one value per point");
    if n == 0 {
        return Ok(vec![Vec::new(); ys.len()]);
    }
    let tree = Tree::new(xs);
    let derivative = poly::derivative(Fp128, tree.root());
    let mut weights = tree.evaluate(&[&derivative], xs).pop().expect("one polynomial");
    // M'(x_j) is zero exactly when x_j repeats.
    Fp128.batch_invert(&mut weights)?;
    let scaled: Vec<Poly> = ys.iter().map(|y| y.iter().zip(&weights).map(|(&a, &w)| a * w).collect()).collect();
    let mut sums: Vec<Vec<Poly>> = tree.levels[0]
        .par_iter()
        .enumerate()
        .map(|(k, m)| {
            let range = k * LEAF..((k + 1) * LEAF).min(n);
            leaf_sum(m, &xs[range.clone()], scaled.iter().map(|c| &c[range.clone()]))
        })
        .collect();
    for level in &tree.levels[..tree.levels.len() - 1] {
        sums = sums
            .par_chunks(2)
            .zip(level.par_chunks(2))
            .map(|(p, m)| match (p, m) {
                ([pl, pr], [ml, mr]) => combine(pl, pr, ml, mr),
                _ => p[0].clone(),
            })
            .collect();
    }
    let mut out = sums.pop().expect("the root");
    out.iter_mut().for_each(|p| p.resize(n, F128::ZERO));
    Ok(out)
}

/// `Σ_j c_j·m/(z − x_j)` over a leaf's points, for each coefficient list.
fn leaf_sum<'a>(m: &[F128], xs: &[F128], cs: impl Iterator<Item = &'a [F128]>) -> Vec<Poly> {
    let mut q = vec![F128::ZERO; xs.len()];
    let cs: Vec<&[F128]> = cs.collect();
    let mut out = vec![vec![F128::ZERO; xs.len()]; cs.len()];
    for (j, &x) in xs.iter().enumerate() {
        poly::divide_linear(Fp128, m, x, &mut q);
        for (o, c) in out.iter_mut().zip(&cs) {
            o.iter_mut().zip(&q).for_each(|(o, &q)| *o = c[j] * q + *o);
        }
    }
    out
}

/// `P_L·M_R + P_R·M_L` for each list, the two products summed in one transform.
fn combine(pl: &[Poly], pr: &[Poly], ml: &[F128], mr: &[F128]) -> Vec<Poly> {
    let len = ml.len() + mr.len() - 2;
    if ml.len().min(mr.len()) < SCHOOLBOOK_BELOW {
        return pl
            .iter()
            .zip(pr)
            .map(|(a, b)| {
                let mut s = poly::mul(Fp128, a, mr);
                s.resize(len, F128::ZERO);
                s.iter_mut().zip(poly::mul(Fp128, b, ml)).for_each(|(x, y)| *x = *x + y);
                s
            })
            .collect();
    }
    let size = len.next_power_of_two();
    let (sl, sr) = rayon::join(|| Spectrum::of(ml, size), || Spectrum::of(mr, size));
    pl.iter()
        .zip(pr)
        .map(|(a, b)| {
            let mut s = Spectrum::product(&Spectrum::of(a, size), &sr);
            s.add_product(&Spectrum::of(b, size), &sl);
            s.recover(len)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::fp128::sample;

    /// Interpolation gives the quadratic code's coefficients at sizes around the leaf and
    /// the transform thresholds, with uneven trees (odd node counts) and two value lists.
    #[test]
    fn interpolation_equals_the_quadratic_one() {
        for n in [1, 2, 31, 32, 33, 95, 200, 1000, 1537, 4100] {
            let xs = sample(n, n as u128);
            let (a, b) = (sample(n, 7 + n as u128), sample(n, 9 + n as u128));
            let fast = interpolate(&xs, &[&a, &b]).unwrap();
            let slow = poly::interpolate(Fp128, &xs, &[&a, &b]).unwrap();
            assert_eq!(fast, slow, "n = {n}");
        }
        assert!(interpolate(&[], &[&[]]).unwrap()[0].is_empty());
    }

    #[test]
    fn a_repeated_point_is_refused() {
        let mut xs = sample(500, 3);
        xs[400] = xs[17];
        let ys = sample(500, 4);
        let err = interpolate(&xs, &[&ys]).unwrap_err();
        assert!(err == 17 || err == 400, "names a repeated point, got {err}");
        assert_eq!(Err(err), poly::interpolate(Fp128, &xs, &[&ys]), "the quadratic code's index");
    }

    /// Evaluation gives Horner's values, with more points than the degree (several
    /// groups), fewer, and a polynomial longer than the tree's root.
    #[test]
    fn evaluation_equals_horner() {
        for (degree, points) in [(1, 5), (40, 3), (100, 1000), (700, 3000), (2000, 300), (4096, 4097)] {
            let (p, q) = (sample(degree, degree as u128), sample(degree, 1 + degree as u128));
            let xs = sample(points, 5 + points as u128);
            let got = evaluate(&[&p, &q], &xs);
            for (poly, values) in [&p, &q].iter().zip(&got) {
                let want: Vec<F128> = xs.iter().map(|&x| poly::eval(Fp128, poly, x)).collect();
                assert_eq!(values, &want, "degree {degree}, {points} points");
            }
        }
    }

    #[test]
    fn series_inverses_and_remainders() {
        let f = sample(300, 11);
        let g = inverse_series(&f, 257);
        let fg = mul(&f, &g);
        assert_eq!(fg[0], F128::ONE);
        assert!(fg[1..257].iter().all(|&c| c == F128::ZERO));
        let mut m = sample(100, 12);
        m.push(F128::ONE);
        let a = sample(450, 13);
        let r = rem_many(std::slice::from_ref(&a), &m).pop().unwrap();
        // Long division, a second computation.
        let mut want = a.clone();
        for top in (m.len() - 1..want.len()).rev() {
            let c = want[top];
            let base = top + 1 - m.len();
            want[base..=top].iter_mut().zip(&m).for_each(|(w, &mi)| *w = *w - c * mi);
        }
        want.truncate(m.len() - 1);
        assert_eq!(r, want);
    }
}
