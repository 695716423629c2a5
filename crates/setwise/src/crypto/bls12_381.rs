//! BLS12-381 (via `blstrs`): hashing to G1, secret scalars, checked decoding, pairings.
//!
//! Points from a peer or a file come in through [`g1_from_bytes`] / [`g2_from_bytes`],
//! which reject non-canonical encodings, points outside the prime-order subgroup and the
//! identity. Pairings against a fixed G2 element use a prepared form (its line functions
//! computed once) and one Miller loop plus final exponentiation each.

use crate::crypto::dst::Domain;
use crate::crypto::rng::fill_os;
pub use blstrs::{Bls12, G1Affine, G1Projective, G2Affine, G2Prepared, G2Projective, Gt, Scalar};
use group::Curve;
use group::prime::PrimeCurveAffine;
use pairing_lib::{MillerLoopResult, MultiMillerLoop};
use zeroize::Zeroizing;

/// Compressed G1 point size.
pub const G1_BYTES: usize = 48;
/// Compressed G2 point size.
pub const G2_BYTES: usize = 96;

/// A secret scalar, kept as zeroized bytes (blstrs scalars do not zeroize themselves).
#[derive(Clone)]
pub struct Secret(Zeroizing<[u8; 32]>);

impl PartialEq for Secret {
    fn eq(&self, other: &Self) -> bool {
        subtle::ConstantTimeEq::ct_eq(&self.0[..], &other.0[..]).into()
    }
}

impl Eq for Secret {}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl Secret {
    /// A uniformly random non-zero scalar from the OS CSPRNG (rejection sampling).
    pub fn random() -> Self {
        loop {
            let mut b = Zeroizing::new([0u8; 32]);
            fill_os(&mut b[..]);
            b[31] &= 0x7f; // q < 2^255: accept about 90 % of draws
            if let Some(s) = Self::from_bytes(*b) {
                return s;
            }
        }
    }

    /// From 32 little-endian bytes; `None` unless canonical and non-zero.
    pub fn from_bytes(bytes: [u8; 32]) -> Option<Self> {
        let s = Option::<Scalar>::from(Scalar::from_bytes_le(&bytes))?;
        (!bool::from(ff::Field::is_zero(&s))).then(|| Self(Zeroizing::new(bytes)))
    }

    /// The scalar.
    pub fn scalar(&self) -> Scalar {
        Scalar::from_bytes_le(&self.0).expect("checked on creation")
    }

    /// The 32 bytes, for storage by the owner.
    pub fn to_bytes(&self) -> [u8; 32] {
        *self.0
    }
}

/// Hashes `msg` to G1 (RFC 9380 `BLS12381G1_XMD:SHA-256_SSWU_RO_`) with a domain tag.
pub fn hash_to_g1(domain: &Domain, msg: &[u8]) -> G1Projective {
    G1Projective::hash_to_curve(msg, &domain.tag(), &[])
}

/// Decodes a compressed G1 point: canonical, in the subgroup, not the identity.
pub fn g1_from_bytes(bytes: &[u8; G1_BYTES]) -> Option<G1Affine> {
    let p = Option::<G1Affine>::from(G1Affine::from_compressed(bytes))?;
    (!bool::from(p.is_identity())).then_some(p)
}

/// Decodes a compressed G2 point: canonical, in the subgroup, not the identity.
pub fn g2_from_bytes(bytes: &[u8; G2_BYTES]) -> Option<G2Affine> {
    let p = Option::<G2Affine>::from(G2Affine::from_compressed(bytes))?;
    (!bool::from(p.is_identity())).then_some(p)
}

/// `e(p, q)` with `q` prepared.
pub fn pair(p: &G1Affine, q: &G2Prepared) -> Gt {
    Bls12::multi_miller_loop(&[(p, q)]).final_exponentiation()
}

/// A 16-byte digest of a pairing value in `domain` (equality tests only need this).
pub fn gt_digest(domain: &Domain, gt: &Gt) -> [u8; 16] {
    use blstrs::Compress;
    let mut bytes = Vec::with_capacity(288);
    gt.write_compressed(&mut bytes).expect("writing to a vector");
    let mut out = [0u8; 16];
    out.copy_from_slice(&domain.hash64(&bytes)[..16]);
    out
}

/// The generator of G2.
pub fn g2_generator() -> G2Affine {
    G2Affine::generator()
}

/// Projective to affine.
pub fn to_affine(p: &G1Projective) -> G1Affine {
    p.to_affine()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::dst::SessionId;

    #[test]
    fn bilinearity_and_decoding() {
        let d = Domain::new("test/pairing", SessionId([3; 32]));
        let (a, b) = (Secret::random(), Secret::random());
        let h = hash_to_g1(&d, b"item");
        let lhs = pair(&(h * a.scalar()).to_affine(), &G2Prepared::from((g2_generator() * b.scalar()).to_affine()));
        let rhs = pair(&(h * (a.scalar() * b.scalar())).to_affine(), &G2Prepared::from(g2_generator()));
        assert_eq!(gt_digest(&d, &lhs), gt_digest(&d, &rhs));
        let enc = h.to_affine().to_compressed();
        assert_eq!(g1_from_bytes(&enc), Some(h.to_affine()));
        assert!(g1_from_bytes(&[0xff; 48]).is_none());
        assert!(g1_from_bytes(&G1Affine::identity().to_compressed()).is_none());
        assert!(g2_from_bytes(&[0; 96]).is_none());
        assert!(Secret::from_bytes([0; 32]).is_none());
        assert!(Secret::from_bytes([0xff; 32]).is_none());
    }
}
