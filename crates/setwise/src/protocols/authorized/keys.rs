//! The judge's BLS key pair, its public key as hex text, and its fingerprint.

use crate::crypto::bls12_381::{G2_BYTES, G2Affine, Secret, g2_from_bytes, g2_generator};
use crate::crypto::dst::{self, fingerprint};
use crate::error::{Error, Result};
use crate::io::{from_hex, hex, read_small, write_atomic};
use group::Curve;
use std::path::Path;

/// The judge's BLS key pair, `pk = g2^sk`.
#[derive(Debug, Clone)]
pub struct JudgeKey {
    sk: Secret,
    pk: G2Affine,
}

impl JudgeKey {
    /// A fresh key.
    pub fn generate() -> Self {
        Self::from_secret(Secret::random())
    }

    fn from_secret(sk: Secret) -> Self {
        let pk = (g2_generator() * sk.scalar()).to_affine();
        Self { sk, pk }
    }

    /// Loads the secret key from `path`, or creates it there (mode 0600, written
    /// atomically) if absent, so the key survives restarts.
    pub fn load_or_create(path: &Path) -> Result<Self> {
        match read_small(path, 32) {
            Ok(bytes) => {
                let arr: [u8; 32] =
                    bytes.as_slice().try_into().map_err(|_| Error::damaged(path, "not a 32-byte judge key"))?;
                Secret::from_bytes(arr).map(Self::from_secret).ok_or_else(|| Error::damaged(path, "invalid judge key"))
            }
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                Err(Error::damaged(path, "not a 32-byte judge key"))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let key = Self::generate();
                write_atomic(path, &key.sk.to_bytes(), true).map_err(|e| Error::file(path, e))?;
                Ok(key)
            }
            Err(e) => Err(Error::file(path, e)),
        }
    }

    /// The public key.
    pub fn public(&self) -> &G2Affine {
        &self.pk
    }

    pub(crate) fn secret(&self) -> &Secret {
        &self.sk
    }
}

/// A judge public key as hex text (what `judge.pub` holds).
pub fn public_key_hex(pk: &G2Affine) -> String {
    hex(&pk.to_compressed())
}

/// Parses a judge public key from hex text.
pub fn public_key_from_hex(text: &str) -> Result<G2Affine> {
    let bytes = from_hex(text)
        .filter(|b| b.len() == G2_BYTES)
        .ok_or_else(|| Error::params("judge_key", format!("a judge public key is {} hex digits", 2 * G2_BYTES)))?;
    let arr: [u8; G2_BYTES] = bytes.try_into().expect("checked length");
    g2_from_bytes(&arr).ok_or_else(|| Error::params("judge_key", "not a valid BLS12-381 G2 point".into()))
}

/// Reads a judge public key file (hex text).
pub fn read_public_key(path: &Path) -> Result<G2Affine> {
    // 192 hex digits and a newline; a little room for whitespace.
    let bytes = read_small(path, 4096).map_err(|e| Error::file(path, e))?;
    let text = String::from_utf8(bytes).map_err(|_| Error::damaged(path, "not text"))?;
    public_key_from_hex(&text).map_err(|e| Error::damaged(path, e.to_string().replace("invalid parameters: ", "")))
}

/// A short fingerprint of a judge public key (for hellos and reports).
pub fn key_fingerprint(pk: &G2Affine) -> String {
    fingerprint(dst::FINGERPRINT_JUDGE_KEY, &pk.to_compressed())
}
