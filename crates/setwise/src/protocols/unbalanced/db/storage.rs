//! The on-disk format. A database is a directory, its owner's only (0700, files 0600):
//!
//! - `MANIFEST`: parameters, preset, build time, key columns, where the OPRF key is and
//!   its check value, each item's digest, the labels, each bundle's bins and the name and
//!   hash of its segment; its own BLAKE3 hash last;
//! - one `seg-<id>` file of coefficients per bundle;
//! - `KEY`: the OPRF key, unless the operator keeps it apart (a key file elsewhere);
//! - `ROWS-…`: the encoded copy, when a load needed one ([`rows`](super::rows));
//! - `LOCK`: the advisory lock that serialises updates.
//!
//! Saving writes new segments first, then the manifest to a temporary file with a unique
//! name, and renames it over `MANIFEST` (the atomic step), then the key; segments no
//! manifest names, and every encoded copy (of an older manifest now), are deleted last,
//! under the lock. While a build runs, its journal and files are there too (`journal`).
//! Loading checks everything the manifest says against the parameters and the items' own
//! bins before anything uses it.

use super::super::labels::{LABEL_NONCE, LabelLayout, MAX_LABEL_BYTES};
use super::super::params::UnbalancedParams;
use super::super::{Digest, MAX_BUNDLES_PER_INDEX};
use super::placement::Layouts;
use super::{Bundle, DbInfo, Labels, SenderDb, oprf_key};
use crate::crypto::dst::{self, Domain};
use crate::crypto::oprf::OprfKey;
use crate::crypto::ristretto::SecretScalar;
use crate::error::{Error, Result};
use crate::he::HeContext;
use crate::io::{private_options, sync_dir, write_atomic};
use crate::wire::{Reader, Writer};
use rayon::prelude::*;
use std::collections::HashSet;
use std::fs::File;
use std::path::{Path, PathBuf};

/// First bytes of a database manifest.
const MAGIC: [u8; 8] = *b"SETWISDB";
/// Version of the layout. 4: item digests instead of OPRF outputs, the key in its own
/// file, the number of key columns. Older databases are refused with a request to
/// rebuild them (they keep the key and every OPRF output in the manifest).
const VERSION: u32 = 4;
/// Longest parameter JSON or preset name accepted from a file.
const MAX_TEXT: usize = 1 << 16;
/// First bytes of a key file.
const KEY_MAGIC: [u8; 8] = *b"SETWIKEY";

/// The manifest's file name in a database directory.
pub(super) const MANIFEST: &str = "MANIFEST";
/// The key's file name in a database directory that keeps its key.
pub(super) const KEY: &str = "KEY";
/// A build's journal ([`journal`](super::journal)).
pub(super) const JOURNAL: &str = "BUILD";
/// A build's OPRF key file, until its final save writes `KEY`.
pub(super) const BUILD_KEY: &str = "BUILD-KEY";
/// A build's OPRF results: item digests and sealed labels.
pub(super) const BUILD_ITEMS: &str = "BUILD-ITEMS";
/// The lock file's name.
const LOCK: &str = "LOCK";

/// A bundle's coefficients as saved: the segment file `seg-<id>` in the database
/// directory and the BLAKE3 hash of its bytes (kept in the manifest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Segment {
    pub(super) id: u64,
    pub(super) hash: [u8; 32],
}

impl Segment {
    fn file_name(id: u64) -> String {
        format!("seg-{id:016x}")
    }
}

/// How a database is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Open {
    /// To serve queries: every segment read, checked and encoded as plaintexts (or, if
    /// the directory holds a valid encoded copy, the plaintexts read from it instead),
    /// held in memory as far as the machine's available memory allows
    /// (`plaintext_budget`); the rest is read per query from the encoded copy on
    /// disk, written beside the segments by the first load that needs it.
    Serve,
    /// As [`Serve`](Self::Serve), holding at most this many bytes of plaintexts in memory.
    ServeWithin(usize),
    /// To serve in compact mode: the coefficients kept, plaintexts encoded per query.
    Compact,
    /// To update ([`insert`](SenderDb::insert), [`remove`](SenderDb::remove),
    /// [`save`](SenderDb::save)): the manifest only, and the directory locked until the
    /// database is dropped, so updates take turns.
    Update,
    /// To inspect ([`info`](SenderDb::info)): the manifest only; no key needed.
    Inspect,
}

/// Where a database's OPRF key is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum KeyPlace {
    /// In the database directory's `KEY` file.
    Directory,
    /// Apart from the data, in a file the operator names when opening it.
    Apart,
}

