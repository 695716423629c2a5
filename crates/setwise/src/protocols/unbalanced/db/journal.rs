//! A build written as it goes, so that a killed build resumes where it stopped
//! ([`SenderDb::build_into`](super::SenderDb::build_into), `setwise db build --resume`).
//!
//! While a build runs, its directory holds, beside the segments it has written (all
//! 0600, under the directory's exclusive lock):
//! - `BUILD`, the journal: a header (the parameters, preset, the OPRF key's check value,
//!   the input's fingerprint and the item count; its own hash), then one record per
//!   bundle whose segment is written and synced (bundle index, position, the hash of its
//!   bins, the segment's id and hash), each ending in a tag bound to the header, so a
//!   record cut short by a kill, or damaged, ends the journal there;
//! - `BUILD-KEY`: the build's OPRF key. The directory's `KEY` is written by the final
//!   save, so a build over an existing database leaves that database whole until its
//!   manifest is replaced;
//! - `BUILD-ITEMS`: the item digests and sealed labels the OPRF gave, with their hash
//!   (sealing a label draws a nonce, so they are kept rather than computed again).
//!
//! A resumed build reads the key and the OPRF's results instead of computing them, places
//! the items again (placement is a function of the digests and the parameters), and
//! reuses each bundle whose bins hash as recorded and whose segment still checks; it
//! computes the rest. The final save writes the manifest; then the journal is deleted,
//! then the key and items files (a save deletes those when no journal is left).

use super::super::Digest;
use super::storage::{BUILD_ITEMS, BUILD_KEY, JOURNAL, Segment};
use crate::crypto::dst::{self, Domain};
use crate::error::{Error, Result};
use crate::io::private_options;
use crate::wire::{Reader, Writer};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

const MAGIC: [u8; 8] = *b"SETWIJNL";
const ITEMS_MAGIC: [u8; 8] = *b"SETWIITM";
const VERSION: u32 = 1;
/// Bytes of a record before its tag: index, position, bins hash, segment id and hash.
const BODY: usize = 4 + 4 + 32 + 8 + 32;
/// Bytes of a record's tag.
const TAG: usize = 16;
/// Longest parameter JSON or preset name in a header.
const MAX_TEXT: usize = 1 << 16;
/// Largest journal read: far above a header and a record for every bundle of any
/// database this crate builds (a bigger file is damaged, not read whole).
const MAX_JOURNAL: u64 = 1 << 28;
/// Largest header: its fixed fields and two texts of at most [`MAX_TEXT`].
const MAX_HEADER: u64 = 2 * MAX_TEXT as u64 + 256;

/// What a journal binds a resumed build to: the same parameters, key and input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Header {
    /// The parameters as JSON.
    pub params_json: String,
    /// Where they came from (a preset's name, `auto`, a file).
    pub preset: String,
    /// The OPRF key's check value (`BUILD-KEY` must match it).
    pub key_check: [u8; 32],
    /// [`input_fingerprint`] of the items, labels and key columns.
    pub input: [u8; 32],
    /// Items in the input.
    pub items: u64,
}

