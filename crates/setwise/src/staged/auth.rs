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
//! role, session, each part's count, length and digest, attempt, version) or of the note
//! (format, role, reason), each length-prefixed. A marker lists its parts' digests (the
//! hello is stage 0's one part), so the parts and the hello are covered through it. A
//! reader derives the key from *its own* run id and the stage and role it expects, and
//! compares in constant time: a marker of another run, stage or role does not verify,
//! and a marker of an earlier attempt of the same run is refused by the session check
//! (stages after the hello) or is the same hello (the nonce comes from the seed).

use super::store::{Marker, create_private};
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
struct Fields(Vec<u8>);

impl Fields {
    fn text(mut self, s: &str) -> Self {
        self.0.extend_from_slice(&(s.len() as u64).to_le_bytes());
        self.0.extend_from_slice(s.as_bytes());
        self
    }

    fn num(mut self, n: u64) -> Self {
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
        let bad =
            || Error::Params(format!("exchange key: 64 hexadecimal digits or 32 raw bytes expected; {HOW_TO_MAKE}"));
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
            Err(Error::Usage(format!("{}: already exists; a key file is never replaced", path.display())))
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

    fn derive(&self, label: &'static str, stage: Option<u8>, role: Role, run: &str) -> Zeroizing<[u8; 32]> {
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

    fn marker_tag(&self, run: &str, stage: u8, role: Role, m: &Marker) -> [u8; 32] {
        let mut f = Fields::default()
            .text(&m.format)
            .text(&m.run)
            .text(&m.protocol)
            .text(&m.operation)
            .num(m.stage.into())
            .text(&m.role)
            .text(&m.session)
            .num(m.parts.len() as u64);
        for p in &m.parts {
            f = f.num(p.items).num(p.bytes).text(&p.digest);
        }
        let f = f.text(&m.attempt).text(&m.setwise);
        let key = self.derive(dst::STAGED_MARKER_MAC, Some(stage), role, run);
        *blake3::keyed_hash(&key, &f.0).as_bytes()
    }

    fn abort_tag(&self, run: &str, role: Role, format: &str, note_role: &str, error: &str) -> [u8; 32] {
        let f = Fields::default().text(format).text(note_role).text(error);
        let key = self.derive(dst::STAGED_ABORT_MAC, None, role, run);
        *blake3::keyed_hash(&key, &f.0).as_bytes()
    }

    /// Sets `m.mac` for run `run` (the stage and role are the marker's own).
    pub fn seal_marker(&self, run: &str, m: &mut Marker) -> Result<()> {
        let role = role_named(&m.role)?;
        m.mac = hex(&self.marker_tag(run, m.stage, role, m));
        Ok(())
    }

    /// Checks, in constant time, that `m` (read from `path`) was sealed under this key
    /// for run `run`, stage `stage` and `role`.
    pub fn verify_marker(&self, run: &str, stage: u8, role: Role, m: &Marker, path: &Path) -> Result<()> {
        check(&self.marker_tag(run, stage, role, m), &m.mac, path)
    }

    /// The MAC (hex) of `role`'s abort note in run `run`.
    pub fn seal_abort(&self, run: &str, role: Role, format: &str, error: &str) -> String {
        hex(&self.abort_tag(run, role, format, role.name(), error))
    }

    /// Checks `role`'s abort note (its `format`, `role` and `error` fields as read, and
    /// its `mac`), read from `path`.
    pub fn verify_abort(&self, run: &str, role: Role, note: &AbortNote, path: &Path) -> Result<()> {
        check(&self.abort_tag(run, role, &note.format, &note.role, &note.error), &note.mac, path)
    }
}

/// An abort note as the exchange holds it (`abort-<role>.json`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AbortNote {
    /// The format ([`super::store::FORMAT`]).
    pub format: String,
    /// The role that stopped the run.
    pub role: String,
    /// Why (the error it failed with).
    pub error: String,
    /// Its MAC, hexadecimal ([`ExchangeKey::seal_abort`]).
    #[serde(default)]
    pub mac: String,
}

fn role_named(name: &str) -> Result<Role> {
    match name {
        "sender" => Ok(Role::Sender),
        "receiver" => Ok(Role::Receiver),
        _ => Err(Error::Usage("a staged run has a sender and a receiver".into())),
    }
}

/// The refusal of a file whose MAC does not verify, naming it.
fn check(want: &[u8; 32], got: &str, path: &Path) -> Result<()> {
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
            path.display()
        ),
    }
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::staged::store::{FORMAT, PartInfo};

    fn marker(stage: u8, role: &str) -> Marker {
        Marker {
            format: FORMAT.into(),
            run: "run-1".into(),
            protocol: "ecdh".into(),
            operation: "intersection".into(),
            stage,
            role: role.into(),
            session: "ab".repeat(32),
            parts: vec![PartInfo { items: 3, bytes: 100, digest: "cd".repeat(32) }],
            attempt: "0011".into(),
            setwise: "0.1.0".into(),
            mac: String::new(),
        }
    }

    #[test]
    fn a_marker_verifies_for_its_run_stage_and_role_under_its_key_only() {
        let k = ExchangeKey::from_bytes([7; 32]);
        let p = Path::new("stage-1/sender.done.json");
        let mut m = marker(1, "sender");
        assert!(k.verify_marker("run-1", 1, Role::Sender, &m, p).unwrap_err().to_string().contains("carries none"));
        k.seal_marker("run-1", &mut m).unwrap();
        k.verify_marker("run-1", 1, Role::Sender, &m, p).unwrap();
        let refused = |r: Result<()>| {
            let e = r.unwrap_err().to_string();
            assert!(e.contains("stage-1/sender.done.json: its MAC does not verify under the exchange key"), "{e}");
        };
        refused(ExchangeKey::from_bytes([8; 32]).verify_marker("run-1", 1, Role::Sender, &m, p));
        refused(k.verify_marker("run-2", 1, Role::Sender, &m, p)); // another run
        refused(k.verify_marker("run-1", 2, Role::Sender, &m, p)); // another stage
        refused(k.verify_marker("run-1", 1, Role::Receiver, &m, p)); // another role
        // Any field changed after sealing.
        for change in [
            |m: &mut Marker| m.parts[0].digest = "ce".repeat(32),
            |m: &mut Marker| m.parts[0].items = 4,
            |m: &mut Marker| m.parts.push(m.parts[0].clone()),
            |m: &mut Marker| m.session = "00".repeat(32),
            |m: &mut Marker| m.attempt.push('0'),
            |m: &mut Marker| m.run = "run-2".into(),
        ] {
            let mut forged = m.clone();
            change(&mut forged);
            refused(k.verify_marker("run-1", 1, Role::Sender, &forged, p));
        }
        // Not even hexadecimal.
        let mut bad = m.clone();
        bad.mac = "zz".into();
        refused(k.verify_marker("run-1", 1, Role::Sender, &bad, p));
    }

    #[test]
    fn abort_notes_verify_for_their_run_and_role_only() {
        let k = ExchangeKey::from_bytes([7; 32]);
        let p = Path::new("abort-sender.json");
        let mac = k.seal_abort("run-1", Role::Sender, FORMAT, "why");
        let note = AbortNote { format: FORMAT.into(), role: "sender".into(), error: "why".into(), mac };
        k.verify_abort("run-1", Role::Sender, &note, p).unwrap();
        assert!(k.verify_abort("run-2", Role::Sender, &note, p).is_err());
        assert!(k.verify_abort("run-1", Role::Receiver, &note, p).is_err());
        let forged = AbortNote { error: "other".into(), ..note.clone() };
        assert!(
            k.verify_abort("run-1", Role::Sender, &forged, p).unwrap_err().to_string().contains("abort-sender.json")
        );
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
