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
//! and the bucket, never a wrong result. Markers and abort notes carry a MAC under the
//! operators' exchange key ([`auth`](super::auth)), checked before anything in them is
//! used, so only a holder of the key can write what a party reads.
//!
//! Anyone who can write the exchange can put anything there, so every file is read as
//! a regular file opened without following links (a link to `/dev/zero`, a FIFO or a
//! device is refused, never read), through a limit of its maximum size plus one byte,
//! and no file is read or written through a symbolic link below the exchange's root.

use super::auth::{ExchangeKey, Fields, Sealed, create_private};
use super::message::part_digest;
use super::plan::MAX_BUCKETS;
use super::seed::RunSeed;
use crate::crypto::dst::{self, SessionId};
use crate::error::{Deviation, Error, Result};
use crate::io::{hex, write_atomic};
use crate::protocols::Role;
use crate::wire::text::{MAX_SHOWN, printable, printable_bytes};
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The marker format's name and version (v2: markers and abort notes carry a MAC).
pub const FORMAT: &str = "setwise-staged/v2";
/// Largest marker read: a part's entry is under 160 bytes, and B ≤ 2^16.
pub const MAX_MARKER_BYTES: u64 = 4096 + 160 * MAX_BUCKETS as u64;
/// Largest workdir JSON file read (settings, journal, result).
const MAX_STATE_BYTES: u64 = 1 << 20;
/// Most bytes of a JSON file of the party's own workdir (the journal, the replay state
/// with a large intersection's positions, a cluster's tasks): a bound against damage.
const MAX_OWN_STATE_BYTES: u64 = 1 << 32;

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
    /// Whether this is the party's last stage (a replayed run's roles ended in it in
    /// every bucket; [`crate::staged::replay`]). Absent, false, in other markers.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub last: bool,
    /// Its MAC under the exchange key, hexadecimal ([`Marker::seal`]); empty in a marker
    /// that has none, which no reader accepts.
    #[serde(default)]
    pub mac: String,
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
        if self.last {
            h.update(b"last"); // only when set: the digests journaled before it stay valid
        }
        h.finalize().to_hex().to_string()
    }

    /// The marker of `role`'s stage `stage` in `bytes`, read from `path` (for errors),
    /// authenticated: its MAC must verify under `key` for run `run`, that stage and that
    /// role before any of its fields is looked at.
    pub fn open(bytes: &[u8], stage: u8, role: Role, path: &Path, key: &ExchangeKey, run: &str) -> Result<Marker> {
        let m = Self::from_json(bytes, path)?;
        key.verify(Sealed::Marker { stage, role }, run, &m.mac_fields(), &m.mac, path)?;
        m.check(stage, role, path)?;
        Ok(m)
    }

    /// Sets the marker's MAC under `key` for run `run` (its stage and role are its own).
    pub fn seal(&mut self, key: &ExchangeKey, run: &str) -> Result<()> {
        let role = match self.role.as_str() {
            "sender" => Role::Sender,
            "receiver" => Role::Receiver,
            _ => return Err(Error::usage("role", "a staged run has a sender and a receiver")),
        };
        self.mac = key.seal(Sealed::Marker { stage: self.stage, role }, run, &self.mac_fields());
        Ok(())
    }

    /// Every field but the MAC, as the MAC covers them.
    fn mac_fields(&self) -> Fields {
        let mut f = Fields::default()
            .text(&self.format)
            .text(&self.run)
            .text(&self.protocol)
            .text(&self.operation)
            .num(self.stage.into())
            .text(&self.role)
            .text(&self.session)
            .num(self.parts.len() as u64);
        for p in &self.parts {
            f = f.num(p.items).num(p.bytes).text(&p.digest);
        }
        let f = f.text(&self.attempt).text(&self.setwise);
        // Appended only when set, so that the markers written before it verify as they did.
        if self.last { f.text("last") } else { f }
    }

    /// The marker in `bytes` **without** authenticating it (for `setwise stage status`
    /// without the key): checked for its stage and role only.
    pub fn parse(bytes: &[u8], stage: u8, role: Role, path: &Path) -> Result<Marker> {
        let m = Self::from_json(bytes, path)?;
        m.check(stage, role, path)?;
        Ok(m)
    }

    fn from_json(bytes: &[u8], path: &Path) -> Result<Marker> {
        // serde's messages quote the offending value: the peer's text, shown escaped.
        serde_json::from_slice(bytes)
            .map_err(|e| message_error(format!("{}: not a stage marker ({})", path.display(), shown(&e.to_string()))))
    }

    fn check(&self, stage: u8, role: Role, path: &Path) -> Result<()> {
        let m = self;
        if m.format != FORMAT || m.stage != stage || m.role != role.name() {
            return Err(message_error(format!(
                "{}: a marker of {} stage {} by {}, expected {FORMAT} stage {stage} by {role}",
                path.display(),
                shown(&m.format),
                m.stage,
                shown(&m.role)
            )));
        }
        Ok(())
    }

    /// Total records over the parts.
    pub fn total_items(&self) -> u64 {
        self.parts.iter().map(|p| p.items).fold(0u64, u64::saturating_add)
    }
}

