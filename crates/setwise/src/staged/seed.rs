//! The run seed: 32 bytes from the OS CSPRNG, kept in the party's own workdir (0600),
//! from which every secret and every random choice of the party's stages is derived.
//! A re-run of a stage, or a retried task, therefore computes the same values and writes
//! the same bytes.
//!
//! Derivations are BLAKE3 in a [`Domain`] whose label names the purpose
//! (`setwise/staged/v1/<purpose>`, constants in [`crate::crypto::dst`]) and whose key
//! material is the seed.

use crate::crypto::dst::{self, Domain, SessionId};
use crate::crypto::rng::fill_os;
use zeroize::Zeroizing;

/// A party's per-run secret seed. Never leaves the party's side; zeroized on drop and
/// redacted in `Debug`.
#[derive(Clone)]
pub struct RunSeed(Zeroizing<[u8; 32]>);

impl std::fmt::Debug for RunSeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RunSeed(<redacted>)")
    }
}

impl RunSeed {
    /// A fresh seed from the OS CSPRNG.
    pub fn generate() -> Self {
        let mut s = Zeroizing::new([0u8; 32]);
        fill_os(&mut s[..]);
        Self(s)
    }

    /// A seed read back from its owner's storage.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(Zeroizing::new(bytes))
    }

    /// The seed's bytes, to store on the owner's side only (mode 0600).
    pub fn to_bytes(&self) -> Zeroizing<[u8; 32]> {
        self.0.clone()
    }

    /// 64 bytes for `label` and `input`, derived from the seed.
    pub(crate) fn derive(&self, label: &'static str, input: &[u8]) -> Zeroizing<[u8; 64]> {
        Zeroizing::new(Domain::new(label, SessionId(*self.0)).hash64(input))
    }

    /// The hello nonce of run `run_id`: the same on every re-run of the hello stage.
    pub fn hello_nonce(&self, run_id: &str) -> [u8; 16] {
        let wide = self.derive(dst::STAGED_HELLO_NONCE, run_id.as_bytes());
        wide[..16].try_into().expect("16 bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derivations_are_deterministic_and_separated() {
        let s = RunSeed::from_bytes([7; 32]);
        assert_eq!(s.hello_nonce("r1"), RunSeed::from_bytes([7; 32]).hello_nonce("r1"));
        assert_ne!(s.hello_nonce("r1"), s.hello_nonce("r2"));
        assert_ne!(s.hello_nonce("r1"), RunSeed::from_bytes([8; 32]).hello_nonce("r1"));
        assert_ne!(*s.derive(dst::STAGED_HELLO_NONCE, b"x"), *s.derive(dst::STAGED_ECDH_SCALAR, b"x"));
        assert_ne!(*RunSeed::generate().to_bytes(), *RunSeed::generate().to_bytes());
        assert_eq!(format!("{s:?}"), "RunSeed(<redacted>)");
    }
}
