//! Exponent-equality argument (paper Appendix A, Fig. 7), non-interactive by
//! Fiat–Shamir: the client shows that every opened commitment `C_i = h_i^r` uses one
//! secret `r`, without revealing it.
//!
//! Batched: weights `w_i` are hashed from every `(h_i, C_i)`, and one Schnorr-style
//! proof shows `C = H^r` for `H = Σ w_i·h_i`, `C = Σ w_i·C_i` (commitment `A = H^k`,
//! challenge `c = hash(H, C, A)`, response `z = k + c·r`; check `H^z = A·C^c`). If some
//! `C_i ≠ h_i^r`, the combination fails except with probability ≈ 1/q over the weights,
//! so one 80-byte proof replaces one per opening.

use crate::crypto::bls12_381::{G1_BYTES, G1Affine, G1Projective, Scalar, Secret, g1_from_bytes};
use crate::crypto::dst::{self, Domain};
use group::Curve;

/// The proof: `A` (compressed G1) and `z` (32 bytes).
pub const PROOF_BYTES: usize = G1_BYTES + 32;

fn scalar_from_hash(label: &'static str, data: &[u8], counter: u64) -> Scalar {
    let mut h = Domain::fixed(label).hasher();
    h.update(data);
    h.update(&counter.to_le_bytes());
    let mut xof = h.finalize_xof();
    loop {
        let mut b = [0u8; 32];
        xof.fill(&mut b);
        b[31] &= 0x7f;
        if let Some(s) = Option::<Scalar>::from(Scalar::from_bytes_le(&b)) {
            return s;
        }
    }
}

fn combine(bases: &[G1Affine], commitments: &[G1Affine]) -> (G1Projective, G1Projective, Vec<u8>) {
    let mut transcript = Vec::with_capacity(bases.len() * 96);
    for (h, c) in bases.iter().zip(commitments) {
        transcript.extend_from_slice(&h.to_compressed());
        transcript.extend_from_slice(&c.to_compressed());
    }
    let (mut hh, mut cc) = (<G1Projective as group::Group>::identity(), <G1Projective as group::Group>::identity());
    for (i, (h, c)) in bases.iter().zip(commitments).enumerate() {
        let w = scalar_from_hash(dst::AUTHORIZED_EEA_WEIGHT, &transcript, i as u64);
        hh += G1Projective::from(h) * w;
        cc += G1Projective::from(c) * w;
    }
    let mut t = hh.to_affine().to_compressed().to_vec();
    t.extend_from_slice(&cc.to_affine().to_compressed());
    (hh, cc, t)
}

/// Proves `commitments[i] = bases[i]^r` for all `i`.
pub fn prove(r: &Secret, bases: &[G1Affine], commitments: &[G1Affine]) -> [u8; PROOF_BYTES] {
    let (hh, _, mut t) = combine(bases, commitments);
    let k = Secret::random();
    let a = (hh * k.scalar()).to_affine();
    t.extend_from_slice(&a.to_compressed());
    let c = scalar_from_hash(dst::AUTHORIZED_EEA_CHALLENGE, &t, 0);
    let z = k.scalar() + c * r.scalar();
    let mut out = [0u8; PROOF_BYTES];
    out[..G1_BYTES].copy_from_slice(&a.to_compressed());
    out[G1_BYTES..].copy_from_slice(&z.to_bytes_le());
    out
}

/// Checks a proof.
pub fn verify(bases: &[G1Affine], commitments: &[G1Affine], proof: &[u8; PROOF_BYTES]) -> bool {
    if bases.len() != commitments.len() || bases.is_empty() {
        return false;
    }
    let Some(a) = g1_from_bytes(proof[..G1_BYTES].try_into().expect("48 bytes")) else { return false };
    let Some(z) = Option::<Scalar>::from(Scalar::from_bytes_le(proof[G1_BYTES..].try_into().expect("32 bytes"))) else {
        return false;
    };
    let (hh, cc, mut t) = combine(bases, commitments);
    t.extend_from_slice(&a.to_compressed());
    let c = scalar_from_hash(dst::AUTHORIZED_EEA_CHALLENGE, &t, 0);
    hh * z == G1Projective::from(a) + cc * c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::bls12_381::hash_to_g1;

    #[test]
    fn honest_proofs_verify_and_a_wrong_exponent_does_not() {
        let d = Domain::fixed("test/eea");
        let bases: Vec<G1Affine> = (0..5u8).map(|i| hash_to_g1(&d, &[i]).to_affine()).collect();
        let r = Secret::random();
        let commitments: Vec<G1Affine> =
            bases.iter().map(|h| (G1Projective::from(h) * r.scalar()).to_affine()).collect();
        let proof = prove(&r, &bases, &commitments);
        assert!(verify(&bases, &commitments, &proof));
        let mut wrong = commitments.clone();
        wrong[3] = (G1Projective::from(bases[3]) * Secret::random().scalar()).to_affine();
        assert!(!verify(&bases, &wrong, &prove(&r, &bases, &wrong)));
        let mut tampered = proof;
        tampered[60] ^= 1;
        assert!(!verify(&bases, &commitments, &tampered));
        assert!(!verify(&bases[..4], &commitments, &proof));
    }
}