/// Peer text (a marker's field, an abort's reason) as it may be shown: control and
/// format characters escaped, at most [`MAX_SHOWN`] characters.
pub fn shown(text: &str) -> String {
    printable(text, MAX_SHOWN)
}

fn message_error(why: String) -> Error {
    Deviation::StagedMessage { why }.into()
}

/// Why a file could not be read as a small regular file.
enum Unreadable {
    /// The path is a symbolic link (not followed).
    Link,
    /// Not a regular file: a FIFO, a device, a directory, a socket.
    NotRegular,
    /// More than the bytes allowed.
    TooLarge(u64),
    /// Any other I/O failure.
    Io(std::io::Error),
}

/// Opens `path` for reading without following a final symbolic link and without waiting
/// on a FIFO (so neither a link to `/dev/zero` nor a FIFO is ever read), and requires a
/// regular file.
fn open_regular(path: &Path) -> std::result::Result<fs::File, Unreadable> {
    let mut o = fs::OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut o, libc::O_NOFOLLOW | libc::O_NONBLOCK);
    let f = o.open(path).map_err(|e| {
        // O_NOFOLLOW fails with ELOOP on Linux and EMLINK on some BSDs: ask the path.
        if fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
            Unreadable::Link
        } else {
            Unreadable::Io(e)
        }
    })?;
    // O_NONBLOCK changes nothing for a regular file, the only kind read on.
    match f.metadata() {
        Ok(m) if m.is_file() => Ok(f),
        Ok(_) => Err(Unreadable::NotRegular),
        Err(e) => Err(Unreadable::Io(e)),
    }
}