/// An advisory lock on a database directory (`flock` on its `LOCK` file), released
/// when dropped. Another process waits for it; so does another thread of this process
/// (file locks alone do not order threads that share a process); the thread that holds a
/// directory open for an update gets an error instead of waiting for itself.
#[derive(Debug)]
pub(super) struct DirLock {
    file: File,
    dir: PathBuf,
    exclusive: bool,
}

/// Directories this process holds open for an update, and by which thread.
static UPDATING: std::sync::Mutex<Vec<(PathBuf, std::thread::ThreadId)>> = std::sync::Mutex::new(Vec::new());
/// Woken when an update lock of this process is released.
static RELEASED: std::sync::Condvar = std::sync::Condvar::new();

impl DirLock {
    /// Locks `dir` (exclusive for updates, shared for readers), waiting for the holder.
    pub(super) fn take(dir: &Path, exclusive: bool) -> Result<Self> {
        let path = dir.join(LOCK);
        let file = private_options().read(true).write(true).create(true).truncate(false).open(&path);
        let file = file.map_err(|e| Error::file(&path, e))?;
        let canonical = dir.canonicalize().map_err(|e| Error::file(dir, e))?;
        let me = std::thread::current().id();
        let mut updating = UPDATING.lock().unwrap_or_else(|e| e.into_inner());
        while let Some((_, holder)) = updating.iter().find(|(d, _)| *d == canonical) {
            if *holder == me {
                return Err(Error::usage(
                    "database",
                    format!(
                        "{} is open for an update by this thread: drop that handle before opening it again",
                        dir.display()
                    ),
                ));
            }
            updating = RELEASED.wait(updating).unwrap_or_else(|e| e.into_inner());
        }
        if exclusive {
            updating.push((canonical.clone(), me));
        }
        drop(updating);
        let locked = if exclusive { file.lock() } else { file.lock_shared() };
        let lock = Self { file, dir: canonical, exclusive };
        locked.map_err(|e| Error::file(&path, e))?;
        Ok(lock)
    }

    fn covers(&self, dir: &Path) -> bool {
        dir.canonicalize().is_ok_and(|d| d == self.dir)
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        let _ = self.file.unlock();
        if self.exclusive {
            let mut updating = UPDATING.lock().unwrap_or_else(|e| e.into_inner());
            updating.retain(|(d, _)| *d != self.dir);
            RELEASED.notify_all();
        }
    }
}

/// Creates `dir` (and its parents) and makes it its owner's only.
pub(super) fn private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// A writer that hashes what it writes.
struct HashingWriter<W: std::io::Write> {
    out: W,
    hash: blake3::Hasher,
}

impl<W: std::io::Write> HashingWriter<W> {
    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.hash.update(bytes);
        self.out.write_all(bytes)
    }
}

/// The check value of an OPRF key, kept in the manifest so a wrong key file is refused.
pub(super) fn key_check(key: &OprfKey) -> [u8; 32] {
    let mut bytes = zeroize::Zeroizing::new(key.scalar().to_bytes());
    let mut h = Domain::fixed(dst::UNBALANCED_KEY_CHECK).hasher();
    h.update(&bytes[..]);
    zeroize::Zeroize::zeroize(&mut bytes[..]);
    *h.finalize().as_bytes()
}

/// Writes a key file: magic, the scalar, a BLAKE3 checksum; 0600, atomically.
pub(super) fn write_key(path: &Path, key: &OprfKey) -> Result<()> {
    let mut w = Writer::with_capacity(72);
    w.raw(&KEY_MAGIC).raw(&key.scalar().to_bytes());
    let mut bytes = zeroize::Zeroizing::new(w.into_vec());
    let sum = *blake3::hash(&bytes).as_bytes();
    bytes.extend_from_slice(&sum);
    write_atomic(path, &bytes, true).map_err(|e| Error::file(path, e))
}

/// Reads a key file and checks it against the manifest's check value.
pub(super) fn read_key(path: &Path, check: &[u8; 32]) -> Result<OprfKey> {
    let bytes = zeroize::Zeroizing::new(std::fs::read(path).map_err(|e| Error::file(path, e))?);
    if bytes.len() != 72 || bytes[..8] != KEY_MAGIC || blake3::hash(&bytes[..40]).as_bytes() != &bytes[40..] {
        return Err(Error::damaged(path, "not a setwise database key file, or damaged"));
    }
    let scalar = SecretScalar::from_bytes(bytes[8..40].try_into().expect("32 bytes"))
        .ok_or_else(|| Error::damaged(path, "not a valid OPRF key"))?;
    let key = oprf_key(scalar);
    if &key_check(&key) != check {
        return Err(Error::damaged(path, "the key of another database"));
    }
    Ok(key)
}