impl Header {
    fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(128 + self.params_json.len() + self.preset.len());
        w.raw(&MAGIC).u32(VERSION);
        w.bytes(self.params_json.as_bytes()).bytes(self.preset.as_bytes());
        w.raw(&self.key_check).raw(&self.input).u64(self.items);
        let mut bytes = w.into_vec();
        let sum = Domain::fixed(dst::UNBALANCED_BUILD_JOURNAL).hash32(&bytes);
        bytes.extend_from_slice(&sum);
        bytes
    }

    /// The header and the bytes after it, or what is wrong with it.
    fn decode(bytes: &[u8]) -> std::result::Result<(Self, [u8; 32], &[u8]), String> {
        if bytes.len() < 12 || bytes[..8] != MAGIC {
            return Err("not a setwise build journal".into());
        }
        let mut r = Reader::new(&bytes[8..]);
        let wire = |e: crate::wire::WireError| e.to_string();
        let version = r.u32("version").map_err(wire)?;
        if version != VERSION {
            return Err(format!("journal version {version}; this setwise writes version {VERSION}"));
        }
        let params_json = r.str("parameters", MAX_TEXT).map_err(wire)?.to_string();
        let preset = r.str("preset", MAX_TEXT).map_err(wire)?.to_string();
        let key_check = r.array("key check").map_err(wire)?;
        let input = r.array("input fingerprint").map_err(wire)?;
        let items = r.u64("item count").map_err(wire)?;
        let end = bytes.len() - r.remaining();
        let sum: [u8; 32] = r.array("header hash").map_err(wire)?;
        if Domain::fixed(dst::UNBALANCED_BUILD_JOURNAL).hash32(&bytes[..end]) != sum {
            return Err("the journal's header does not match its hash".into());
        }
        Ok((Self { params_json, preset, key_check, input, items }, sum, &bytes[end + 32..]))
    }
}

/// One bundle whose segment a build wrote and synced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Done {
    /// Its bins' hash ([`bins_hash`]), which a resumed build's placement must give again.
    pub bins: [u8; 32],
    /// Its segment.
    pub segment: Segment,
}

/// A build's journal: what it is bound to and the bundles written so far, by (bundle
/// index, position); appended to as bundles are written.
#[derive(Debug)]
pub(super) struct Journal {
    /// The header.
    pub header: Header,
    /// Bundles written, by (bundle index, position); a later record of one wins.
    pub done: HashMap<(u32, u32), Done>,
    /// Records that ended the journal because they were cut short or did not check.
    pub dropped_tail: bool,
    /// The key of the record tags.
    key: [u8; 32],
    /// The key of `BUILD-ITEMS`'s hash.
    items_key: [u8; 32],
    /// Bytes of the header and the good records.
    good: u64,
    file: Mutex<std::fs::File>,
}

impl Journal {
    /// Starts a journal in `dir` (replacing any there), synced before any bundle is
    /// written.
    pub fn create(dir: &Path, header: Header) -> Result<Self> {
        let path = dir.join(JOURNAL);
        let io = |e| Error::file(&path, e);
        let bytes = header.encode();
        let (key, items_key) = keys(&bytes[bytes.len() - 32..]);
        let mut file = private_options().write(true).create(true).truncate(true).open(&path).map_err(io)?;
        file.write_all(&bytes).map_err(io)?;
        file.sync_all().map_err(io)?;
        crate::io::sync_dir(&path).map_err(io)?;
        let good = bytes.len() as u64;
        Ok(Self { header, done: HashMap::new(), dropped_tail: false, key, items_key, good, file: Mutex::new(file) })
    }

    /// Reads the journal in `dir` (called under the directory's lock): `Ok(None)` if
    /// there is none, `Err` naming what is wrong if its header does not check. Records
    /// after the first that does not check are dropped (their bundles are computed
    /// again); the file is left as it is until [`cut_tail`](Self::cut_tail).
    pub fn open(dir: &Path) -> Result<Option<Self>> {
        let path = dir.join(JOURNAL);
        let io = |e| Error::file(&path, e);
        let mut file = match private_options().read(true).write(true).open(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            r => r.map_err(io)?,
        };
        let mut bytes = Vec::new();
        (&mut file).take(MAX_JOURNAL + 1).read_to_end(&mut bytes).map_err(io)?;
        if bytes.len() as u64 > MAX_JOURNAL {
            return Err(Error::damaged(&path, "the build journal is larger than any build writes"));
        }
        let (header, sum, mut rest) = Header::decode(&bytes).map_err(|why| Error::damaged(&path, why))?;
        let (key, items_key) = keys(&sum);
        let mut done = HashMap::new();
        let wire = |e: crate::wire::WireError| Error::damaged(&path, e.to_string());
        while rest.len() >= BODY + TAG {
            let (body, tag) = (&rest[..BODY], &rest[BODY..BODY + TAG]);
            if blake3::keyed_hash(&key, body).as_bytes()[..TAG] != *tag {
                break;
            }
            let mut r = Reader::new(body);
            let (index, position) = (r.u32("bundle index").map_err(wire)?, r.u32("position").map_err(wire)?);
            let bins = r.array("bins hash").map_err(wire)?;
            let id = r.u64("segment id").map_err(wire)?;
            let hash = r.array("segment hash").map_err(wire)?;
            done.insert((index, position), Done { bins, segment: Segment { id, hash } });
            rest = &rest[BODY + TAG..];
        }
        let dropped_tail = !rest.is_empty();
        let good = (bytes.len() - rest.len()) as u64;
        Ok(Some(Self { header, done, dropped_tail, key, items_key, good, file: Mutex::new(file) }))
    }

