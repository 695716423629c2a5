//! Authenticating what each party writes to the exchange. Anyone who can write the
//! exchange (the storage's operator, a third party with a leaked credential) could
//! otherwise put a hello, markers and parts there before the peer reads them; part
//! digests are keyed only by the public session id, so they stop accidents, not forgers.
//!
//! Both operators hold one **exchange key** (32 random bytes, a file made by
//! `setwise stage keygen`). Every marker and abort note carries a MAC under a key derived
//! from it for that run, that role and that stage:
//!
//! - marker of `stage` by `role` in run `run`: BLAKE3 `derive_key`
//!   ([`dst::STAGED_MARKER_MAC`], exchange key ‖ stage ‖ role ‖ run);
//! - abort note of `role`: `derive_key` ([`dst::STAGED_ABORT_MAC`], exchange key ‖ role ‖ run);
//!
//! keyed BLAKE3 over every field of the marker (format, run, protocol, operation, stage,
//! role, session, each part's count, length and digest, attempt, version, and `last` when
//! set) or of the note (format, role, reason), each length-prefixed. A marker lists its
//! parts' digests (the hello is stage 0's one part), so the parts and the hello are
//! covered through it. A
//! reader derives the key from *its own* run id and the stage and role it expects, and
//! compares in constant time: a marker of another run, stage or role does not verify,
//! and a marker of an earlier attempt of the same run is refused by the session check
//! (stages after the hello) or is the same hello (the nonce comes from the seed).

use crate::crypto::dst;
use crate::crypto::rng::fill_os;
use crate::error::{Deviation, Error, Result};
use crate::io::{from_hex, hex};
use crate::protocols::Role;
use std::fmt;
use std::io::Read;
use std::path::Path;
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

/// How to make a key, for the errors that ask for one.
pub const HOW_TO_MAKE: &str = "make one with `setwise stage keygen FILE` (32 random bytes, 64 hexadecimal digits) \
     and give both operators the same file over a channel they trust";

/// The key both operators hold, under which each party's markers and abort note are
/// authenticated. Zeroized on drop; `Debug` shows its fingerprint only.
#[derive(Clone)]
pub struct ExchangeKey(Zeroizing<[u8; 32]>);

impl fmt::Debug for ExchangeKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ExchangeKey({})", self.fingerprint())
    }
}

/// The canonical bytes a MAC covers: each field length-prefixed, numbers little-endian.
#[derive(Default)]
pub(crate) struct Fields(Vec<u8>);

impl Fields {
    pub(crate) fn text(mut self, s: &str) -> Self {
        self.0.extend_from_slice(&(s.len() as u64).to_le_bytes());
        self.0.extend_from_slice(s.as_bytes());
        self
    }

    pub(crate) fn num(mut self, n: u64) -> Self {
        self.0.extend_from_slice(&n.to_le_bytes());
        self
    }
}

impl ExchangeKey {
    /// A fresh key from the OS CSPRNG.
    pub fn generate() -> Self {
        let mut k = Zeroizing::new([0u8; 32]);
        fill_os(&mut k[..]);
        Self(k)
    }