/// Writes coefficients as a new segment file (little-endian u32s) in `dir`, synced, 0600,
/// and names it by a random id.
pub(super) fn write_segment(dir: &Path, coeffs: &[u32]) -> std::io::Result<Segment> {
    let bytes: Vec<u8> = coeffs.iter().flat_map(|c| c.to_le_bytes()).collect();
    let mut id = [0u8; 8];
    crate::crypto::rng::fill_os(&mut id);
    let seg = Segment { id: u64::from_le_bytes(id), hash: *blake3::hash(&bytes).as_bytes() };
    let mut f = private_options().write(true).create_new(true).open(dir.join(Segment::file_name(seg.id)))?;
    std::io::Write::write_all(&mut f, &bytes)?;
    f.sync_all()?;
    Ok(seg)
}

/// Refuses a path a database cannot be written to: a file, or a directory that holds
/// something besides a database and what a build of one leaves.
pub(super) fn check_build_dir(path: &Path) -> Result<()> {
    if path.is_file() {
        return Err(Error::damaged(path, "is a file; a database is a directory: choose another path"));
    }
    let foreign = |e: &std::fs::DirEntry| {
        let name = e.file_name().to_string_lossy().into_owned();
        ![MANIFEST, LOCK].contains(&name.as_str())
            && !["BUILD", "seg-", ".BUILD-KEY."].iter().any(|p| name.starts_with(p))
    };
    if path.is_dir()
        && !path.join(MANIFEST).exists()
        && !path.join(JOURNAL).exists()
        && std::fs::read_dir(path).map_err(|e| Error::file(path, e))?.flatten().any(|e| foreign(&e))
    {
        return Err(Error::damaged(path, "is a directory that is not a setwise database: choose a new path"));
    }
    Ok(())
}

/// The key check value in the manifest of `dir`, read from its head without checking
/// the rest (to recognise a build that finished but did not delete its files).
pub(super) fn manifest_key_check(dir: &Path) -> Option<[u8; 32]> {
    let mut head = Vec::new();
    let file = File::open(dir.join(MANIFEST)).ok()?;
    std::io::Read::read_to_end(&mut std::io::Read::take(file, 2 * MAX_TEXT as u64 + 256), &mut head).ok()?;
    let mut r = Reader::new(head.get(8..)?);
    (r.u32("version").ok()? == VERSION).then_some(())?;
    r.str("parameters", MAX_TEXT).ok()?;
    r.str("preset", MAX_TEXT).ok()?;
    r.u64("build time").ok()?;
    r.u32("key columns").ok()?;
    r.u8("key place").ok()?;
    r.array("key check").ok()
}

/// Refuses a directory that holds an unfinished build (its journal), naming how to go on.
pub(super) fn refuse_unfinished_build(dir: &Path) -> Result<()> {
    if dir.join(JOURNAL).exists() {
        return Err(Error::usage(
            "resume",
            format!(
                "{} holds an unfinished build: finish it with `setwise db build --resume` (Python: \
                 resume=True) and the same input, or delete its BUILD file to build anew",
                dir.display()
            ),
        ));
    }
    Ok(())
}

/// Reads a bundle's segment, checking its length, hash and that every coefficient is
/// below the plain modulus.
pub(super) fn read_segment(dir: &Path, seg: Segment, len: usize, p: &UnbalancedParams) -> Result<Vec<u32>> {
    let file = dir.join(Segment::file_name(seg.id));
    let bytes = std::fs::read(&file).map_err(|e| Error::file(&file, e))?;
    let bad = |why: String| Error::damaged(&file, why);
    if bytes.len() != 4 * len {
        return Err(bad(format!(
            "{} bytes where the manifest implies {}: the file is truncated",
            bytes.len(),
            4 * len
        )));
    }
    if blake3::hash(&bytes).as_bytes() != &seg.hash {
        return Err(bad("checksum mismatch: the file is corrupted".into()));
    }
    let t = p.seal_params.plain_modulus;
    let coeffs: Vec<u32> = bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    if coeffs.iter().any(|&c| c as u64 >= t) {
        return Err(bad("a coefficient is not below the plain modulus".into()));
    }
    Ok(coeffs)
}