    /// Drops what follows the last good record, so that new records go after it (a
    /// resume that goes ahead calls this).
    pub fn cut_tail(&mut self) -> Result<()> {
        let file = self.file.get_mut().unwrap_or_else(|e| e.into_inner());
        let io = |e| Error::file(Path::new(JOURNAL), e);
        file.set_len(self.good).map_err(io)?;
        std::io::Seek::seek(file, std::io::SeekFrom::Start(self.good)).map_err(io)?;
        Ok(())
    }

    /// The header of the journal in `dir`, read without writing (a build may be running),
    /// if there is one and it checks.
    pub fn header(dir: &Path) -> Option<Header> {
        let mut bytes = Vec::new();
        let file = std::fs::File::open(dir.join(JOURNAL)).ok()?;
        file.take(MAX_HEADER).read_to_end(&mut bytes).ok()?;
        Header::decode(&bytes).ok().map(|(h, _, _)| h)
    }

    /// Records that bundle `position` of bundle index `index`, whose bins hash to `bins`,
    /// is in `segment` (written and synced before this is called, so a record read back
    /// names a segment that was complete). Not synced itself: a record lost to a crash
    /// only costs that bundle's computation again.
    pub fn append(&self, index: usize, position: usize, bins: [u8; 32], segment: Segment) -> std::io::Result<()> {
        let mut w = Writer::with_capacity(BODY + TAG);
        w.u32(index as u32).u32(position as u32).raw(&bins).u64(segment.id).raw(&segment.hash);
        let mut bytes = w.into_vec();
        let tag = blake3::keyed_hash(&self.key, &bytes);
        bytes.extend_from_slice(&tag.as_bytes()[..TAG]);
        self.file.lock().unwrap_or_else(|e| e.into_inner()).write_all(&bytes)
    }
}

/// The keys of a journal's record tags and of its `BUILD-ITEMS` hash, bound to its
/// header's hash (each input starts with its own word; the header's hash is of bytes
/// that start with the magic).
fn keys(header_hash: &[u8]) -> ([u8; 32], [u8; 32]) {
    let domain = Domain::fixed(dst::UNBALANCED_BUILD_JOURNAL);
    let key = |what: &[u8]| domain.hash32(&[what, header_hash].concat());
    (key(b"records"), key(b"items"))
}