    /// The key from its 32 bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(Zeroizing::new(bytes))
    }

    /// The key from a key file's bytes: 64 hexadecimal digits (surrounding whitespace
    /// ignored), or exactly 32 raw bytes.
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        if let Ok(raw) = <[u8; 32]>::try_from(bytes) {
            return Ok(Self::from_bytes(raw));
        }
        let bad = || {
            Error::params(
                "exchange_key",
                format!("exchange key: 64 hexadecimal digits or 32 raw bytes expected; {HOW_TO_MAKE}"),
            )
        };
        let text = std::str::from_utf8(bytes).map_err(|_| bad())?;
        let v = Zeroizing::new(from_hex(text.trim()).ok_or_else(bad)?);
        let raw: [u8; 32] = v.as_slice().try_into().map_err(|_| bad())?;
        Ok(Self::from_bytes(raw))
    }

    /// The key in the file at `path` (a regular file of at most 4 KiB; links are
    /// followed, as secret mounts use them).
    pub fn read_file(path: &Path) -> Result<Self> {
        let f = std::fs::File::open(path).map_err(|e| Error::file(path, e))?;
        if !f.metadata().map_err(|e| Error::file(path, e))?.is_file() {
            return Err(Error::damaged(path, "not a regular file: an exchange key file is expected"));
        }
        let mut buf = Zeroizing::new(Vec::new());
        f.take(4097).read_to_end(&mut buf).map_err(|e| Error::file(path, e))?;
        if buf.len() > 4096 {
            return Err(Error::damaged(path, "larger than an exchange key file"));
        }
        Self::parse(&buf).map_err(|e| Error::damaged(path, e.to_string()))
    }

    /// Writes the key to a new file at `path` (64 hexadecimal digits and a newline, mode
    /// 0600, whole or not at all); refuses to replace an existing file.
    pub fn write_new(&self, path: &Path) -> Result<()> {
        let mut text = Zeroizing::new(String::with_capacity(65)); // no reallocation left unwiped
        text.push_str(&self.to_hex());
        text.push('\n');
        if create_private(path, text.as_bytes())? {
            Ok(())
        } else {
            Err(Error::usage("key_file", format!("{}: already exists; a key file is never replaced", path.display())))
        }
    }

    /// The key as 64 hexadecimal digits (what a key file holds).
    pub fn to_hex(&self) -> Zeroizing<String> {
        Zeroizing::new(hex(&self.0[..]))
    }

    /// The key's public fingerprint, for two operators to compare on a call.
    pub fn fingerprint(&self) -> String {
        dst::fingerprint(dst::STAGED_EXCHANGE_KEY_CHECK, &self.0[..])
    }

    /// The MAC key of `what` in run `run`: BLAKE3 `derive_key` in the label of its kind,
    /// over the exchange key, the stage (a marker's), the writer's role and the run id.
    fn derive(&self, what: Sealed, run: &str) -> Zeroizing<[u8; 32]> {
        let (label, stage, role) = match what {
            Sealed::Marker { stage, role } => (dst::STAGED_MARKER_MAC, Some(stage), role),
            Sealed::Abort { role } => (dst::STAGED_ABORT_MAC, None, role),
        };
        let mut material = Zeroizing::new(Vec::with_capacity(32 + 2 + 10 + 8 + run.len()));
        material.extend_from_slice(&self.0[..]);
        if let Some(s) = stage {
            material.push(s);
        }
        material.push(role.name().len() as u8);
        material.extend_from_slice(role.name().as_bytes());
        material.extend_from_slice(&(run.len() as u64).to_le_bytes());
        material.extend_from_slice(run.as_bytes());
        Zeroizing::new(blake3::derive_key(label, &material))
    }

    /// The MAC (hexadecimal) of `fields` as `what` in run `run`.
    pub(crate) fn seal(&self, what: Sealed, run: &str, fields: &Fields) -> String {
        hex(blake3::keyed_hash(&self.derive(what, run), &fields.0).as_bytes())
    }

    /// Checks, in constant time, that `mac` (hexadecimal, as read from `at`, a file's path
    /// or an object's address) is the MAC of `fields` as `what` in run `run`; the refusal
    /// names `at`.
    pub(crate) fn verify(&self, what: Sealed, run: &str, fields: &Fields, mac: &str, at: &str) -> Result<()> {
        let want = blake3::keyed_hash(&self.derive(what, run), &fields.0);
        check(want.as_bytes(), mac, at)
    }
}

/// What a MAC is for: its key differs for each.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Sealed {
    /// The marker of `role`'s stage `stage`.
    Marker {
        /// The stage.
        stage: u8,
        /// The writer's role.
        role: Role,
    },
    /// `role`'s abort note.
    Abort {
        /// The writer's role.
        role: Role,
    },
}

/// Creates the secret file `path` holding `bytes` (a key file here, the run seed in a
/// workdir), whole or not at all: written to a temporary file beside it, readable by its
/// owner only (0600) from its first byte, synced, then linked to `path`, which fails if a
/// file is already there (so two invocations never create two different secrets). False
/// if `path` existed.
pub fn create_private(path: &Path, bytes: &[u8]) -> Result<bool> {
    crate::io::write_new(path, bytes, true).map_err(|e| Error::file(path, e))
}

