//! Where a staged run's files live.
//!
//! The **exchange** (shared by both parties; a directory for the CLI, object storage for
//! Spark) holds each stage's messages and, written last, its completion marker:
//!
//! ```text
//! stage-0/<role>.hello            the hello frame        stage-0/<role>.done.json
//! stage-1/<role>/part-00007.bin   bucket (or part) 7     stage-1/<role>.done.json
//! stage-2/sender/part-*.bin                              stage-2/sender.done.json
//!                                                        stage-3/receiver.done.json
//! abort-<role>.json               a party refused the other's messages
//! ```
//!
//! The **workdir** (the party's own, mode 0700) holds `seed.bin` (0600, created
//! exclusively), `run.json` (the settings and input fingerprint of the run),
//! `journal.json` (digests of the peer messages each stage consumed) and the receiver's
//! `result.json`.
//!
//! A marker lists each part's record count, byte length and digest
//! ([`part_digest`]); a reader checks all three before it
//! uses a part, so a damaged, truncated or replaced file is an error naming the stage
//! and the bucket, never a wrong result.

use super::message::part_digest;
use super::plan::MAX_BUCKETS;
use super::seed::RunSeed;
use crate::crypto::dst::{self, SessionId};
use crate::error::{Deviation, Error, Result};
use crate::io::{hex, sync_dir, write_atomic};
use crate::protocols::Role;
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The marker format's name and version.
pub const FORMAT: &str = "setwise-staged/v1";
/// Largest marker read: a part's entry is under 160 bytes, and B ≤ 2^16.
const MAX_MARKER_BYTES: u64 = 4096 + 160 * MAX_BUCKETS as u64;
/// Largest workdir JSON file read (settings, journal, result).
const MAX_STATE_BYTES: u64 = 1 << 20;

/// One part of a stage's message, as the marker lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartInfo {
    /// Records (points) in the part.
    pub items: u64,
    /// Bytes of the part's file.
    pub bytes: u64,
    /// Its digest, hexadecimal.
    pub digest: String,
}

/// Which part: of which stage, written by which role, its index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartId {
    /// The stage.
    pub stage: u8,
    /// The role that writes it.
    pub role: Role,
    /// The bucket or part index.
    pub part: u32,
}

/// The completion marker of one party's stage, written after all its parts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Marker {
    /// [`FORMAT`].
    pub format: String,
    /// The run id.
    pub run: String,
    /// The protocol.
    pub protocol: String,
    /// The operation.
    pub operation: String,
    /// The stage number.
    pub stage: u8,
    /// The role that wrote the stage.
    pub role: String,
    /// The session id (hexadecimal; empty in the hello stage, before there is one).
    pub session: String,
    /// Each part, by index.
    pub parts: Vec<PartInfo>,
    /// A random id of the invocation that completed the stage (tells a re-run from a
    /// stage left alone).
    pub attempt: String,
    /// The setwise version that wrote it.
    pub setwise: String,
}

impl Marker {
    /// The digest of what the stage's messages are (counts and part digests, not who
    /// wrote them when), recorded by the stage that consumes them.
    pub fn content_digest(&self) -> String {
        let mut h = blake3::Hasher::new_derive_key(dst::STAGED_MARKER_CONTENT);
        h.update(&(self.session.len() as u64).to_le_bytes()).update(self.session.as_bytes());
        for p in &self.parts {
            h.update(&p.items.to_le_bytes()).update(&p.bytes.to_le_bytes()).update(p.digest.as_bytes());
        }
        h.finalize().to_hex().to_string()
    }

    /// The marker of `role`'s stage `stage` in `bytes`, read from `path` (for errors).
    pub fn parse(bytes: &[u8], stage: u8, role: Role, path: &Path) -> Result<Marker> {
        let m: Marker = serde_json::from_slice(bytes)
            .map_err(|e| message_error(format!("{}: not a stage marker ({e})", path.display())))?;
        if m.format != FORMAT || m.stage != stage || m.role != role.name() {
            return Err(message_error(format!(
                "{}: a marker of {} stage {} by {}, expected {FORMAT} stage {stage} by {role}",
                path.display(),
                m.format,
                m.stage,
                m.role
            )));
        }
        Ok(m)
    }

    /// Total records over the parts.
    pub fn total_items(&self) -> u64 {
        self.parts.iter().map(|p| p.items).fold(0u64, u64::saturating_add)
    }
}

fn message_error(why: String) -> Error {
    Deviation::StagedMessage { why }.into()
}

/// Reads `path` whole if it exists and holds at most `max` bytes.
fn read_bounded(path: &Path, max: u64) -> Result<Option<Vec<u8>>> {
    let mut f = match fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::file(path, e)),
    };
    let len = f.metadata().map_err(|e| Error::file(path, e))?.len();
    if len > max {
        return Err(message_error(format!("{}: {len} bytes, more than the {max} it can hold", path.display())));
    }
    let mut buf = Vec::with_capacity(len as usize);
    f.read_to_end(&mut buf).map_err(|e| Error::file(path, e))?;
    Ok(Some(buf))
}