/// Reads `path` whole if it exists: a regular file (not a link) of at most `max` bytes,
/// read through a limit of `max + 1` bytes whatever its metadata claims.
fn read_limited(path: &Path, max: u64) -> std::result::Result<Option<Vec<u8>>, Unreadable> {
    let f = match open_regular(path) {
        Ok(f) => f,
        Err(Unreadable::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let hint = f.metadata().map_or(0, |m| m.len()).min(max).min(1 << 20);
    let mut buf = Vec::with_capacity(hint as usize);
    f.take(max.saturating_add(1)).read_to_end(&mut buf).map_err(Unreadable::Io)?;
    if buf.len() as u64 > max {
        return Err(Unreadable::TooLarge(max));
    }
    Ok(Some(buf))
}

/// [`read_limited`] for a file of the exchange, which anyone with write access to it may
/// have put there: a link, a FIFO, a device or an oversized file is the peer's doing (or
/// an intruder's), named by its path.
fn read_exchange_file(path: &Path, max: u64) -> Result<Option<Vec<u8>>> {
    read_limited(path, max).map_err(|e| match e {
        Unreadable::Io(e) => Error::file(path, e),
        other => message_error(format!("{}: {}", path.display(), why_unreadable(&other))),
    })
}

/// [`read_limited`] for a file of this party's own workdir: a bad file there is damage.
fn read_own_file(path: &Path, max: u64) -> Result<Option<Vec<u8>>> {
    read_limited(path, max).map_err(|e| match e {
        Unreadable::Io(e) => Error::file(path, e),
        other => Error::damaged(path, why_unreadable(&other)),
    })
}

fn why_unreadable(e: &Unreadable) -> String {
    match e {
        Unreadable::Link => "a symbolic link (a staged run reads and writes plain files only)".into(),
        Unreadable::NotRegular => "not a regular file (a FIFO, a device or a directory is never read)".into(),
        Unreadable::TooLarge(max) => format!("more than the {max} bytes it can hold"),
        Unreadable::Io(e) => e.to_string(),
    }
}

/// Refuses a path in the exchange that is, or passes through, a symbolic link below the
/// exchange's root (the root itself is the operator's choice). With `create`, missing
/// directories are created one at a time and each checked, so nothing is written
/// through a link planted in the exchange.
fn check_below(root: &Path, path: &Path, create: bool) -> Result<()> {
    let rel = path.strip_prefix(root).map_err(|_| {
        Error::usage("exchange", format!("{} is not in the exchange {}", path.display(), root.display()))
    })?;
    if create {
        fs::create_dir_all(root).map_err(|e| Error::file(root, e))?;
    }
    let mut at = root.to_path_buf();
    let n = rel.components().count();
    for (i, c) in rel.components().enumerate() {
        at.push(c);
        let last = i + 1 == n;
        match fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(message_error(format!("{}: {}", at.display(), why_unreadable(&Unreadable::Link))));
            }
            Ok(m) if last || m.is_dir() => {}
            Ok(_) => return Err(message_error(format!("{}: not a directory", at.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if !create || last {
                    return Ok(());
                }
                match fs::create_dir(&at) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        // Created meanwhile: checked like any other.
                        if fs::symlink_metadata(&at).map(|m| !m.is_dir()).unwrap_or(true) {
                            return Err(message_error(format!("{}: not a directory", at.display())));
                        }
                    }
                    Err(e) => return Err(Error::file(&at, e)),
                }
            }
            Err(e) => return Err(Error::file(&at, e)),
        }
    }
    Ok(())
}

/// An abort note as the exchange holds it (`abort-<role>.json`): why a party stopped
/// the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AbortNote {
    /// [`FORMAT`].
    pub format: String,
    /// The role that stopped the run.
    pub role: String,
    /// Why (the error it failed with).
    pub error: String,
    /// Its MAC under the exchange key, hexadecimal ([`AbortNote::sealed`]).
    #[serde(default)]
    pub mac: String,
}

impl AbortNote {
    /// `role`'s note saying `error`, sealed under `key` for run `run`.
    pub fn sealed(key: &ExchangeKey, run: &str, role: Role, error: &str) -> Self {
        let mut n = Self { format: FORMAT.into(), role: role.name().into(), error: error.into(), mac: String::new() };
        n.mac = key.seal(Sealed::Abort { role }, run, &n.mac_fields());
        n
    }

    fn mac_fields(&self) -> Fields {
        Fields::default().text(&self.format).text(&self.role).text(&self.error)
    }

    /// The note of `role` in `bytes`, read from `path`, authenticated under `key` for run
    /// `run`; its reason as it may be shown ([`shown`]).
    pub fn open(bytes: &[u8], role: Role, path: &Path, key: &ExchangeKey, run: &str) -> Result<String> {
        let note = Self::from_json(bytes, path)?;
        key.verify(Sealed::Abort { role }, run, &note.mac_fields(), &note.mac, path)?;
        Ok(shown(&note.error))
    }

    /// The reason in `bytes` **without** authenticating it (for `setwise stage status`
    /// without the key), as it may be shown.
    pub fn shown_unverified(bytes: &[u8]) -> String {
        match serde_json::from_slice::<AbortNote>(bytes) {
            Ok(n) => shown(&n.error),
            Err(_) => printable_bytes(bytes, MAX_SHOWN),
        }
    }

    fn from_json(bytes: &[u8], path: &Path) -> Result<Self> {
        serde_json::from_slice(bytes)
            .map_err(|e| message_error(format!("{}: not an abort note ({})", path.display(), shown(&e.to_string()))))
    }
}

