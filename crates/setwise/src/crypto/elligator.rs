//! Elligator 2 on Curve25519 (Bernstein–Hamburg–Krasnova–Lange 2013; RFC 9380 §6.7.1
//! with Z = 2): a map from field elements to Montgomery u-coordinates and its inverse, so
//! that a Diffie–Hellman public key can be sent as a uniformly random 256-bit string.
//!
//! curve25519-dalek implements the forward map only inside its hash-to-curve and does not
//! expose the field, so the field here is derived with `ff_derive` and the map is checked
//! against dalek's own test vectors and against dalek's point arithmetic.
//!
//! Everything is x-only: a representative stands for the pair ±P, which is all an
//! X25519-style key agreement needs (u(k·P) = u(k·(−P))).

#![allow(missing_docs)] // the derived field's items

use curve25519_dalek::MontgomeryPoint;
use curve25519_dalek::edwards::EdwardsPoint;
use ff::{Field, PrimeField};
use subtle::{Choice, ConditionallySelectable, ConstantTimeEq};

/// GF(2^255 − 19), the field of Curve25519's coordinates.
#[derive(PrimeField)]
#[PrimeFieldModulus = "57896044618658097711785492504343953926634992332820282019728792003956564819949"]
#[PrimeFieldGenerator = "2"]
#[PrimeFieldReprEndianness = "little"]
struct Fe([u64; 4]);

/// The Montgomery coefficient A of Curve25519 (v² = u³ + A·u² + u).
const A: u64 = 486_662;

/// Random choices for [`representative`]: which of the four preimages of ±P to return
/// and the unused top bit of the encoding. Callers fill it from a CSPRNG.
#[derive(Debug, Clone, Copy)]
pub struct Coins(pub u8);

/// A uniformly random-looking 32-byte encoding of ±`point`, or `None` when the point has
/// no Elligator 2 representative (about half of all points; resample the key then).
///
/// For a point uniform over the whole curve group (including its 8-torsion part; see
/// [`uniform_point`]) and uniform `coins`, the output is within statistical distance
/// 2^-250 of uniform over 256-bit strings.
pub fn representative(point: &EdwardsPoint, coins: Coins) -> Option<[u8; 32]> {
    let u = Fe::from_repr(FeRepr(point.to_montgomery().to_bytes())).into_option()?;
    let r = inverse(u, Choice::from(coins.0 & 1))?;
    // Both square roots are preimages; pick one at random.
    let r = Fe::conditional_select(&r, &-r, Choice::from((coins.0 >> 1) & 1));
    let mut out = r.to_repr().0;
    out[31] |= coins.0 & 0x80; // r < 2^255: the top bit is free, make it random.
    Some(out)
}

/// The Montgomery point that `encoding` (any 32 bytes) represents: Elligator 2 of the
/// low 255 bits read modulo p. Always a point of the curve, never of its twist.
pub fn point_of(encoding: &[u8; 32]) -> MontgomeryPoint {
    MontgomeryPoint(forward(field_of(encoding)).to_repr().0)
}

/// A key pair's point made uniform over the whole group E(F_p) ≅ Z_ℓ × Z_8: `b·B + T`
/// for a random 8-torsion point T chosen by `coins`. Without T every receiver point would
/// lie in the prime-order subgroup, which anyone can test on a decoded representative.
/// A peer key that is a multiple of 8 removes T again.
pub fn uniform_point(prime_order: &EdwardsPoint, coins: u8) -> EdwardsPoint {
    prime_order + curve25519_dalek::constants::EIGHT_TORSION[(coins & 7) as usize]
}

/// The low 255 bits of `bytes` as a field element (the 19 values ≥ p are reduced).
fn field_of(bytes: &[u8; 32]) -> Fe {
    let mut b = *bytes;
    b[31] &= 0x7f;
    Fe::from_repr(FeRepr(b)).into_option().unwrap_or_else(|| {
        // b ∈ [p, 2^255): all bytes 0xff but the first (≥ 0xed) and the last (0x7f).
        Fe::from(u64::from(b[0] - 0xed))
    })
}

/// Elligator 2: r ↦ u. With w = −A/(1 + 2r²): u = w if w³ + A·w² + w is a square,
/// else u = −w − A. 1 + 2r² ≠ 0 because −1/2 is not a square mod p.
fn forward(r: Fe) -> Fe {
    let a = Fe::from(A);
    // 1 + 2r² ≠ 0, so this is its inverse (z^(p−2) of zero would be zero: no panic path
    // for a peer-chosen r either way).
    let w = -a * invert(Fe::ONE + r.square().double());
    let gw = (w.square() + a * w + Fe::ONE) * w;
    let (square, _) = sqrt_ratio(&gw, &Fe::ONE);
    Fe::conditional_select(&(-w - a), &w, square)
}