/// The shared exchange location of one run.
#[derive(Debug, Clone)]
pub struct Exchange {
    root: PathBuf,
}

impl Exchange {
    /// The exchange at `root` (created when written to).
    pub fn new(root: &Path) -> Self {
        Self { root: root.to_path_buf() }
    }

    /// The exchange's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The marker of `role`'s stage `stage`.
    pub fn marker_path(&self, stage: u8, role: Role) -> PathBuf {
        self.root.join(format!("stage-{stage}")).join(format!("{role}.done.json"))
    }

    /// `role`'s hello.
    pub fn hello_path(&self, role: Role) -> PathBuf {
        self.root.join("stage-0").join(format!("{role}.hello"))
    }

    /// Part `part` of `role`'s stage `stage`.
    pub fn part_path(&self, stage: u8, role: Role, part: u32) -> PathBuf {
        self.root.join(format!("stage-{stage}")).join(role.name()).join(format!("part-{part:05}.bin"))
    }

    /// The file in which `role` says why it stopped the run.
    pub fn abort_path(&self, role: Role) -> PathBuf {
        self.root.join(format!("abort-{role}.json"))
    }

    /// `role`'s marker of stage `stage`, if written.
    pub fn read_marker(&self, stage: u8, role: Role) -> Result<Option<Marker>> {
        let path = self.marker_path(stage, role);
        let Some(bytes) = read_bounded(&path, MAX_MARKER_BYTES)? else { return Ok(None) };
        Marker::parse(&bytes, stage, role, &path).map(Some)
    }

    /// Writes a marker (atomically: it appears complete or not at all).
    pub fn write_marker(&self, m: &Marker) -> Result<()> {
        let role = if m.role == "sender" { Role::Sender } else { Role::Receiver };
        let path = self.marker_path(m.stage, role);
        let bytes = serde_json::to_vec_pretty(m).map_err(|e| Error::Usage(format!("marker: {e}")))?;
        write_file(&path, &bytes, false)
    }

    /// Writes a part (atomically) and returns what its marker entry says of it.
    pub fn write_part(
        &self,
        path: &Path,
        session: SessionId,
        id: PartId,
        bytes: &[u8],
        items: usize,
    ) -> Result<PartInfo> {
        write_file(path, bytes, false)?;
        Ok(PartInfo {
            items: items as u64,
            bytes: bytes.len() as u64,
            digest: hex(&part_digest(session, id.stage, id.role, id.part, bytes)),
        })
    }

    /// Reads the part at `path` that `info` describes and checks its length and digest.
    pub fn read_part(&self, path: &Path, info: &PartInfo, session: SessionId, id: PartId) -> Result<Vec<u8>> {
        let bytes = read_bounded(path, info.bytes)?.ok_or_else(|| {
            message_error(format!("message missing ({} is listed in the marker but absent)", path.display()))
        })?;
        if bytes.len() as u64 != info.bytes {
            return Err(message_error(format!(
                "{}: {} bytes, the marker says {}",
                path.display(),
                bytes.len(),
                info.bytes
            )));
        }
        if hex(&part_digest(session, id.stage, id.role, id.part, &bytes)) != info.digest {
            return Err(message_error(format!("{}: digest mismatch (damaged or replaced)", path.display())));
        }
        Ok(bytes)
    }

    /// Why `role` stopped the run, if it did.
    pub fn read_abort(&self, role: Role) -> Result<Option<String>> {
        let path = self.abort_path(role);
        Ok(read_bounded(&path, MAX_STATE_BYTES)?.map(|b| {
            serde_json::from_slice::<serde_json::Value>(&b)
                .ok()
                .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_owned))
                .unwrap_or_else(|| String::from_utf8_lossy(&b).into_owned())
        }))
    }

    /// Records that `role` stopped the run because of `error`.
    pub fn write_abort(&self, role: Role, error: &str) -> Result<()> {
        let body = serde_json::json!({ "format": FORMAT, "role": role.name(), "error": error });
        write_file(&self.abort_path(role), body.to_string().as_bytes(), false)
    }
}

/// Writes `bytes` to `path` atomically, creating its directory.
fn write_file(path: &Path, bytes: &[u8], private: bool) -> Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|e| Error::file(dir, e))?;
    }
    write_atomic(path, bytes, private).map_err(|e| Error::file(path, e))
}

/// A party's own working directory for one run.
#[derive(Debug, Clone)]
pub struct Workdir {
    root: PathBuf,
}

impl Workdir {
    /// The workdir at `root`, created (mode 0700) if absent.
    pub fn create(root: &Path) -> Result<Self> {
        let mut b = fs::DirBuilder::new();
        b.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
        b.create(root).map_err(|e| Error::file(root, e))?;
        Ok(Self { root: root.to_path_buf() })
    }

