//! A Diffie–Hellman OPRF on ristretto255: `F_k(x) = H_out(x, k·H(x))`.
//!
//! The receiver blinds `b·H(x)`, the key holder returns `k·b·H(x)`, the receiver
//! unblinds with `b⁻¹` and hashes the point with the item into a 32-byte output. The
//! key holder can also evaluate its own items directly. `H` hashes in a fixed domain
//! (no session): outputs outlive a session, e.g. in a preprocessed sender database.
//! Semi-honest 2HashDH (Jarecki et al.), as APSI uses it.

use crate::crypto::dst::Domain;
use crate::crypto::ristretto::{Encoded, ItemHasher, SecretScalar, decode};
use rayon::prelude::*;

/// A 32-byte OPRF output.
pub type Output = [u8; 32];

/// An OPRF key with its hashing domains (`label` names the protocol).
#[derive(Debug, Clone)]
pub struct OprfKey {
    key: SecretScalar,
    hasher: ItemHasher,
    out: Domain,
}

/// The receiver's blinding state: one scalar for the whole batch.
#[derive(Debug)]
pub struct Blinding {
    inverse: SecretScalar,
}

fn domains(label: &'static str, out_label: &'static str) -> (ItemHasher, Domain) {
    (ItemHasher::new(&Domain::fixed(label)), Domain::fixed(out_label))
}

impl OprfKey {
    /// A fresh key for the domains `label` (hash to group) and `out_label` (output).
    pub fn random(label: &'static str, out_label: &'static str) -> Self {
        Self::from_scalar(SecretScalar::random(), label, out_label)
    }

    /// A key from a stored scalar.
    pub fn from_scalar(key: SecretScalar, label: &'static str, out_label: &'static str) -> Self {
        let (hasher, out) = domains(label, out_label);
        Self { key, hasher, out }
    }

    /// The secret scalar (to store the key).
    pub fn scalar(&self) -> &SecretScalar {
        &self.key
    }

    /// The outputs of the key holder's own items.
    pub fn evaluate_items<I: AsRef<[u8]> + Sync>(&self, items: &[I]) -> Vec<Output> {
        // k·H(x) gives the output to anyone (`finish` is a public hash): wiped.
        let points = zeroize::Zeroizing::new(self.key.hash_and_mul(&self.hasher, items));
        items.par_iter().zip(points.par_iter()).map(|(x, p)| finish(&self.out, x.as_ref(), p)).collect()
    }

    /// Evaluates blinded elements from a receiver; `Err(index)` names an invalid one.
    pub fn evaluate_blinded(&self, blinded: &[Encoded]) -> Result<Vec<Encoded>, usize> {
        self.key.mul_encoded(blinded)
    }
}

/// Blinds `items` for an OPRF in the domains `label` / `out_label`.
pub fn blind<I: AsRef<[u8]> + Sync>(items: &[I], label: &'static str) -> (Blinding, Vec<Encoded>) {
    let b = SecretScalar::random();
    let (hasher, _) = domains(label, "");
    let blinded = b.hash_and_mul(&hasher, items);
    (Blinding { inverse: b.invert() }, blinded)
}

/// Unblinds the key holder's answers and derives the outputs; `Err(index)` names an
/// invalid element.
pub fn finalize<I: AsRef<[u8]> + Sync>(
    blinding: Blinding,
    items: &[I],
    evaluated: &[Encoded],
    out_label: &'static str,
) -> Result<Vec<Output>, usize> {
    let points = blinding.inverse.mul_encoded(evaluated)?;
    let out = Domain::fixed(out_label);
    Ok(items.par_iter().zip(points.par_iter()).map(|(x, p)| finish(&out, x.as_ref(), p)).collect())
}

fn finish(out: &Domain, item: &[u8], point: &Encoded) -> Output {
    debug_assert!(decode(point).is_some());
    let mut h = out.hasher();
    h.update(&(item.len() as u64).to_le_bytes());
    h.update(item);
    h.update(point);
    *h.finalize().as_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blind_evaluation_equals_direct_evaluation() {
        let key = OprfKey::random("test/oprf", "test/oprf-out");
        let items: Vec<Vec<u8>> = (0..600u32).map(|i| i.to_le_bytes().to_vec()).collect();
        let direct = key.evaluate_items(&items);
        let (b, blinded) = blind(&items, "test/oprf");
        let evaluated = key.evaluate_blinded(&blinded).unwrap();
        assert_eq!(finalize(b, &items, &evaluated, "test/oprf-out").unwrap(), direct);
        let other = OprfKey::random("test/oprf", "test/oprf-out");
        assert_ne!(other.evaluate_items(&items[..1]), direct[..1]);
        let stored = OprfKey::from_scalar(
            SecretScalar::from_bytes(key.scalar().to_bytes()).unwrap(),
            "test/oprf",
            "test/oprf-out",
        );
        assert_eq!(stored.evaluate_items(&items[..3]), direct[..3]);
    }
}