/// (z^(2^250 − 1), z^11), the shared part of [`invert`] and [`pow_p58`]: ref10's
/// addition chain, 249 squarings and 10 multiplications (254 and 11 for the whole
/// inverse), where the field's generic square-and-multiply would take about as many
/// multiplications as squarings.
fn pow_2_250_minus_1(z: Fe) -> (Fe, Fe) {
    let sq = |x: Fe, n: u32| (0..n).fold(x, |x, _| x.square());
    let t0 = z.square(); // 2
    let t1 = sq(t0, 2) * z; // 9
    let z11 = t0 * t1; // 11
    let t0 = z11.square() * t1; // 31 = 2^5 − 1
    let t0 = sq(t0, 5) * t0; // 2^10 − 1
    let t1 = sq(t0, 10) * t0; // 2^20 − 1
    let t1 = sq(t1, 20) * t1; // 2^40 − 1
    let t0 = sq(t1, 10) * t0; // 2^50 − 1
    let t1 = sq(t0, 50) * t0; // 2^100 − 1
    let t1 = sq(t1, 100) * t1; // 2^200 − 1
    (sq(t1, 50) * t0, z11) // 2^250 − 1
}

/// z^(p − 2) = z^(2^255 − 21): z⁻¹ for z ≠ 0, and 0 for 0.
fn invert(z: Fe) -> Fe {
    let (t, z11) = pow_2_250_minus_1(z);
    (0..5).fold(t, |x, _| x.square()) * z11
}

/// z^((p − 5)/8) = z^(2^252 − 3).
fn pow_p58(z: Fe) -> Fe {
    let (t, _) = pow_2_250_minus_1(z);
    t.square().square() * z
}

/// √−1 = 2^((p − 1)/4) (the root curve25519-dalek and RFC 8032 use).
static SQRT_M1: std::sync::LazyLock<Fe> = std::sync::LazyLock::new(|| {
    Fe::from_str_vartime("19681161376707505956807079304988542015446066515923890162744021073123829784752")
        .expect("a canonical field element")
});

/// (whether u/v is a square, a square root of it if so), for v ≠ 0, with one
/// exponentiation (RFC 8032 §5.1.3 for p ≡ 5 mod 8): r = u·v³·(u·v⁷)^((p−5)/8) has
/// v·r² = ±u or ±√−1·u; the first sign is a root, the second a root after multiplying
/// r by √−1, and the other two mean u/v is not a square. u = 0 gives (true, 0).
fn sqrt_ratio(u: &Fe, v: &Fe) -> (Choice, Fe) {
    let v3 = v.square() * v;
    let v7 = v3.square() * v;
    let r = *u * v3 * pow_p58(*u * v7);
    let check = *v * r.square();
    let correct = check.ct_eq(u);
    let flipped = check.ct_eq(&-*u);
    let r = Fe::conditional_select(&r, &(r * *SQRT_M1), flipped);
    (correct | flipped, r)
}