    /// The workdir's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn seed_path(&self) -> PathBuf {
        self.root.join("seed.bin")
    }

    /// Whether the seed exists.
    pub fn has_seed(&self) -> bool {
        self.seed_path().exists()
    }

    /// Creates the run seed: written to a private temporary file, synced, then linked to
    /// `seed.bin`, which fails if a seed is already there (exclusive creation), so two
    /// invocations can never hold different seeds for one run.
    pub fn create_seed(&self) -> Result<RunSeed> {
        let path = self.seed_path();
        let seed = RunSeed::generate();
        let tmp = self.root.join(format!(".seed.{}.tmp", std::process::id()));
        let mut o = fs::OpenOptions::new();
        o.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
        let mut f = o.open(&tmp).map_err(|e| Error::file(&tmp, e))?;
        f.write_all(&seed.to_bytes()[..]).and_then(|()| f.sync_all()).map_err(|e| Error::file(&tmp, e))?;
        drop(f);
        let linked = fs::hard_link(&tmp, &path);
        let _ = fs::remove_file(&tmp);
        match linked {
            Ok(()) => {
                sync_dir(&path).map_err(|e| Error::file(&path, e))?;
                Ok(seed)
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => self.read_seed(),
            Err(e) => Err(Error::file(&path, e)),
        }
    }

    /// Reads the run seed, refusing one that others may read.
    pub fn read_seed(&self) -> Result<RunSeed> {
        let path = self.seed_path();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&path).map_err(|e| Error::file(&path, e))?.permissions().mode();
            if mode & 0o077 != 0 {
                return Err(Error::damaged(
                    &path,
                    format!("mode {:o}: the run seed must be readable by its owner only (0600)", mode & 0o777),
                ));
            }
        }
        let bytes = read_bounded(&path, 32)?.ok_or_else(|| Error::damaged(&path, "missing"))?;
        let bytes: [u8; 32] = bytes.try_into().map_err(|_| Error::damaged(&path, "not a 32-byte seed"))?;
        Ok(RunSeed::from_bytes(bytes))
    }

    /// Reads the workdir's JSON file `name`, if present.
    pub fn read_json<T: DeserializeOwned>(&self, name: &str) -> Result<Option<T>> {
        let path = self.root.join(name);
        match read_bounded(&path, MAX_STATE_BYTES) {
            Ok(Some(b)) => serde_json::from_slice(&b).map(Some).map_err(|e| Error::damaged(&path, e.to_string())),
            Ok(None) => Ok(None),
            Err(Error::PeerMisbehaved(_)) => Err(Error::damaged(&path, "too large")),
            Err(e) => Err(e),
        }
    }

    /// Writes the workdir's JSON file `name` (atomically, mode 0600).
    pub fn write_json<T: Serialize>(&self, name: &str, value: &T) -> Result<()> {
        let path = self.root.join(name);
        let bytes = serde_json::to_vec_pretty(value).map_err(|e| Error::Usage(format!("{name}: {e}")))?;
        write_file(&path, &bytes, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_is_private_exclusive_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let w = Workdir::create(&dir.path().join("w")).unwrap();
        assert!(!w.has_seed());
        let s = w.create_seed().unwrap();
        assert_eq!(*w.read_seed().unwrap().to_bytes(), *s.to_bytes());
        assert_eq!(*w.create_seed().unwrap().to_bytes(), *s.to_bytes(), "a second creation keeps the first seed");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let p = dir.path().join("w/seed.bin");
            assert_eq!(fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
            fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
            assert!(w.read_seed().unwrap_err().to_string().contains("0600"));
        }
    }

    fn id(part: u32) -> PartId {
        PartId { stage: 1, role: Role::Receiver, part }
    }

    #[test]
    fn parts_are_checked_against_their_marker_entry() {
        let dir = tempfile::tempdir().unwrap();
        let e = Exchange::new(dir.path());
        let sid = SessionId([5; 32]);
        let path = e.part_path(1, Role::Receiver, 3);
        let info = e.write_part(&path, sid, id(3), b"0123456789", 0).unwrap();
        assert_eq!(e.read_part(&path, &info, sid, id(3)).unwrap(), b"0123456789");
        assert!(e.read_part(&path, &info, sid, id(4)).unwrap_err().to_string().contains("digest"));
        fs::write(&path, b"0123456780").unwrap();
        assert!(e.read_part(&path, &info, sid, id(3)).unwrap_err().to_string().contains("digest"));
        fs::write(&path, b"01234567890").unwrap();
        assert!(e.read_part(&path, &info, sid, id(3)).is_err());
        fs::remove_file(&path).unwrap();
        assert!(e.read_part(&path, &info, sid, id(3)).unwrap_err().to_string().contains("missing"));
        assert!(e.read_marker(1, Role::Sender).unwrap().is_none());
        fs::create_dir_all(dir.path().join("stage-1")).unwrap();
        fs::write(e.marker_path(1, Role::Sender), b"{").unwrap();
        assert!(e.read_marker(1, Role::Sender).is_err());
    }
}