/// The fingerprint of a build's input: the items, the labels and their columns, and the
/// key columns joined into each item. A resumed build must be given the same input.
pub(super) fn input_fingerprint<I: AsRef<[u8]>>(
    items: &[I],
    labels: Option<(&[Vec<u8>], &[String])>,
    key_columns: usize,
) -> [u8; 32] {
    let mut h = Domain::fixed(dst::UNBALANCED_BUILD_INPUT).hasher();
    let mut put = |bytes: &[u8]| {
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    put(&(key_columns as u64).to_le_bytes());
    put(&(items.len() as u64).to_le_bytes());
    items.iter().for_each(|x| put(x.as_ref()));
    if let Some((labels, columns)) = labels {
        put(b"labels");
        columns.iter().for_each(|c| put(c.as_bytes()));
        labels.iter().for_each(|l| put(l));
    }
    *h.finalize().as_bytes()
}

/// The hash of a bundle's bins (each bin's item ids, in order).
pub(super) fn bins_hash(bins: &[Vec<u32>]) -> [u8; 32] {
    let mut h = Domain::fixed(dst::UNBALANCED_BUILD_JOURNAL).hasher();
    h.update(b"bins");
    for ids in bins {
        h.update(&(ids.len() as u32).to_le_bytes());
        ids.iter().for_each(|id| {
            h.update(&id.to_le_bytes());
        });
    }
    *h.finalize().as_bytes()
}

/// Writes the OPRF's results (`digests`, then the sealed label `records`) to
/// `BUILD-ITEMS`, bound to the journal by its header hash, synced.
pub(super) fn write_items(dir: &Path, journal: &Journal, digests: &[Digest], records: &[u8]) -> Result<()> {
    let path = dir.join(BUILD_ITEMS);
    let io = |e| Error::file(&path, e);
    let mut f = std::io::BufWriter::with_capacity(
        1 << 20,
        private_options().write(true).create(true).truncate(true).open(&path).map_err(io)?,
    );
    let mut h = blake3::Hasher::new_keyed(&journal.items_key);
    let head =
        [&ITEMS_MAGIC[..], &(digests.len() as u64).to_le_bytes(), &(records.len() as u64).to_le_bytes()].concat();
    for part in [&head[..], digests.as_flattened(), records] {
        h.update(part);
        f.write_all(part).map_err(io)?;
    }
    f.write_all(h.finalize().as_bytes()).map_err(io)?;
    f.into_inner().map_err(|e| io(e.into_error()))?.sync_all().map_err(io)
}

/// Reads `BUILD-ITEMS` back: `Ok(None)` if it is missing, cut short or damaged, or is
/// not this journal's (the OPRF then runs again); otherwise the header's count of item
/// digests and their label records of `record_bytes` each.
pub(super) fn read_items(dir: &Path, journal: &Journal, record_bytes: usize) -> Result<Option<(Vec<Digest>, Vec<u8>)>> {
    let path = dir.join(BUILD_ITEMS);
    let n = journal.header.items as usize;
    let records = n.checked_mul(record_bytes);
    let want = records.and_then(|r| n.checked_mul(32).and_then(|d| d.checked_add(r)).and_then(|x| x.checked_add(56)));
    let Some(want) = want else { return Ok(None) };
    match std::fs::metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::file(&path, e)),
        Ok(m) if m.len() != want as u64 => return Ok(None),
        Ok(_) => {}
    }
    let bytes = std::fs::read(&path).map_err(|e| Error::file(&path, e))?;
    if bytes.len() != want {
        return Ok(None); // changed since its length was read
    }
    let (body, sum) = bytes.split_at(bytes.len() - 32);
    let head = [&ITEMS_MAGIC[..], &(n as u64).to_le_bytes(), &((n * record_bytes) as u64).to_le_bytes()].concat();
    let ok = body.starts_with(&head)
        && blake3::Hasher::new_keyed(&journal.items_key).update_rayon(body).finalize().as_bytes() == sum;
    if !ok {
        return Ok(None);
    }
    let body = &body[head.len()..];
    let digests = body[..n * 32].chunks_exact(32).map(|c| c.try_into().expect("32 bytes")).collect();
    Ok(Some((digests, body[n * 32..].to_vec())))
}