impl SenderDb {
    /// Saves the database as the directory `path` (created 0700): a segment file per
    /// bundle changed since it was last saved there (written and synced first), then the
    /// manifest, written to a temporary file with a unique name and renamed over the old
    /// one, which is the atomic step: an interrupted save leaves the old manifest and the
    /// segments it names; then the key file unless the key is kept apart. Segments no
    /// manifest names are deleted last. All of it happens under the directory's lock; a
    /// directory holding an unfinished build (another's) is refused.
    pub fn save(&mut self, path: &Path) -> Result<()> {
        let io = |source| Error::file(path, source);
        // Saving deletes the segment files its manifest does not name, so it refuses a
        // directory that holds anything but a database, and another build's journal
        // (its segments are named by no manifest yet); the build itself holds the lock.
        let held = self.lock.as_ref().is_some_and(|l| l.covers(path));
        if !held {
            refuse_unfinished_build(path)?;
        }
        check_build_dir(path)?;
        private_dir(path).map_err(io)?;
        let _lock = if held { None } else { Some(DirLock::take(path, true)?) };
        if !held {
            // Again under the lock: a build may have begun meanwhile.
            refuse_unfinished_build(path)?;
        }
        let key = self.key()?.clone();
        let same = self.dir.as_deref().is_some_and(|d| d.canonicalize().ok() == path.canonicalize().ok());
        let src = self.dir.as_deref();
        let segments = self
            .indices
            .par_iter()
            .flatten()
            .map(|b| match (b.saved, same, src) {
                (Some(seg), true, _) => Ok(seg),
                (Some(seg), false, Some(src)) => {
                    let f = Segment::file_name(seg.id);
                    let mut to =
                        private_options().write(true).create(true).truncate(true).open(path.join(&f)).map_err(io)?;
                    std::io::copy(&mut File::open(src.join(&f)).map_err(io)?, &mut to).map_err(io)?;
                    to.sync_all().map_err(io)?;
                    Ok(seg)
                }
                _ => {
                    let coeffs = b
                        .coeffs
                        .as_ref()
                        .ok_or_else(|| Error::usage("database", "coefficients were dropped before saving"))?;
                    write_segment(path, coeffs).map_err(io)
                }
            })
            .collect::<Result<Vec<Segment>>>()?;
        let mut nonce = [0u8; 8];
        crate::crypto::rng::fill_os(&mut nonce);
        let tmp = path.join(format!("{MANIFEST}.{:016x}.tmp", u64::from_le_bytes(nonce)));
        let written = (|| {
            let f = private_options().write(true).create_new(true).open(&tmp)?;
            self.write_manifest(&segments, &key, &f)?;
            f.sync_all()?;
            std::fs::rename(&tmp, path.join(MANIFEST))?;
            // The rename is durable once the directory is synced.
            sync_dir(&path.join(MANIFEST))
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(io(e));
        }
        // The key after the manifest: a key written over another database's (a build
        // over it) must not precede the rename that replaces that database. Until it is
        // written, a load finds the new key in the build's BUILD-KEY (`open`).
        match self.key_place {
            KeyPlace::Directory => write_key(&path.join(KEY), &key)?,
            KeyPlace::Apart => match std::fs::remove_file(path.join(KEY)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(e)),
                _ => {}
            },
        }
        for (b, seg) in self.indices.iter_mut().flatten().zip(&segments) {
            b.saved = Some(*seg);
        }
        self.dir = Some(path.to_path_buf());
        // Segments of replaced bundles, what an interrupted earlier save left, and the
        // encoded copies, all of an older manifest (a server reading one keeps it open);
        // and a finished build's key and items files, once no journal names them.
        let live: HashSet<String> = segments.iter().map(|s| Segment::file_name(s.id)).collect();
        let build_over = !path.join(JOURNAL).exists();
        for entry in std::fs::read_dir(path).map_err(io)?.flatten() {
            let file = entry.file_name().to_string_lossy().into_owned();
            let stale_manifest = file.starts_with("MANIFEST.") && file.ends_with(".tmp");
            let stale_build = build_over && [BUILD_KEY, BUILD_ITEMS].contains(&file.as_str());
            // A key file's temporary copy a killed write left (it holds the key).
            let stale_key = (file.starts_with(".KEY.") || file.starts_with(".BUILD-KEY.")) && file.ends_with(".tmp");
            if (file.starts_with("seg-") && !live.contains(&file))
                || stale_manifest
                || stale_build
                || stale_key
                || super::rows::is_copy(&file)
            {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        Ok(())
    }

    /// Keeps the OPRF key apart from the data: writes it to `key_file` (0600,
    /// atomically); the database directory then holds no key (the next
    /// [`save`](Self::save) deletes its `KEY` file), and opening it to serve or update
    /// needs the key file. A reader of the directory alone can neither test items nor
    /// open labels.
    pub fn keep_key_apart(&mut self, key_file: &Path) -> Result<()> {
        write_key(key_file, self.key()?)?;
        self.key_place = KeyPlace::Apart;
        Ok(())
    }

    /// Writes the manifest, BLAKE3 hash last, streaming the large sections (digests,
    /// labels) from memory instead of copying them into one buffer.
    fn write_manifest(&self, segments: &[Segment], key: &OprfKey, out: impl std::io::Write) -> std::io::Result<()> {
        let mut out =
            HashingWriter { out: std::io::BufWriter::with_capacity(1 << 20, out), hash: blake3::Hasher::new() };
        let mut w = Writer::with_capacity(1 << 16);
        w.raw(&MAGIC).u32(VERSION);
        w.bytes(self.params.to_json().as_bytes());
        w.bytes(self.info.preset.as_bytes()).u64(self.info.build_ms).u32(self.key_columns as u32);
        w.u8(match self.key_place {
            KeyPlace::Directory => 0,
            KeyPlace::Apart => 1,
        })
        .raw(&key_check(key));
        w.u32(self.items.len() as u32);
        out.put(&w.into_vec())?;
        out.put(self.items.as_flattened())?;
        let mut w = Writer::with_capacity(1 << 12);
        match &self.labels {
            None => {
                w.u8(0);
                out.put(&w.into_vec())?;
            }
            Some(l) => {
                w.u8(1).u32(l.layout.record_bytes as u32).u32(l.layout.columns.len() as u32);
                l.layout.columns.iter().for_each(|c| {
                    w.bytes(c.as_bytes());
                });
                out.put(&w.into_vec())?;
                out.put(&l.records)?;
            }
        };
        let mut segments = segments.iter();
        for bundles in &self.indices {
            out.put(&(bundles.len() as u32).to_le_bytes())?;
            for (b, seg) in bundles.iter().zip(segments.by_ref()) {
                let mut w = Writer::with_capacity(40 + b.bins.iter().map(|x| 4 + 4 * x.len()).sum::<usize>());
                w.u64(seg.id).raw(&seg.hash);
                for ids in &b.bins {
                    w.u32(ids.len() as u32);
                    for &id in ids {
                        w.u32(id);
                    }
                }
                out.put(&w.into_vec())?;
            }
        }
        let sum = out.hash.finalize();
        std::io::Write::write_all(&mut out.out, sum.as_bytes())?;
        std::io::Write::flush(&mut out.out)
    }

    /// Coefficients in one bundle's segment.
    pub(super) fn segment_len(&self) -> usize {
        let parts = self.labels.as_ref().map_or(0, |l| l.layout.parts);
        (1 + parts) * (self.params.table_params.max_items_per_bin + 1) * self.params.seal_params.poly_modulus_degree
    }

    /// Loads a database to serve it (see [`open`](Self::open)); its key in its directory.
    pub fn load(path: &Path) -> Result<Self> {
        Self::open(path, Open::Serve, None)
    }

    /// Loads a database to serve it in compact mode (see [`open`](Self::open)).
    pub fn load_compact(path: &Path) -> Result<Self> {
        Self::open(path, Open::Compact, None)
    }

    /// Loads a database to update it (see [`open`](Self::open)).
    pub fn load_for_update(path: &Path) -> Result<Self> {
        Self::open(path, Open::Update, None)
    }

    /// Opens the database directory `path` for `how`, with its OPRF key from `key_file`
    /// if it keeps the key apart (else from the directory; [`Open::Inspect`] needs none).
    /// Everything the manifest says is checked first: magic, version, checksum, counts
    /// against the parameters, and every bin's items against the items' own bins (an
    /// item twice in a bin, or in a bin it does not hash to, is refused by name).
    /// Readers hold the directory's shared lock while they load, updaters its exclusive
    /// lock until the database is dropped.
    pub fn open(path: &Path, how: Open, key_file: Option<&Path>) -> Result<Self> {
        let bad = |why: String| Error::damaged(path, why);
        if path.is_file() {
            let mut head = [0u8; 8];
            let old = File::open(path)
                .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
                .is_ok_and(|()| head == MAGIC);
            return Err(bad(if old {
                "a single-file database of format version 1: rebuild it with `setwise db build`".into()
            } else {
                "not a setwise database (a database is a directory with a MANIFEST)".into()
            }));
        }
        if !path.join(MANIFEST).is_file() {
            refuse_unfinished_build(path)?;
            return Err(bad("not a setwise database (no MANIFEST)".into()));
        }
        let lock = DirLock::take(path, how == Open::Update)?;
        if how == Open::Update {
            // Its save would delete the unfinished build's segments.
            refuse_unfinished_build(path)?;
        }
        let manifest = path.join(MANIFEST);
        let bytes = std::fs::read(&manifest).map_err(|e| Error::file(&manifest, e))?;
        let mut db = Self::decode_manifest(&bytes, path)?;
        let key = match (&db.key_place, key_file, how) {
            (_, _, Open::Inspect) => None,
            (_, Some(file), _) => Some(file.to_path_buf()),
            (KeyPlace::Directory, None, _) => Some(path.join(KEY)),
            (KeyPlace::Apart, None, _) => {
                return Err(Error::usage(
                    "key_file",
                    format!("{} keeps its OPRF key apart: give its key file (--key-file)", path.display()),
                ));
            }
        };
        if let (Some(file), Some(check)) = (key, db.key_check) {
            db.oprf = Some(match read_key(&file, &check) {
                Ok(key) => key,
                // A build stopped between its manifest and its key: the key is still in
                // its BUILD-KEY.
                Err(e) => read_key(&path.join(BUILD_KEY), &check).map_err(|_| e)?,
            });
        }
        let manifest_hash: [u8; 32] =
            bytes[bytes.len() - 32..].try_into().expect("a checked manifest ends in its hash");
        // The manifest holds every digest, record and bin: freed before the plaintexts'
        // budget is taken from the memory left, which `auto` predicts without it.
        drop(bytes);
        let (p, len) = (&db.params, db.segment_len());
        match how {
            Open::Serve | Open::ServeWithin(_) => {
                let budget = plaintext_budget(crate::io::memory::available_memory(), db.bundle_bytes());
                let budget = match how {
                    Open::ServeWithin(cap) => Some(budget.map_or(cap, |b| b.min(cap))),
                    _ => budget,
                };
                db.load_encoded(path, manifest_hash, budget)?;
            }
            Open::Compact => {
                db.indices.par_iter_mut().flatten().try_for_each(|b| {
                    b.coeffs = Some(read_segment(path, b.saved.expect("every loaded bundle is saved"), len, p)?);
                    Ok::<_, Error>(())
                })?;
                db.info.compact = true;
            }
            Open::Update => db.lock = Some(lock),
            Open::Inspect => {}
        }
        db.refresh_info();
        Ok(db)
    }

    /// Decodes and checks a manifest (of the directory `path`, for errors). The key is
    /// not read here: the database comes back without it.
    pub fn decode_manifest(bytes: &[u8], path: &Path) -> Result<Self> {
        let bad = |why: String| Error::damaged(path, why);
        if bytes.len() < MAGIC.len() + 4 + 32 || bytes[..8] != MAGIC {
            return Err(bad("not a setwise database (bad magic in MANIFEST)".into()));
        }
        let (body, sum) = bytes.split_at(bytes.len() - 32);
        if blake3::Hasher::new().update_rayon(body).finalize().as_bytes() != sum {
            return Err(bad("MANIFEST checksum mismatch: the file is truncated or corrupted".into()));
        }
        let mut r = Reader::new(&body[8..]);
        let wire = |e: crate::wire::WireError| Error::damaged(path, e.to_string());
        let version = r.u32("version").map_err(wire)?;
        if version != VERSION {
            return Err(bad(format!(
                "database format version {version}, this setwise reads version {VERSION}: rebuild it with `setwise db build`"
            )));
        }
        let json = r.str("parameters", MAX_TEXT).map_err(wire)?;
        let params = UnbalancedParams::from_json(json).map_err(|e| bad(e.to_string()))?;
        let preset = r.str("preset", MAX_TEXT).map_err(wire)?.to_string();
        let build_ms = r.u64("build time").map_err(wire)?;
        let key_columns = match r.u32("key columns").map_err(wire)? {
            0 => return Err(bad("zero key columns".into())),
            n => n as usize,
        };
        let key_place = match r.u8("key place").map_err(wire)? {
            0 => KeyPlace::Directory,
            1 => KeyPlace::Apart,
            _ => return Err(bad("unknown key place".into())),
        };
        let key_check = Some(r.array("key check").map_err(wire)?);
        let n_items = r.u32("item count").map_err(wire)? as usize;
        let items: Vec<Digest> = r.records::<32>(n_items, "items").map_err(wire)?.to_vec();
        let labels = match r.u8("labelled").map_err(wire)? {
            0 => None,
            _ => {
                let record_bytes = r.u32("label record size").map_err(wire)? as usize;
                if !(LABEL_NONCE + 2..=LABEL_NONCE + 2 + MAX_LABEL_BYTES).contains(&record_bytes) {
                    return Err(bad(format!("label record size {record_bytes} is out of range")));
                }
                let ncols = r.count("label columns", 256).map_err(wire)?;
                let columns = (0..ncols)
                    .map(|_| r.str("label column", MAX_TEXT).map(str::to_string))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(wire)?;
                let layout = LabelLayout::new(&params, columns, record_bytes - LABEL_NONCE - 2);
                let records = r.take(n_items * record_bytes, "label records").map_err(wire)?.to_vec();
                Some(Labels { layout, records })
            }
        };
        let (bpb, b) = (params.bins_per_bundle(), params.table_params.max_items_per_bin);
        let mut indices = Vec::with_capacity(params.bundle_indices());
        for _ in 0..params.bundle_indices() {
            let count = r.count("bundle count", MAX_BUNDLES_PER_INDEX).map_err(wire)?;
            let mut bundles = Vec::new();
            for _ in 0..count {
                let id = r.u64("segment id").map_err(wire)?;
                let hash = r.array("segment hash").map_err(wire)?;
                let mut bins = Vec::with_capacity(bpb);
                for _ in 0..bpb {
                    let m = r.count("bin size", b).map_err(wire)?;
                    let ids = r.records::<4>(m, "bin items").map_err(wire)?.iter().map(|x| u32::from_le_bytes(*x));
                    bins.push(ids.collect::<Vec<u32>>());
                }
                let mut bundle = Bundle::empty(0);
                bundle.bins = bins;
                bundle.saved = Some(Segment { id, hash });
                bundle.rebuild = false;
                bundles.push(bundle);
            }
            indices.push(bundles);
        }
        r.finish("database").map_err(wire)?;
        check_placement(&params, &items, &indices, labels.is_some()).map_err(bad)?;
        let ctx = HeContext::new(&params.he()).map_err(|e| bad(e.to_string()))?;
        let level = params.eval_level().map_err(|e| bad(e.to_string()))?;
        let mut db = Self {
            params,
            ctx,
            level,
            oprf: None,
            items,
            indices,
            labels,
            dir: Some(path.to_path_buf()),
            key_columns,
            key_place,
            key_check,
            lock: None,
            rows: None,
            info: DbInfo { preset, build_ms, ..Default::default() },
        };
        db.refresh_info();
        Ok(db)
    }
}

/// Checks that the bins a manifest lists are what placing its items gives: every id names
/// an item, no bin lists an item twice, each item sits in each of its distinct candidate
/// bins exactly once (at one bundle of that bin's index), and in a labelled database no
/// two items of a bundle's bin share a field element at one position (label
/// interpolation needs distinct points). Bundle indices are checked in parallel; each
/// item's placements are one bit per candidate bin, so a second listing is a bit already
/// set and a missing one a bit never set.
fn check_placement(
    p: &UnbalancedParams,
    items: &[Digest],
    indices: &[Vec<Bundle>],
    labelled: bool,
) -> std::result::Result<(), String> {
    use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
    let (bpb, k) = (p.bins_per_bundle(), p.item_params.felts_per_item);
    let layouts = Layouts::of(p, items, None);
    let placed: Vec<AtomicU8> = items.iter().map(|_| AtomicU8::new(0)).collect();
    // The first bundle index with a lie names it, so the message is the same every time.
    let check_index = |values: &mut Vec<u64>, (bi, bundles): (usize, &Vec<Bundle>)| {
        for bundle in bundles {
            for (lb, ids) in bundle.bins.iter().enumerate() {
                let bin = (bi * bpb + lb) as u32;
                for &id in ids {
                    if id as usize >= items.len() {
                        return Err(format!("bin {bin} lists item {id}, which does not exist"));
                    }
                    let Ok(j) = layouts.bins(id).binary_search(&bin) else {
                        return Err(format!("bin {bin} lists item {id}, which does not hash to it"));
                    };
                    if placed[id as usize].fetch_or(1 << j, Relaxed) & (1 << j) != 0 {
                        return Err(format!("bin {bin} lists item {id} twice"));
                    }
                }
                if labelled {
                    for f in 0..k {
                        values.clear();
                        values.extend(ids.iter().map(|&id| layouts.felts(id)[f]));
                        values.sort_unstable();
                        if values.windows(2).any(|w| w[0] == w[1]) {
                            return Err(format!("two items of bin {bin} share a field element"));
                        }
                    }
                }
            }
        }
        Ok(())
    };
    if let Some(lie) = indices.par_iter().enumerate().map_init(Vec::new, check_index).find_first(Result::is_err) {
        return lie;
    }
    let all = |id: usize| (1u16 << layouts.bins(id as u32).len()) - 1;
    match (0..items.len()).into_par_iter().find_first(|&id| u16::from(placed[id].load(Relaxed)) != all(id)) {
        Some(id) => Err(format!(
            "item {id} is in {} bins, not its {}",
            placed[id].load(Relaxed).count_ones(),
            layouts.bins(id as u32).len()
        )),
        None => Ok(()),
    }
}

/// Of the memory `available`, what a served database's plaintexts may take: all but
/// an eighth, or, if more, two bundles (`bundle_bytes` each) per thread, left to the
/// queries' working memory (the bundles read from disk or encoded per query, the
/// receivers' powers) and the system. `None` where the kernel does not say.
pub(crate) fn plaintext_budget(available: Option<usize>, bundle_bytes: usize) -> Option<usize> {
    let in_flight = bundle_bytes.saturating_mul(2 * rayon::current_num_threads());
    available.map(|a| a.saturating_sub((a / 8).max(in_flight)))
}

/// Bytes a database of `items` items, each in `hash_funcs` bins, with label records of
/// `record_bytes` (0 unlabelled), over `bins` bins in all (bundles · bins per bundle),
/// holds while it serves besides its plaintexts: each item's digest and record, an id
/// per bin it is in, and each bin's vector. A load budgets its plaintexts from the
/// memory left once these are read ([`plaintext_budget`] after the manifest), so `auto`
/// takes them from the memory it predicts with.
pub(crate) fn resident_bytes(items: usize, hash_funcs: usize, record_bytes: usize, bins: usize) -> usize {
    let per_item = size_of::<super::super::Digest>() + record_bytes + hash_funcs * size_of::<u32>();
    items.saturating_mul(per_item).saturating_add(bins.saturating_mul(size_of::<Vec<u32>>()))
}

/// Whether `bytes` of coefficients or plaintexts fit in the memory `available`
/// (unknown: assumed to), by [`plaintext_budget`]: the rule `auto` predicts with.
pub(crate) fn fits(bytes: usize, available: Option<usize>, bundle_bytes: usize) -> bool {
    plaintext_budget(available, bundle_bytes).is_none_or(|budget| bytes <= budget)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_served_database_leaves_an_eighth_of_the_memory_or_its_bundles_in_flight_to_the_queries() {
        assert_eq!(plaintext_budget(Some(8 << 30), 1 << 20), Some(7 << 30));
        assert!(fits(7 << 30, Some(8 << 30), 1 << 20) && !fits((7 << 30) + 1, Some(8 << 30), 1 << 20));
        // Bundles so large that two per thread take more than an eighth.
        let threads = rayon::current_num_threads();
        assert_eq!(plaintext_budget(Some(8 << 30), 1 << 30), Some((8usize << 30).saturating_sub(threads << 31)));
        // Where the kernel does not say, everything is held.
        assert!(fits(usize::MAX, None, 1) && plaintext_budget(None, 1).is_none());
        assert!(crate::io::memory::available_memory().is_none_or(|m| m > 0));
    }

    /// `auto`'s estimate of what a served database holds besides its plaintexts bounds
    /// what a loaded one holds (each item in at most its hash functions' bins) and is
    /// that exactly when every item is in as many bins as it has hash functions.
    #[test]
    fn resident_bytes_are_what_a_loaded_database_holds_besides_its_plaintexts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.db");
        let p = crate::protocols::unbalanced::params::small_test_params();
        let items: Vec<Vec<u8>> = (0..3000u32).map(|i| format!("item{i}").into_bytes()).collect();
        let labels: Vec<Vec<u8>> = items.iter().map(|k| [b"label:", &k[..]].concat()).collect();
        SenderDb::build_labelled(&items, &labels, vec!["l".into()], p.clone(), "t").unwrap().save(&path).unwrap();
        let db = SenderDb::load(&path).unwrap();
        let labels = db.labels.as_ref().unwrap();
        let bins: Vec<&Vec<u32>> = db.indices.iter().flatten().flat_map(|b| &b.bins).collect();
        let ids: usize = bins.iter().map(|b| b.capacity()).sum();
        let held = size_of_val(&db.items[..]) + labels.records.len() + ids * 4 + bins.len() * size_of::<Vec<u32>>();
        let h = p.table_params.hash_func_count;
        let estimate = resident_bytes(items.len(), h, labels.layout.record_bytes, bins.len());
        assert!(held <= estimate, "held {held} > estimated {estimate}");
        let short = (items.len() * h - bins.iter().map(|b| b.len()).sum::<usize>()) * 4;
        assert_eq!(held + short, estimate, "the estimate less the bin slots two hash functions shared");
    }
}
