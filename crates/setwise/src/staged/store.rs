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
use super::location::{Location, Put, Unreadable, read_limited, refused, why_unreadable};
use super::message::part_digest;
use super::plan::MAX_BUCKETS;
use super::seed::RunSeed;
use crate::crypto::dst::{self, SessionId};
use crate::error::{Error, Result};
use crate::io::{hex, write_atomic};
use crate::protocols::Role;
use crate::wire::text::{MAX_SHOWN, printable, printable_bytes};
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use std::fs;
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

/// Why a create found an object that a read then did not: another write of the name was
/// in flight (S3 answers a conditional create that meets one with 409, which the client
/// reports as an existing object).
const IN_FLIGHT: &str = "another write of this name was in progress when this one was made: run again";

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

    /// The marker of `role`'s stage `stage` in `bytes`, read from `at` (for errors),
    /// authenticated: its MAC must verify under `key` for run `run`, that stage and that
    /// role before any of its fields is looked at.
    pub fn open(bytes: &[u8], stage: u8, role: Role, at: &str, key: &ExchangeKey, run: &str) -> Result<Marker> {
        let m = Self::from_json(bytes, at)?;
        key.verify(Sealed::Marker { stage, role }, run, &m.mac_fields(), &m.mac, at)?;
        m.check(stage, role, at)?;
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
    pub fn parse(bytes: &[u8], stage: u8, role: Role, at: &str) -> Result<Marker> {
        let m = Self::from_json(bytes, at)?;
        m.check(stage, role, at)?;
        Ok(m)
    }

    fn from_json(bytes: &[u8], at: &str) -> Result<Marker> {
        // serde's messages quote the offending value: the peer's text, shown escaped.
        serde_json::from_slice(bytes)
            .map_err(|e| refused(format!("{at}: not a stage marker ({})", shown(&e.to_string()))))
    }

    fn check(&self, stage: u8, role: Role, at: &str) -> Result<()> {
        let m = self;
        if m.format != FORMAT || m.stage != stage || m.role != role.name() {
            return Err(refused(format!(
                "{at}: a marker of {} stage {} by {}, expected {FORMAT} stage {stage} by {role}",
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

/// [`read_limited`] for a file of this party's own workdir: a bad file there is damage.
fn read_own_file(path: &Path, max: u64) -> Result<Option<Vec<u8>>> {
    read_limited(path, max).map_err(|e| match e {
        Unreadable::Io(e) => Error::file(path, e),
        other => Error::damaged(path, why_unreadable(&other)),
    })
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

    /// The note of `role` in `bytes`, read from `at`, authenticated under `key` for run
    /// `run`; its reason as it may be shown ([`shown`]).
    pub fn open(bytes: &[u8], role: Role, at: &str, key: &ExchangeKey, run: &str) -> Result<String> {
        let note = Self::from_json(bytes, at)?;
        key.verify(Sealed::Abort { role }, run, &note.mac_fields(), &note.mac, at)?;
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

    fn from_json(bytes: &[u8], at: &str) -> Result<Self> {
        serde_json::from_slice(bytes)
            .map_err(|e| refused(format!("{at}: not an abort note ({})", shown(&e.to_string()))))
    }
}

/// The shared exchange of one run: where it is ([`Location`]), and the key and run id
/// under which what is read there is authenticated and what is written is sealed.
///
/// Every part and marker is written once ([`Location::put_new`]): a second write of a
/// name (a retried task, a party restarted after writing it) succeeds only if what is
/// there is what it would write (the same bytes for a part, the same content for a
/// marker), so no name ever holds two versions a reader could see. Readers never list:
/// they read a marker by its name, then the parts it lists by theirs.
#[derive(Debug, Clone)]
pub struct Exchange {
    location: Location,
    auth: Option<(ExchangeKey, String)>,
}

impl Exchange {
    /// The exchange of run `run` at `location` (a directory is created when written to),
    /// whose markers and abort notes are authenticated under `key`.
    pub fn new(location: impl Into<Location>, key: ExchangeKey, run: &str) -> Self {
        Self { location: location.into(), auth: Some((key, run.to_owned())) }
    }

    /// The exchange at `location` without the key, to look at only: markers and notes
    /// are read without being authenticated, and nothing can be written.
    pub fn unauthenticated(location: impl Into<Location>) -> Self {
        Self { location: location.into(), auth: None }
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

    /// Where the exchange is.
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// Object `name` as messages show it (its path, or its `s3://` address).
    pub fn show(&self, name: &str) -> String {
        self.location.show(name)
    }

    /// The name of the marker of `role`'s stage `stage`.
    pub fn marker_name(stage: u8, role: Role) -> String {
        format!("stage-{stage}/{role}.done.json")
    }

    /// The name of `role`'s hello.
    pub fn hello_name(role: Role) -> String {
        format!("stage-0/{role}.hello")
    }

    /// The name of part `part` of `role`'s stage `stage`.
    pub fn part_name(stage: u8, role: Role, part: u32) -> String {
        format!("stage-{stage}/{}/part-{part:05}.bin", role.name())
    }

    /// The name of the note in which `role` says why it stopped the run.
    pub fn abort_name(role: Role) -> String {
        format!("abort-{role}.json")
    }

    /// Reads the exchange's object `name` if it exists, at most `max` bytes (see
    /// [`Location::get`]).
    pub fn read(&self, name: &str, max: u64) -> Result<Option<Vec<u8>>> {
        self.location.get(name, max)
    }

    /// `role`'s marker of stage `stage`, if written.
    pub fn read_marker(&self, stage: u8, role: Role) -> Result<Option<Marker>> {
        let name = Self::marker_name(stage, role);
        let Some(bytes) = self.read(&name, MAX_MARKER_BYTES)? else { return Ok(None) };
        let at = self.show(&name);
        match &self.auth {
            Some((key, run)) => Marker::open(&bytes, stage, role, &at, key, run).map(Some),
            None => Marker::parse(&bytes, stage, role, &at).map(Some),
        }
    }

    /// Seals a marker under the exchange key and writes it (whole or not at all). A
    /// marker already there is kept if it says the same (its
    /// [`content_digest`](Marker::content_digest)), which is what a party restarted
    /// after writing it would write again; another is refused by name.
    pub fn write_marker(&self, m: &Marker) -> Result<()> {
        let (key, run) = self.sealer()?;
        let role = if m.role == "sender" { Role::Sender } else { Role::Receiver };
        let name = Self::marker_name(m.stage, role);
        let mut m = m.clone();
        m.seal(key, run)?;
        let bytes = serde_json::to_vec_pretty(&m).map_err(|e| Error::usage("internal", format!("marker: {e}")))?;
        if self.location.put_new(&name, &bytes)? == Put::Created {
            return Ok(());
        }
        // This party's own object, not the peer's message: what is wrong with it is
        // damage to fix here (exit 2), and the peer is not told to stop.
        let at = self.show(&name);
        match self.read_marker(m.stage, role) {
            Ok(Some(there)) if there.content_digest() == m.content_digest() => Ok(()),
            Ok(Some(_)) => Err(Error::damaged(
                Path::new(&at),
                "already holds another marker of this stage (a marker is written once; is another process \
                 writing this party's side of the run?)",
            )),
            Ok(None) => Err(Error::damaged(Path::new(&at), IN_FLIGHT)),
            // A storage failure is told as it is (it may pass: run again).
            Err(e) if e.is_local() => Err(e),
            Err(e) => Err(Error::damaged(Path::new(&at), format!("already holds a marker that does not open ({e})"))),
        }
    }

    /// Writes part `name` (whole or not at all, once) and returns what its marker entry
    /// says of it. A part already there is kept if it holds these bytes (a retried
    /// task's or a restarted party's: every byte comes from the run seed); another is
    /// refused by name.
    pub fn write_part(
        &self,
        name: &str,
        session: SessionId,
        id: PartId,
        bytes: &[u8],
        items: usize,
    ) -> Result<PartInfo> {
        if self.location.put_new(name, bytes)? == Put::Exists {
            let at = self.show(name);
            match self.read(name, bytes.len() as u64) {
                Ok(Some(there)) if there == bytes => {}
                Ok(None) => return Err(Error::damaged(Path::new(&at), IN_FLIGHT)),
                // A storage failure is told as it is, never as damage to remove.
                Err(e) if e.is_local() => return Err(e),
                _ => {
                    return Err(Error::damaged(
                        Path::new(&at),
                        "already holds other bytes (a part is written once, and a rerun writes the same bytes: \
                         damaged, or written by another run; remove it to have it written again)",
                    ));
                }
            }
        }
        Ok(PartInfo {
            items: items as u64,
            bytes: bytes.len() as u64,
            digest: hex(&part_digest(session, id.stage, id.role, id.part, bytes)),
        })
    }

    /// Reads part `name` that `info` describes and checks its length and digest.
    pub fn read_part(&self, name: &str, info: &PartInfo, session: SessionId, id: PartId) -> Result<Vec<u8>> {
        let at = || self.show(name);
        let bytes = self
            .read(name, info.bytes)?
            .ok_or_else(|| refused(format!("message missing ({} is listed in the marker but absent)", at())))?;
        if bytes.len() as u64 != info.bytes {
            return Err(refused(format!("{}: {} bytes, the marker says {}", at(), bytes.len(), info.bytes)));
        }
        if hex(&part_digest(session, id.stage, id.role, id.part, &bytes)) != info.digest {
            return Err(refused(format!("{}: digest mismatch (damaged or replaced)", at())));
        }
        Ok(bytes)
    }

    /// Why `role` stopped the run, if it did: its reason as it may be shown ([`shown`]),
    /// authenticated (a note that does not verify is refused by name).
    pub fn read_abort(&self, role: Role) -> Result<Option<String>> {
        let name = Self::abort_name(role);
        let Some(bytes) = self.read(&name, MAX_STATE_BYTES)? else { return Ok(None) };
        match &self.auth {
            Some((key, run)) => AbortNote::open(&bytes, role, &self.show(&name), key, run).map(Some),
            None => Ok(Some(AbortNote::shown_unverified(&bytes))),
        }
    }

    /// Records, sealed, that `role` stopped the run because of `error` (replacing an
    /// earlier note: the latest reason is the one that counts).
    pub fn write_abort(&self, role: Role, error: &str) -> Result<()> {
        let (key, run) = self.sealer()?;
        let note = AbortNote::sealed(key, run, role, error);
        let bytes = serde_json::to_vec(&note).map_err(|e| Error::usage("internal", format!("abort note: {e}")))?;
        self.location.put_replace(&Self::abort_name(role), &bytes)
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

    /// The path of object `name` of a directory exchange.
    pub(crate) fn at(e: &Exchange, name: &str) -> PathBuf {
        e.location().as_dir().expect("a directory exchange").join(name)
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
        symlink("/dev/zero", at(&e, &Exchange::abort_name(Role::Sender))).unwrap();
        let e2 = e.clone();
        refused(within(move || e2.read_abort(Role::Sender)), "abort-sender.json: a symbolic link");
        symlink("/dev/zero", at(&e, &Exchange::marker_name(1, Role::Sender))).unwrap();
        refused(within(move || e.read_marker(1, Role::Sender)), "sender.done.json: a symbolic link");
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_as_a_part_is_refused_at_once_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let e = exchange(dir.path());
        fs::create_dir_all(dir.path().join("stage-1/receiver")).unwrap();
        let name = Exchange::part_name(1, Role::Receiver, 0);
        assert!(std::process::Command::new("mkfifo").arg(at(&e, &name)).status().unwrap().success());
        let info = PartInfo { items: 1, bytes: 41, digest: "00".repeat(32) };
        refused(
            within(move || e.read_part(&name, &info, SessionId([5; 32]), id(0))),
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
        refused(e.write_part(&Exchange::part_name(2, Role::Sender, 0), sid, pid, b"x", 0), "stage-2: a symbolic link");
        assert_eq!(fs::read_dir(elsewhere.join("sender")).unwrap().count(), 0, "nothing written through the link");
        fs::write(elsewhere.join("sender.done.json"), b"{}").unwrap();
        refused(e.read_marker(2, Role::Sender), "stage-2: a symbolic link");
        // A part path that is itself a link: refused for writing, its target untouched.
        let target = dir.path().join("target.bin");
        fs::write(&target, b"keep").unwrap();
        let linked = Exchange::part_name(1, Role::Receiver, 1);
        symlink(&target, at(&e, &linked)).unwrap();
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
        fs::write(at(&e, &Exchange::abort_name(Role::Sender)), hostile()).unwrap(); // not even JSON
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
        fs::write(at(&e, &Exchange::marker_name(1, Role::Sender)), serde_json::to_vec(&m).unwrap()).unwrap();
        let refusal = e.read_marker(1, Role::Sender).unwrap_err().to_string();
        assert!(refusal.contains("a marker of"), "{refusal:.100}");
        assert_shown_safely(&refusal);
        let mut v = serde_json::to_value(&m).unwrap();
        v["stage"] = hostile().into();
        fs::write(at(&e, &Exchange::marker_name(1, Role::Sender)), v.to_string()).unwrap();
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
        let p = "stage-1/sender.done.json";
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

    #[test]
    fn a_marker_is_written_once_and_a_rewrite_must_say_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let e = Exchange::new(dir.path(), ExchangeKey::from_bytes([3; 32]), "run-1");
        let m = marker(1, "sender");
        e.write_marker(&m).unwrap();
        // A party restarted after writing it writes it again from another invocation.
        e.write_marker(&Marker { attempt: "ffff".into(), ..m.clone() }).unwrap();
        assert_eq!(e.read_marker(1, Role::Sender).unwrap().unwrap().attempt, m.attempt, "the first is kept");
        let mut other = m.clone();
        other.parts[0].items = 4;
        let why = e.write_marker(&other).unwrap_err().to_string();
        assert!(why.contains("stage-1/sender.done.json: already holds another marker"), "{why}");
        // Abort notes are replaced: the latest reason counts.
        e.write_abort(Role::Sender, "first").unwrap();
        e.write_abort(Role::Sender, "second").unwrap();
        assert_eq!(e.read_abort(Role::Sender).unwrap().as_deref(), Some("second"));
    }

    fn id(part: u32) -> PartId {
        PartId { stage: 1, role: Role::Receiver, part }
    }

    #[test]
    fn parts_are_checked_against_their_marker_entry() {
        let dir = tempfile::tempdir().unwrap();
        let e = exchange(dir.path());
        let sid = SessionId([5; 32]);
        let name = Exchange::part_name(1, Role::Receiver, 3);
        let path = at(&e, &name);
        let info = e.write_part(&name, sid, id(3), b"0123456789", 0).unwrap();
        assert_eq!(e.read_part(&name, &info, sid, id(3)).unwrap(), b"0123456789");
        assert!(e.read_part(&name, &info, sid, id(4)).unwrap_err().to_string().contains("digest"));
        // Written once: the same bytes again (a retried task) are fine, others refused.
        assert_eq!(e.write_part(&name, sid, id(3), b"0123456789", 0).unwrap(), info);
        let other = e.write_part(&name, sid, id(3), b"0123456780", 0).unwrap_err().to_string();
        assert!(other.contains("part-00003.bin: already holds other bytes"), "{other}");
        fs::write(&path, b"0123456780").unwrap();
        assert!(e.read_part(&name, &info, sid, id(3)).unwrap_err().to_string().contains("digest"));
        fs::write(&path, b"01234567890").unwrap();
        assert!(e.read_part(&name, &info, sid, id(3)).is_err());
        fs::remove_file(&path).unwrap();
        assert!(e.read_part(&name, &info, sid, id(3)).unwrap_err().to_string().contains("missing"));
        assert!(e.read_marker(1, Role::Sender).unwrap().is_none());
        fs::create_dir_all(dir.path().join("stage-1")).unwrap();
        fs::write(at(&e, &Exchange::marker_name(1, Role::Sender)), b"{").unwrap();
        assert!(e.read_marker(1, Role::Sender).is_err());
    }
}