/// The inverse map: an r with `forward(r) = u`, from one of the two branches
/// (r² = −u / (2(u + A)) or r² = −(u + A) / (2u)); both exist exactly when −2u(u + A) is a
/// non-zero square and u is on the curve.
fn inverse(u: Fe, branch: Choice) -> Option<Fe> {
    let upa = u + Fe::from(A);
    let num = Fe::conditional_select(&-u, &-upa, branch);
    let den = Fe::conditional_select(&upa, &u, branch).double();
    if bool::from(den.is_zero() | num.is_zero()) {
        return None;
    }
    let (square, r) = sqrt_ratio(&num, &den);
    bool::from(square).then_some(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use curve25519_dalek::constants::ED25519_BASEPOINT_POINT;
    use curve25519_dalek::scalar::Scalar;

    fn scalar(i: u64) -> Scalar {
        Scalar::from(i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1) * Scalar::from(7_919u64 + i)
    }

    #[test]
    fn forward_matches_dalek_vectors() {
        // curve25519-dalek's montgomery_elligator_correct and _zero_zero tests.
        let input: [u8; 32] = std::array::from_fn(|i| i as u8);
        let expected = [
            0x5f, 0x35, 0x20, 0x00, 0x1c, 0x6c, 0x99, 0x36, 0xa3, 0x12, 0x06, 0xaf, 0xe7, 0xc7, 0xac, 0x22, 0x4e, 0x88,
            0x61, 0x61, 0x9b, 0xf9, 0x88, 0x72, 0x44, 0x49, 0x15, 0x89, 0x9d, 0x95, 0xf4, 0x6e,
        ];
        assert_eq!(point_of(&input).0, expected);
        assert_eq!(point_of(&[0; 32]).0, [0; 32]);
    }

    #[test]
    fn representatives_decode_to_the_point_on_both_branches_and_signs() {
        let mut found = 0;
        for i in 0..200u64 {
            let p = uniform_point(&(ED25519_BASEPOINT_POINT * scalar(i)), i as u8);
            let u = p.to_montgomery();
            let mut any = None;
            for coins in [0u8, 1, 2, 3, 0x80, 0x83] {
                let r = representative(&p, Coins(coins));
                if let Some(r) = r {
                    assert_eq!(point_of(&r), u, "point {i}, coins {coins}");
                    assert_eq!(r[31] & 0x80, coins & 0x80);
                }
                // Representability does not depend on the coins.
                assert_eq!(any.get_or_insert(r.is_some()), &r.is_some());
            }
            found += usize::from(any == Some(true));
            // The decoded point is on the curve: dalek lifts it to Edwards form.
            assert!(u.to_edwards(0).is_some());
        }
        // About half of all points have representatives.
        assert!((70..130).contains(&found), "{found} of 200");
    }

    /// The addition chains and the one-exponentiation square root against the field's own
    /// (generic) inversion and square root.
    #[test]
    fn chains_and_square_roots_agree_with_the_generic_field() {
        assert_eq!(SQRT_M1.square(), -Fe::ONE);
        assert_eq!(invert(Fe::ZERO), Fe::ZERO);
        let (zero_square, zero_root) = sqrt_ratio(&Fe::ZERO, &Fe::ONE);
        assert!(bool::from(zero_square) && zero_root == Fe::ZERO);
        let (mut squares, mut flipped, mut z, mut v) = (0, 0, Fe::from(3u64), Fe::from(5u64));
        for _ in 0..300 {
            z = z.square() + Fe::from(7u64);
            v = v * z + Fe::ONE;
            assert_eq!(invert(z), z.invert().unwrap());
            let (square, r) = sqrt_ratio(&z, &v);
            let generic = Fe::sqrt_ratio(&z, &v).0;
            assert_eq!(bool::from(square), bool::from(generic), "the same squares");
            if bool::from(square) {
                assert_eq!(v * r.square(), z, "a root of z/v");
                squares += 1;
                // The candidate needed the √−1 correction: the second branch.
                let v3 = v.square() * v;
                let candidate = z * v3 * pow_p58(z * v3.square() * v);
                flipped += usize::from(candidate != r);
            }
        }
        assert!((100..200).contains(&squares), "{squares} of 300 are squares");
        assert!(flipped > 0 && flipped < squares, "both branches taken: {flipped} of {squares}");
    }

    #[test]
    fn forward_lands_on_the_curve_for_arbitrary_strings() {
        for i in 0..300u32 {
            let bytes: [u8; 32] = *blake3::hash(&i.to_le_bytes()).as_bytes();
            let u = point_of(&bytes);
            let p = u.to_edwards(0).expect("on the curve");
            assert_eq!(p.to_montgomery(), u);
        }
    }

    #[test]
    fn non_canonical_inputs_reduce() {
        let mut p_bytes = [0xffu8; 32];
        p_bytes[0] = 0xed;
        p_bytes[31] = 0x7f; // p itself ≡ 0
        assert_eq!(point_of(&p_bytes), point_of(&[0; 32]));
        p_bytes[0] = 0xee; // p + 1 ≡ 1
        let mut one = [0u8; 32];
        one[0] = 1;
        assert_eq!(point_of(&p_bytes), point_of(&one));
        one[31] = 0x80; // the top bit is ignored
        assert_eq!(point_of(&p_bytes), point_of(&one));
    }

    #[test]
    fn torsion_makes_points_leave_the_prime_order_subgroup() {
        let in_subgroup = (0..64u8)
            .filter(|&c| uniform_point(&(ED25519_BASEPOINT_POINT * scalar(c as u64)), c).is_torsion_free())
            .count();
        assert_eq!(in_subgroup, 8, "exactly the coins with T = identity");
    }
}