/// Deletes a finished build's files: the journal first (so a build stopped in between
/// leaves no journal naming files that are gone), then the key and items files.
pub(super) fn remove_build_files(dir: &Path) -> Result<()> {
    for name in [JOURNAL, BUILD_ITEMS, BUILD_KEY] {
        let path: PathBuf = dir.join(name);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(Error::file(&path, e)),
            _ => {}
        }
    }
    crate::io::sync_dir(&dir.join(JOURNAL)).map_err(|e| Error::file(dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header {
        Header { params_json: "{}".into(), preset: "auto".into(), key_check: [1; 32], input: [2; 32], items: 7 }
    }

    fn seg(i: u8) -> Segment {
        Segment { id: i as u64, hash: [i; 32] }
    }

    #[test]
    fn records_read_back_up_to_the_first_that_does_not_check() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::create(dir.path(), header()).unwrap();
        for i in 0..4u8 {
            j.append(0, i as usize, [i; 32], seg(i)).unwrap();
        }
        drop(j);
        let j = Journal::open(dir.path()).unwrap().unwrap();
        assert_eq!(j.header, header());
        assert_eq!(j.done.len(), 4);
        assert_eq!(j.done[&(0, 2)], Done { bins: [2; 32], segment: seg(2) });
        assert!(!j.dropped_tail);
        drop(j);
        // A kill in the middle of a record: the cut record is dropped; reading leaves
        // the file as it is, and once the tail is cut the next append goes where it began.
        let path = dir.path().join(JOURNAL);
        let len = std::fs::metadata(&path).unwrap().len();
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(len - 10).unwrap();
        let mut j = Journal::open(dir.path()).unwrap().unwrap();
        assert_eq!((j.done.len(), j.dropped_tail), (3, true));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), len - 10);
        j.cut_tail().unwrap();
        j.append(1, 0, [9; 32], seg(9)).unwrap();
        drop(j);
        let j = Journal::open(dir.path()).unwrap().unwrap();
        assert_eq!((j.done.len(), j.dropped_tail), (4, false));
        assert!(j.done.contains_key(&(1, 0)) && !j.done.contains_key(&(0, 3)));
        drop(j);
        // A flipped byte in record 1 ends the journal there.
        let mut bytes = std::fs::read(&path).unwrap();
        let first = header().encode().len();
        bytes[first + BODY + TAG + 5] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let j = Journal::open(dir.path()).unwrap().unwrap();
        assert_eq!((j.done.len(), j.dropped_tail), (1, true));
    }

    #[test]
    fn a_damaged_header_is_named() {
        let dir = tempfile::tempdir().unwrap();
        drop(Journal::create(dir.path(), header()).unwrap());
        let path = dir.path().join(JOURNAL);
        let mut bytes = std::fs::read(&path).unwrap();
        // In the input fingerprint: only the hash tells.
        let at = bytes.len() - 50;
        bytes[at] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let e = Journal::open(dir.path()).unwrap_err().to_string();
        assert!(e.contains("BUILD") && e.contains("hash"), "{e}");
        assert!(Journal::header(dir.path()).is_none());
        for cut in [0, 5, 12, 40] {
            std::fs::write(&path, &bytes[..cut]).unwrap();
            assert!(Journal::open(dir.path()).is_err(), "cut at {cut}");
        }
        assert!(Journal::open(&dir.path().join("none")).unwrap().is_none());
    }

    #[test]
    fn items_read_back_only_when_whole_and_this_journals() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::create(dir.path(), header()).unwrap();
        let digests: Vec<Digest> = (0..7u8).map(|i| [i; 32]).collect();
        let records: Vec<u8> = (0..7 * 5).map(|i| i as u8).collect();
        write_items(dir.path(), &j, &digests, &records).unwrap();
        assert_eq!(read_items(dir.path(), &j, 5).unwrap(), Some((digests.clone(), records.clone())));
        assert_eq!(read_items(dir.path(), &j, 4).unwrap(), None, "another layout");
        let path = dir.path().join(BUILD_ITEMS);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[100] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(read_items(dir.path(), &j, 5).unwrap(), None, "damaged");
        write_items(dir.path(), &j, &digests, &records).unwrap();
        let other = Journal::create(dir.path(), Header { items: 7, input: [3; 32], ..header() }).unwrap();
        assert_eq!(read_items(dir.path(), &other, 5).unwrap(), None, "another journal's");
    }
}