/// The refusal of a file whose MAC does not verify, naming it.
fn check(want: &[u8; 32], got: &str, at: &str) -> Result<()> {
    let ok = match from_hex(got).and_then(|v| <[u8; 32]>::try_from(v).ok()) {
        Some(tag) => bool::from(tag.ct_eq(want)),
        None => false,
    };
    if ok {
        return Ok(());
    }
    let none = if got.is_empty() { " (it carries none)" } else { "" };
    Err(Deviation::StagedMessage {
        why: format!(
            "{}: its MAC does not verify under the exchange key{none}: written by someone without the key, \
             or the two parties hold different keys (or give different run ids)",
            at
        ),
    }
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_are_separated_by_kind_stage_role_run_and_key() {
        let k = ExchangeKey::from_bytes([7; 32]);
        let f = Fields::default().text("x").num(1);
        let p = "f.json";
        let m = |stage, role| Sealed::Marker { stage, role };
        let mac = k.seal(m(1, Role::Sender), "run-1", &f);
        k.verify(m(1, Role::Sender), "run-1", &f, &mac, p).unwrap();
        for (key, what, run) in [
            (ExchangeKey::from_bytes([8; 32]), m(1, Role::Sender), "run-1"),
            (k.clone(), m(2, Role::Sender), "run-1"),
            (k.clone(), m(1, Role::Receiver), "run-1"),
            (k.clone(), m(1, Role::Sender), "run-2"),
            (k.clone(), Sealed::Abort { role: Role::Sender }, "run-1"),
        ] {
            let e = key.verify(what, run, &f, &mac, p).unwrap_err().to_string();
            assert!(e.contains("f.json: its MAC does not verify under the exchange key"), "{e}");
        }
        assert!(k.verify(m(1, Role::Sender), "run-1", &Fields::default().text("x").num(2), &mac, p).is_err());
        assert!(k.verify(m(1, Role::Sender), "run-1", &f, "zz", p).is_err(), "not hexadecimal");
        let none = k.verify(m(1, Role::Sender), "run-1", &f, "", p).unwrap_err().to_string();
        assert!(none.contains("(it carries none)"), "{none}");
    }

    #[test]
    fn keys_parse_from_hex_or_raw_bytes_and_say_how_to_make_one() {
        let k = ExchangeKey::generate();
        assert_eq!(*ExchangeKey::parse(format!("  {}\n", *k.to_hex()).as_bytes()).unwrap().to_hex(), *k.to_hex());
        assert_eq!(ExchangeKey::parse(&[9; 32]).unwrap().fingerprint(), ExchangeKey::from_bytes([9; 32]).fingerprint());
        for bad in [&b"abcd"[..], &[0xff; 64], &[1; 33]] {
            assert!(ExchangeKey::parse(bad).unwrap_err().to_string().contains("setwise stage keygen"));
        }
        assert_ne!(k.fingerprint(), ExchangeKey::generate().fingerprint());
        assert!(!format!("{k:?}").contains(&*k.to_hex()), "Debug shows the fingerprint only");
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("k");
        std::fs::write(&f, &*k.to_hex()).unwrap();
        assert_eq!(ExchangeKey::read_file(&f).unwrap().fingerprint(), k.fingerprint());
        assert!(ExchangeKey::read_file(dir.path()).is_err(), "a directory");
        let new = dir.path().join("new.key");
        k.write_new(&new).unwrap();
        assert_eq!(ExchangeKey::read_file(&new).unwrap().fingerprint(), k.fingerprint());
        assert!(ExchangeKey::generate().write_new(&new).unwrap_err().to_string().contains("already exists"));
        assert_eq!(ExchangeKey::read_file(&new).unwrap().fingerprint(), k.fingerprint(), "not replaced");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&new).unwrap().permissions().mode() & 0o777, 0o600);
        }
    }
}
