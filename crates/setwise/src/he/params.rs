//! BFV parameters as data, checked against the 128-bit classical security table of the
//! Homomorphic Encryption Standard (2018) for ternary secrets, and against what batching
//! needs.

use super::HeError;
use crate::math::zp::is_prime;

/// Largest total ciphertext-modulus bits for 128-bit security, per ring degree
/// (HE Standard, Table 1, classical, ternary secret).
pub const SECURITY_128: &[(usize, usize)] =
    &[(1024, 27), (2048, 54), (4096, 109), (8192, 218), (16384, 438), (32768, 881)];

/// BFV parameters as data.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HeParams {
    /// Ring degree N (a power of two); also the number of batching slots.
    pub degree: usize,
    /// Plaintext modulus t: a prime ≡ 1 (mod 2N) so that batching works.
    pub plain_modulus: u64,
    /// Bit sizes of the ciphertext moduli, each 10..=62; the sum is log q.
    pub moduli_bits: Vec<usize>,
}

impl HeParams {
    /// Checks security, batching and sizes; the error names the field.
    pub fn validate(&self) -> Result<(), HeError> {
        let n = self.degree;
        let Some(&(_, max_bits)) = SECURITY_128.iter().find(|(d, _)| *d == n) else {
            return Err(HeError::Params(format!("degree {n} is not one of 1024..32768 (powers of two)")));
        };
        let total: usize = self.moduli_bits.iter().sum();
        if total > max_bits {
            return Err(HeError::Params(format!(
                "moduli_bits sum to {total} bits, above the {max_bits} bits that degree {n} allows for 128-bit security"
            )));
        }
        if self.moduli_bits.is_empty() || self.moduli_bits.iter().any(|&b| !(10..=62).contains(&b)) {
            return Err(HeError::Params(format!("moduli_bits {:?}: each must be 10..=62 bits", self.moduli_bits)));
        }
        let t = self.plain_modulus;
        if !is_prime(t) || t % (2 * n as u64) != 1 {
            return Err(HeError::Params(format!(
                "plain_modulus {t} must be a prime ≡ 1 mod 2·degree ({}) for batching",
                2 * n
            )));
        }
        let min_q = *self.moduli_bits.iter().min().expect("non-empty");
        if 64 - t.leading_zeros() as usize + 1 >= min_q {
            return Err(HeError::Params(format!(
                "plain_modulus {t} is too large for a {min_q}-bit ciphertext modulus"
            )));
        }
        Ok(())
    }

    /// The largest prime t ≡ 1 (mod 2N) below 2^bits, for built-in parameters whose
    /// degree and bits are known to have one.
    pub fn batching_prime(degree: usize, bits: u32) -> u64 {
        Self::find_batching_prime(degree, bits).expect("a batching prime for built-in parameters")
    }

    /// The largest prime t ≡ 1 (mod 2N) below 2^bits (what SEAL's
    /// `PlainModulus::Batching(N, bits)` picks, and so what APSI's `plain_modulus_bits`
    /// means), or `None` when the degree is not a power of two up to 2^15 or no such
    /// prime of `bits` bits exists (at most 60 bits).
    pub fn find_batching_prime(degree: usize, bits: u32) -> Option<u64> {
        if !degree.is_power_of_two() || degree > 1 << 15 || !(2..=60).contains(&bits) {
            return None;
        }
        let m = 2 * degree as u64;
        let floor = 1u64 << (bits - 1);
        let mut t = ((1u64 << bits) - 1) / m * m + 1;
        while t > floor {
            if is_prime(t) {
                return Some(t);
            }
            t -= m;
        }
        None
    }

    /// A short description for reports: `N=…,t=…,q=…+…`.
    pub fn describe(&self) -> String {
        let q: Vec<String> = self.moduli_bits.iter().map(|b| b.to_string()).collect();
        format!("N={},t={},q={}", self.degree, self.plain_modulus, q.join("+"))
    }
}