/// The shared exchange location of one run: where it is, and the key and run id under
/// which what is read there is authenticated and what is written is sealed.
#[derive(Debug, Clone)]
pub struct Exchange {
    root: PathBuf,
    auth: Option<(ExchangeKey, String)>,
}

impl Exchange {
    /// The exchange of run `run` at `root` (created when written to), whose markers and
    /// abort notes are authenticated under `key`.
    pub fn new(root: &Path, key: ExchangeKey, run: &str) -> Self {
        Self { root: root.to_path_buf(), auth: Some((key, run.to_owned())) }
    }

    /// The exchange at `root` without the key, to look at only: markers and notes are
    /// read without being authenticated, and nothing can be written.
    pub fn unauthenticated(root: &Path) -> Self {
        Self { root: root.to_path_buf(), auth: None }
    }

    /// Whether what is read is authenticated.
    pub fn is_authenticated(&self) -> bool {
        self.auth.is_some()
    }

    fn sealer(&self) -> Result<&(ExchangeKey, String)> {
        self.auth
            .as_ref()
            .ok_or_else(|| Error::usage("exchange_key", "writing to a staged exchange needs the exchange key"))
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

    /// Reads the exchange's file at `path` (a regular file, not a link, reached through
    /// no link below the root) if it exists, at most `max` bytes. Also for a front end
    /// that moves the small files itself (the Spark driver on a local path).
    pub fn read_file(&self, path: &Path, max: u64) -> Result<Option<Vec<u8>>> {
        check_below(&self.root, path, false)?;
        read_exchange_file(path, max)
    }

    /// Writes the exchange's file at `path` atomically, creating its directories; refuses
    /// a path that is, or passes through, a symbolic link below the root.
    pub fn write_file(&self, path: &Path, bytes: &[u8]) -> Result<()> {
        check_below(&self.root, path, true)?;
        write_atomic(path, bytes, false).map_err(|e| Error::file(path, e))
    }

    /// `role`'s marker of stage `stage`, if written.
    pub fn read_marker(&self, stage: u8, role: Role) -> Result<Option<Marker>> {
        let path = self.marker_path(stage, role);
        let Some(bytes) = self.read_file(&path, MAX_MARKER_BYTES)? else { return Ok(None) };
        match &self.auth {
            Some((key, run)) => Marker::open(&bytes, stage, role, &path, key, run).map(Some),
            None => Marker::parse(&bytes, stage, role, &path).map(Some),
        }
    }

    /// Seals a marker under the exchange key and writes it (atomically: it appears
    /// complete or not at all).
    pub fn write_marker(&self, m: &Marker) -> Result<()> {
        let (key, run) = self.sealer()?;
        let role = if m.role == "sender" { Role::Sender } else { Role::Receiver };
        let path = self.marker_path(m.stage, role);
        let mut m = m.clone();
        m.seal(key, run)?;
        let bytes = serde_json::to_vec_pretty(&m).map_err(|e| Error::usage("internal", format!("marker: {e}")))?;
        self.write_file(&path, &bytes)
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
        self.write_file(path, bytes)?;
        Ok(PartInfo {
            items: items as u64,
            bytes: bytes.len() as u64,
            digest: hex(&part_digest(session, id.stage, id.role, id.part, bytes)),
        })
    }

    /// Reads the part at `path` that `info` describes and checks its length and digest.
    pub fn read_part(&self, path: &Path, info: &PartInfo, session: SessionId, id: PartId) -> Result<Vec<u8>> {
        let bytes = self.read_file(path, info.bytes)?.ok_or_else(|| {
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

    /// Why `role` stopped the run, if it did: its reason as it may be shown ([`shown`]),
    /// authenticated (a note that does not verify is refused by name).
    pub fn read_abort(&self, role: Role) -> Result<Option<String>> {
        let path = self.abort_path(role);
        let Some(bytes) = self.read_file(&path, MAX_STATE_BYTES)? else { return Ok(None) };
        match &self.auth {
            Some((key, run)) => AbortNote::open(&bytes, role, &path, key, run).map(Some),
            None => Ok(Some(AbortNote::shown_unverified(&bytes))),
        }
    }

    /// Records, sealed, that `role` stopped the run because of `error`.
    pub fn write_abort(&self, role: Role, error: &str) -> Result<()> {
        let (key, run) = self.sealer()?;
        let note = AbortNote::sealed(key, run, role, error);
        let bytes = serde_json::to_vec(&note).map_err(|e| Error::usage("internal", format!("abort note: {e}")))?;
        self.write_file(&self.abort_path(role), &bytes)
    }
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

    /// Takes the workdir's lock (`lock`, an OS file lock held while the returned file is
    /// open): one process at a time runs a party's side of a run, since two could each
    /// run the same stage from different states and use the same randomness on
    /// different messages.
    pub fn lock(&self) -> Result<fs::File> {
        let path = self.root.join("lock");
        let file = fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path);
        let file = file.map_err(|e| Error::file(&path, e))?;
        match file.try_lock() {
            Ok(()) => Ok(file),
            Err(fs::TryLockError::WouldBlock) => Err(Error::usage(
                "workdir",
                format!(
                    "{}: another setwise process is running this party's side of the run; one at a time",
                    path.display()
                ),
            )),
            Err(fs::TryLockError::Error(e)) => Err(Error::file(&path, e)),
        }
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
        if create_private(&path, &seed.to_bytes()[..])? { Ok(seed) } else { self.read_seed() }
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
        let bytes = read_own_file(&path, 32)?.ok_or_else(|| Error::damaged(&path, "missing"))?;
        let bytes: [u8; 32] = bytes.try_into().map_err(|_| Error::damaged(&path, "not a 32-byte seed"))?;
        Ok(RunSeed::from_bytes(bytes))
    }

    /// Reads the workdir's JSON file `name`, if present.
    pub fn read_json<T: DeserializeOwned>(&self, name: &str) -> Result<Option<T>> {
        let path = self.root.join(name);
        match read_own_file(&path, MAX_OWN_STATE_BYTES)? {
            Some(b) => serde_json::from_slice(&b).map(Some).map_err(|e| Error::damaged(&path, e.to_string())),
            None => Ok(None),
        }
    }

    /// Reads the workdir's file `name` (a path below it), if present, at most `max` bytes.
    pub fn read_bytes(&self, name: &str, max: u64) -> Result<Option<Vec<u8>>> {
        read_own_file(&self.root.join(name), max)
    }

    /// Writes the workdir's file `name` (atomically, mode 0600), creating its directory.
    pub fn write_bytes(&self, name: &str, bytes: &[u8]) -> Result<()> {
        let path = self.root.join(name);
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(|e| Error::file(dir, e))?;
        }
        write_atomic(&path, bytes, true).map_err(|e| Error::file(&path, e))
    }

    /// Writes the workdir's JSON file `name` (atomically, mode 0600).
    pub fn write_json<T: Serialize>(&self, name: &str, value: &T) -> Result<()> {
        let path = self.root.join(name);
        let bytes = serde_json::to_vec_pretty(value).map_err(|e| Error::usage("internal", format!("{name}: {e}")))?;
        write_atomic(&path, &bytes, true).map_err(|e| Error::file(&path, e))
    }
}

#[cfg(test)]
pub(crate) mod tests {
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

    /// `f`'s answer, or a failed test if it has none within 10 s: a read that hangs on a
    /// FIFO or streams /dev/zero must fail the test, not hold it.
    fn within<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(std::time::Duration::from_secs(10)).expect("no answer within 10 s: the read hangs")
    }

    /// The exchange at `root` of run `r` under a test key.
    pub(crate) fn exchange(root: &Path) -> Exchange {
        Exchange::new(root, ExchangeKey::from_bytes([3; 32]), "r")
    }

    fn refused<T: std::fmt::Debug>(r: Result<T>, name: &str) {
        let msg = r.expect_err("refused").to_string();
        assert!(msg.contains(name), "the error names {name}: {msg}");
    }

    #[cfg(unix)]
    #[test]
    fn an_abort_file_or_marker_linked_to_dev_zero_is_refused_by_name() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let e = exchange(dir.path());
        fs::create_dir_all(dir.path().join("stage-1")).unwrap();
        symlink("/dev/zero", e.abort_path(Role::Sender)).unwrap();
        let e2 = e.clone();
        refused(within(move || e2.read_abort(Role::Sender)), "abort-sender.json: a symbolic link");
        symlink("/dev/zero", e.marker_path(1, Role::Sender)).unwrap();
        refused(within(move || e.read_marker(1, Role::Sender)), "sender.done.json: a symbolic link");
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_as_a_part_is_refused_at_once_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let e = exchange(dir.path());
        fs::create_dir_all(dir.path().join("stage-1/receiver")).unwrap();
        let fifo = e.part_path(1, Role::Receiver, 0);
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let info = PartInfo { items: 1, bytes: 41, digest: "00".repeat(32) };
        refused(
            within(move || e.read_part(&fifo, &info, SessionId([5; 32]), id(0))),
            "part-00000.bin: not a regular file",
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_linked_stage_directory_or_part_path_is_refused_by_name() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ex");
        let e = exchange(&root);
        fs::create_dir_all(root.join("stage-1/receiver")).unwrap();
        // A stage directory linked elsewhere: nothing is written through it or read from it.
        let elsewhere = dir.path().join("elsewhere");
        fs::create_dir_all(elsewhere.join("sender")).unwrap();
        symlink(&elsewhere, root.join("stage-2")).unwrap();
        let (sid, pid) = (SessionId([5; 32]), PartId { stage: 2, role: Role::Sender, part: 0 });
        refused(e.write_part(&e.part_path(2, Role::Sender, 0), sid, pid, b"x", 0), "stage-2: a symbolic link");
        assert_eq!(fs::read_dir(elsewhere.join("sender")).unwrap().count(), 0, "nothing written through the link");
        fs::write(elsewhere.join("sender.done.json"), b"{}").unwrap();
        refused(e.read_marker(2, Role::Sender), "stage-2: a symbolic link");
        // A part path that is itself a link: refused for writing, its target untouched.
        let target = dir.path().join("target.bin");
        fs::write(&target, b"keep").unwrap();
        let linked = e.part_path(1, Role::Receiver, 1);
        symlink(&target, &linked).unwrap();
        refused(e.write_part(&linked, sid, id(1), b"new", 0), "part-00001.bin: a symbolic link");
        assert_eq!(fs::read(&target).unwrap(), b"keep");
    }

    /// A peer's text meant to rewrite the terminal (clear the screen, set the title, ring
    /// the bell), then a megabyte.
    pub(crate) fn hostile() -> String {
        format!("\u{1b}[2J\u{1b}]0;pwned\u{7}\u{202e}{}", "A".repeat(1_000_000))
    }

    /// Shown text holds no control or format character and stays short.
    pub(crate) fn assert_shown_safely(shown: &str) {
        assert!(!shown.chars().any(|c| c.is_control() || c == '\u{202e}'), "raw control characters: {shown:.200}");
        assert!(shown.len() < 4 * MAX_SHOWN + 400, "{} bytes shown", shown.len());
    }

    #[test]
    fn the_peers_abort_text_and_marker_fields_are_shown_escaped_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let e = exchange(dir.path());
        // A peer holding the key (it is a party) writes a hostile reason.
        e.write_abort(Role::Sender, &hostile()).unwrap();
        let shown = e.read_abort(Role::Sender).unwrap().unwrap();
        assert_shown_safely(&shown);
        assert!(shown.starts_with("\\u{1b}[2J"), "escaped, not dropped: {shown:.40}");
        assert_shown_safely(&Exchange::unauthenticated(dir.path()).read_abort(Role::Sender).unwrap().unwrap());
        fs::write(e.abort_path(Role::Sender), hostile()).unwrap(); // not even JSON
        assert_shown_safely(&e.read_abort(Role::Sender).unwrap_err().to_string());
        assert_shown_safely(&Exchange::unauthenticated(dir.path()).read_abort(Role::Sender).unwrap().unwrap());

        // A marker's fields: in the refusal of a sealed marker that is not the one
        // expected, and in serde's message about a field of the wrong type (which quotes
        // the value, before any MAC is checked).
        fs::create_dir_all(dir.path().join("stage-1")).unwrap();
        let mut m = Marker {
            format: hostile(),
            run: "r".into(),
            protocol: "ecdh".into(),
            operation: "intersection".into(),
            stage: 1,
            role: "sender".into(),
            session: String::new(),
            parts: vec![],
            attempt: "a".into(),
            setwise: "0".into(),
            last: false,
            mac: String::new(),
        };
        m.seal(&ExchangeKey::from_bytes([3; 32]), "r").unwrap();
        fs::write(e.marker_path(1, Role::Sender), serde_json::to_vec(&m).unwrap()).unwrap();
        let refusal = e.read_marker(1, Role::Sender).unwrap_err().to_string();
        assert!(refusal.contains("a marker of"), "{refusal:.100}");
        assert_shown_safely(&refusal);
        let mut v = serde_json::to_value(&m).unwrap();
        v["stage"] = hostile().into();
        fs::write(e.marker_path(1, Role::Sender), v.to_string()).unwrap();
        assert_shown_safely(&e.read_marker(1, Role::Sender).unwrap_err().to_string());
    }

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
            last: false,
            mac: String::new(),
        }
    }

    #[test]
    fn a_marker_opens_for_its_run_stage_and_role_under_its_key_only() {
        let k = ExchangeKey::from_bytes([7; 32]);
        let p = Path::new("stage-1/sender.done.json");
        let json = |m: &Marker| serde_json::to_vec(m).unwrap();
        let mut m = marker(1, "sender");
        let none = Marker::open(&json(&m), 1, Role::Sender, p, &k, "run-1").unwrap_err().to_string();
        assert!(none.contains("carries none"), "{none}");
        m.seal(&k, "run-1").unwrap();
        assert_eq!(Marker::open(&json(&m), 1, Role::Sender, p, &k, "run-1").unwrap(), m);
        let refused = |r: Result<Marker>| {
            let e = r.unwrap_err().to_string();
            assert!(e.contains("stage-1/sender.done.json: its MAC does not verify under the exchange key"), "{e}");
        };
        refused(Marker::open(&json(&m), 1, Role::Sender, p, &ExchangeKey::from_bytes([8; 32]), "run-1"));
        refused(Marker::open(&json(&m), 1, Role::Sender, p, &k, "run-2")); // another run
        refused(Marker::open(&json(&m), 2, Role::Sender, p, &k, "run-1")); // another stage
        refused(Marker::open(&json(&m), 1, Role::Receiver, p, &k, "run-1")); // another role
        for change in [
            |m: &mut Marker| m.parts[0].digest = "ce".repeat(32),
            |m: &mut Marker| m.parts[0].items = 4,
            |m: &mut Marker| m.parts.push(m.parts[0].clone()),
            |m: &mut Marker| m.session = "00".repeat(32),
            |m: &mut Marker| m.attempt.push('0'),
            |m: &mut Marker| m.run = "run-2".into(),
            |m: &mut Marker| m.setwise = "9".into(),
        ] {
            let mut forged = m.clone();
            change(&mut forged);
            refused(Marker::open(&json(&forged), 1, Role::Sender, p, &k, "run-1"));
        }
        let note = AbortNote::sealed(&k, "run-1", Role::Sender, "why");
        let bytes = serde_json::to_vec(&note).unwrap();
        assert_eq!(AbortNote::open(&bytes, Role::Sender, p, &k, "run-1").unwrap(), "why");
        assert!(AbortNote::open(&bytes, Role::Receiver, p, &k, "run-1").is_err());
        assert!(AbortNote::open(&bytes, Role::Sender, p, &k, "run-2").is_err());
        let forged = serde_json::to_vec(&AbortNote { error: "other".into(), ..note }).unwrap();
        assert!(AbortNote::open(&forged, Role::Sender, p, &k, "run-1").is_err());
    }

    fn id(part: u32) -> PartId {
        PartId { stage: 1, role: Role::Receiver, part }
    }

    #[test]
    fn parts_are_checked_against_their_marker_entry() {
        let dir = tempfile::tempdir().unwrap();
        let e = exchange(dir.path());
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
