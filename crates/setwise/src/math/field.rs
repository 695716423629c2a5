//! What the polynomial code needs of a prime field, so one implementation of
//! interpolation, evaluation and point edits serves every field setwise uses.
//!
//! A [`PrimeField`] value is the field's description (a modulus, or nothing for a field
//! fixed at compile time); elements are plain values of [`PrimeField::Elem`], kept
//! canonical (below the modulus) by every operation.

use std::fmt::Debug;

/// A prime field, described by a small `Copy` value.
pub trait PrimeField: Copy + Send + Sync {
    /// A canonical element.
    type Elem: Copy + PartialEq + Default + Debug + Send + Sync;
    /// A sum of products not yet reduced (see [`wide_capacity`](Self::wide_capacity)).
    type Wide: Copy + Default + Send + Sync;

    /// Zero.
    fn zero(self) -> Self::Elem {
        Self::Elem::default()
    }
    /// One.
    fn one(self) -> Self::Elem;
    /// The element `v mod p`.
    fn elem(self, v: u64) -> Self::Elem;
    /// `a + b`.
    fn add(self, a: Self::Elem, b: Self::Elem) -> Self::Elem;
    /// `a − b`.
    fn sub(self, a: Self::Elem, b: Self::Elem) -> Self::Elem;
    /// `a · b`.
    fn mul(self, a: Self::Elem, b: Self::Elem) -> Self::Elem;
    /// `a · b + c`.
    fn mul_add(self, a: Self::Elem, b: Self::Elem, c: Self::Elem) -> Self::Elem {
        self.add(self.mul(a, b), c)
    }
    /// `−a`.
    fn neg(self, a: Self::Elem) -> Self::Elem {
        self.sub(self.zero(), a)
    }
    /// `a⁻¹`, or `None` for zero.
    fn inv(self, a: Self::Elem) -> Option<Self::Elem>;

    /// How many products [`wide_mul_add`](Self::wide_mul_add) may add to one
    /// [`Wide`](Self::Wide) before [`wide_reduce`](Self::wide_reduce) must be called
    /// (lazy reduction: the sums in interpolation are the cost of building label
    /// polynomials).
    fn wide_capacity(self) -> usize;
    /// `acc + a · b`, reduced only as far as the capacity requires.
    fn wide_mul_add(self, acc: Self::Wide, a: Self::Elem, b: Self::Elem) -> Self::Wide;
    /// `acc[i] += a · b[i]` for each `i` ([`wide_mul_add`](Self::wide_mul_add) over a
    /// slice; a field may give a form the compiler vectorises).
    fn wide_mul_add_slice(self, acc: &mut [Self::Wide], a: Self::Elem, b: &[Self::Elem]) {
        acc.iter_mut().zip(b).for_each(|(w, &x)| *w = self.wide_mul_add(*w, a, x));
    }
    /// The element a wide sum stands for.
    fn wide_reduce(self, w: Self::Wide) -> Self::Elem;
    /// A canonical element as a wide sum.
    fn widen(self, a: Self::Elem) -> Self::Wide;

    /// Inverts every element of `v` in place with one inversion (Montgomery's trick).
    /// Returns the index of a zero element instead, leaving `v` unchanged.
    fn batch_invert(self, v: &mut [Self::Elem]) -> Result<(), usize> {
        if let Some(i) = v.iter().position(|&x| x == self.zero()) {
            return Err(i);
        }
        let mut prefix = Vec::with_capacity(v.len());
        let mut acc = self.one();
        for &x in v.iter() {
            prefix.push(acc);
            acc = self.mul(acc, x);
        }
        let mut inv = self.inv(acc).expect("a product of non-zero elements is non-zero");
        for (x, before) in v.iter_mut().zip(prefix).rev() {
            let xi = self.mul(inv, before);
            inv = self.mul(inv, *x);
            *x = xi;
        }
        Ok(())
    }
}
