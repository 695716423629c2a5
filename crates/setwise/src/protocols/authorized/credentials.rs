//! A client's credentials: the judge's signatures on its items, saved and reused for
//! many intersections.

use super::Mode;
use crate::crypto::bls12_381::{G1_BYTES, G1Affine, G2_BYTES, G2Affine, Secret, g1_from_bytes, g2_from_bytes};
use crate::error::{Error, Result};
use crate::io::write_atomic;
use crate::wire::{Reader, Writer};
use std::path::Path;

const MAGIC: [u8; 8] = *b"SETWCRED";
const VERSION: u32 = 1;

/// Signatures from the judge, bound to the client's identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// Full or partial authorisation.
    pub mode: Mode,
    /// The judge's public key.
    pub judge_pk: G2Affine,
    /// The client identity the signatures are bound to.
    pub client_id: Vec<u8>,
    /// Partial mode: the client's commitment exponent `r` (needed for the OPRF).
    pub r: Option<Secret>,
    /// Each signed item and its signature.
    pub entries: Vec<(Vec<u8>, G1Affine)>,
}

impl Credentials {
    /// Writes the file atomically, readable by its owner only (it holds a secret in
    /// partial mode).
    pub fn save(&self, path: &Path) -> Result<()> {
        let mut w = Writer::with_capacity(64 + self.entries.len() * 80);
        w.raw(&MAGIC).u32(VERSION).u8(self.mode.code());
        w.raw(&self.judge_pk.to_compressed()).bytes(&self.client_id);
        match &self.r {
            Some(r) => w.u8(1).raw(&r.to_bytes()),
            None => w.u8(0),
        };
        w.u32(self.entries.len() as u32);
        for (item, sig) in &self.entries {
            w.bytes(item).raw(&sig.to_compressed());
        }
        let mut bytes = w.into_vec();
        bytes.extend_from_slice(blake3::hash(&bytes).as_bytes());
        write_atomic(path, &bytes, true).map_err(|e| Error::file(path, e))
    }

    /// Reads and checks a credentials file.
    pub fn load(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|e| Error::file(path, e))?;
        Self::decode(&bytes, path)
    }

    /// Decodes and checks the bytes of a credentials file (`path` names it in errors):
    /// magic, checksum, version, every point, every length.
    pub fn decode(bytes: &[u8], path: &Path) -> Result<Self> {
        let damaged = |why: &str| Error::damaged(path, why);
        if bytes.len() < 8 + 32 || bytes[..8] != MAGIC {
            return Err(damaged("not a setwise credentials file"));
        }
        let (body, sum) = bytes.split_at(bytes.len() - 32);
        if blake3::hash(body).as_bytes() != sum {
            return Err(damaged("checksum mismatch (truncated or corrupted)"));
        }
        let bad = |e: crate::wire::WireError| Error::damaged(path, e.to_string());
        let mut r = Reader::new(&body[8..]);
        if r.u32("version").map_err(bad)? != VERSION {
            return Err(damaged("unsupported credentials version"));
        }
        let mode = Mode::from_code(r.u8("mode").map_err(bad)?).ok_or_else(|| damaged("unknown mode"))?;
        let judge_pk = g2_from_bytes(&r.array::<G2_BYTES>("judge key").map_err(bad)?)
            .ok_or_else(|| damaged("invalid judge key"))?;
        let client_id = r.bytes("client id", super::MAX_CLIENT_ID).map_err(bad)?.to_vec();
        let r_secret = match r.u8("has r").map_err(bad)? {
            0 => None,
            _ => Some(Secret::from_bytes(r.array("r").map_err(bad)?).ok_or_else(|| damaged("invalid r"))?),
        };
        // Entries are read as they are present: a count the file merely claims allocates nothing.
        let n = r.u32("count").map_err(bad)? as usize;
        let mut entries = Vec::with_capacity(n.min(r.remaining() / (4 + G1_BYTES)));
        for _ in 0..n {
            let item = r.bytes("item", super::MAX_ITEM).map_err(bad)?.to_vec();
            let sig = g1_from_bytes(&r.array::<G1_BYTES>("signature").map_err(bad)?)
                .ok_or_else(|| damaged("invalid signature point"))?;
            entries.push((item, sig));
        }
        r.finish("credentials").map_err(bad)?;
        Ok(Self { mode, judge_pk, client_id, r: r_secret, entries })
    }
}
