//! A public permutation of 256-bit strings, modelled as an ideal permutation: a balanced
//! Feistel network on two 128-bit halves with [`ROUNDS`] rounds whose round functions are
//! keyed BLAKE3 (one key per round, derived from a [`Domain`]).
//!
//! Why this construction: compact PSI (Rosulek–Trieu) needs Π and Π⁻¹ that behave like a
//! random permutation to every party, including ones that know the key. A Feistel network
//! with independent random-oracle round functions is indifferentiable from a random
//! permutation with 8 rounds (Dai–Steinberger, CRYPTO 2016; 14 in Holenstein–Künzler–
//! Tessaro, STOC 2011); we use 12 rounds with BLAKE3, a hash already modelled as a random
//! oracle everywhere else in setwise. Cost: 12 short hashes per call, ~1.5 µs, negligible
//! beside the elliptic-curve work per item.

use crate::crypto::dst::Domain;

/// Feistel rounds.
pub const ROUNDS: usize = 12;

/// The permutation Π for one domain.
#[derive(Clone)]
pub struct WidePermutation {
    keys: [[u8; 32]; ROUNDS],
}

impl WidePermutation {
    /// The permutation of `domain`.
    pub fn new(domain: &Domain) -> Self {
        let keys = std::array::from_fn(|i| {
            let h = domain.hash64(&(i as u32).to_le_bytes());
            h[..32].try_into().expect("32 of 64 bytes")
        });
        Self { keys }
    }

    fn round(&self, i: usize, half: &[u8; 16]) -> [u8; 16] {
        let h = blake3::keyed_hash(&self.keys[i], half);
        h.as_bytes()[..16].try_into().expect("16 of 32 bytes")
    }

    /// Π(x).
    pub fn forward(&self, x: &[u8; 32]) -> [u8; 32] {
        let (mut l, mut r) = split(x);
        for i in 0..ROUNDS {
            let f = self.round(i, &r);
            (l, r) = (r, xor(l, f));
        }
        join(&l, &r)
    }

    /// Π⁻¹(y).
    pub fn inverse(&self, y: &[u8; 32]) -> [u8; 32] {
        let (mut l, mut r) = split(y);
        for i in (0..ROUNDS).rev() {
            let f = self.round(i, &l);
            (l, r) = (xor(r, f), l);
        }
        join(&l, &r)
    }
}

fn split(x: &[u8; 32]) -> ([u8; 16], [u8; 16]) {
    (x[..16].try_into().expect("16 bytes"), x[16..].try_into().expect("16 bytes"))
}

fn join(l: &[u8; 16], r: &[u8; 16]) -> [u8; 32] {
    let mut out = [0u8; 32];
    out[..16].copy_from_slice(l);
    out[16..].copy_from_slice(r);
    out
}

fn xor(a: [u8; 16], b: [u8; 16]) -> [u8; 16] {
    std::array::from_fn(|i| a[i] ^ b[i])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::dst::SessionId;

    #[test]
    fn inverse_undoes_forward_and_domains_differ() {
        let a = WidePermutation::new(&Domain::new("test/a", SessionId([1; 32])));
        let b = WidePermutation::new(&Domain::new("test/a", SessionId([2; 32])));
        for i in 0..100u32 {
            let x = *blake3::hash(&i.to_le_bytes()).as_bytes();
            let y = a.forward(&x);
            assert_eq!(a.inverse(&y), x);
            assert_eq!(a.forward(&a.inverse(&x)), x);
            assert_ne!(y, x);
            assert_ne!(b.forward(&x), y);
        }
    }

    #[test]
    fn one_bit_changes_about_half_the_output() {
        let p = WidePermutation::new(&Domain::new("test/avalanche", SessionId::default()));
        let mut total = 0u32;
        for bit in 0..256 {
            let x = [0u8; 32];
            let mut x2 = x;
            x2[bit / 8] ^= 1 << (bit % 8);
            let (y, y2) = (p.forward(&x), p.forward(&x2));
            total += y.iter().zip(&y2).map(|(a, b)| (a ^ b).count_ones()).sum::<u32>();
        }
        let mean = f64::from(total) / 256.0;
        assert!((120.0..136.0).contains(&mean), "mean flipped bits {mean}");
    }
}
