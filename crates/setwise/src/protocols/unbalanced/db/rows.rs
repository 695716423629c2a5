//! The encoded copy of a database on disk: every bundle's plaintexts in NTT form, one
//! file beside the segments, so a database whose plaintexts do not all fit in memory
//! serves the rest from disk (a read per bundle per query) instead of re-encoding them
//! per query as compact mode does.
//!
//! `ROWS-<manifest hash>-l<level>`: a header (magic, version, the hash of the manifest it
//! encodes, a fingerprint of the encoding, the level, the bundle count, the words per
//! bundle, each bundle's BLAKE3 hash, the header's own hash), then each bundle's words,
//! little-endian, from a 4 KiB boundary. It is derived data: written by the first load
//! that needs it (to a temporary file it holds locked, synced, then renamed), named for
//! the manifest it encodes so no save can make it lie (a save deletes every copy, as its
//! manifest changes), checked whole when a load reuses it, and replaced when it does not
//! check. Each read during a query checks the bundle's hash and every word against its
//! modulus again, so a copy changed under a running server fails that query by name,
//! and can never make a sum overflow.

use crate::error::{Error, Result};
use crate::he::{HeContext, PlainRows, Plains};
use rayon::prelude::*;
use std::borrow::Cow;
use std::cell::{RefCell, RefMut};
use std::fs::File;
use std::path::{Path, PathBuf};
use zeroize::{Zeroize, Zeroizing};

const MAGIC: [u8; 8] = *b"SETWROWS";
const VERSION: u32 = 1;
/// Where the words start: the header rounded up to this.
const ALIGN: u64 = 4096;
/// Words read and hashed at a time (1 MiB): small enough to stay in the cache between
/// the read's copy and the hash.
const READ_CHUNK: usize = 1 << 17;
/// The name every copy (and every copy being written) starts with.
const PREFIX: &str = "ROWS-";
/// The suffix of a copy being written, under its writer's lock.
const TMP: &str = ".tmp";
/// The suffix of a file just created, before its writer holds its lock (it becomes
/// `.tmp` once locked, so an unlocked `.tmp` is always a dead writer's).
const NEW: &str = ".new";

/// What a copy must hold to serve a database: the manifest it encodes, the encoding,
/// the level and the shape of its bundles.
#[derive(Debug, Clone, Copy)]
pub(super) struct Shape {
    /// The BLAKE3 hash at the end of the manifest.
    pub manifest: [u8; 32],
    /// A fingerprint of the encoding (a probe's plaintext).
    pub encoding: [u8; 32],
    /// The level the plaintexts are encoded at.
    pub level: usize,
    /// Bundles, in the manifest's order.
    pub bundles: usize,
    /// Words of every bundle's plaintexts.
    pub words: usize,
}

impl Shape {
    /// The copy's file name in the database directory.
    pub(super) fn file_name(&self) -> String {
        let hex: String = self.manifest[..8].iter().map(|b| format!("{b:02x}")).collect();
        format!("{PREFIX}{hex}-l{}", self.level)
    }

    fn header_len(&self) -> usize {
        8 + 4 + 32 + 32 + 4 + 8 + 8 + 32 * self.bundles + 32
    }

    fn hashes_at(&self) -> usize {
        8 + 4 + 32 + 32 + 4 + 8 + 8
    }

    fn start(&self) -> u64 {
        (self.header_len() as u64).div_ceil(ALIGN) * ALIGN
    }

    fn offset(&self, bundle: usize) -> u64 {
        self.start() + bundle as u64 * self.words as u64 * 8
    }

    fn header(&self, hashes: &[[u8; 32]]) -> Vec<u8> {
        let mut h = Vec::with_capacity(self.header_len());
        h.extend_from_slice(&MAGIC);
        h.extend_from_slice(&VERSION.to_le_bytes());
        h.extend_from_slice(&self.manifest);
        h.extend_from_slice(&self.encoding);
        h.extend_from_slice(&(self.level as u32).to_le_bytes());
        h.extend_from_slice(&(self.bundles as u64).to_le_bytes());
        h.extend_from_slice(&(self.words as u64).to_le_bytes());
        hashes.iter().for_each(|x| h.extend_from_slice(x));
        let sum = *blake3::hash(&h).as_bytes();
        h.extend_from_slice(&sum);
        h
    }
}

/// Whether `name` is a copy's (or a copy being written), for the save that deletes them.
pub(super) fn is_copy(name: &str) -> bool {
    name.starts_with(PREFIX)
}

/// A database's encoded copy, open for the reads of bundles not held in memory.
#[derive(Debug)]
pub(super) struct RowsFile {
    file: File,
    path: PathBuf,
    shape: Shape,
    hashes: Vec<[u8; 32]>,
}

/// Plaintexts a load keeps in memory, by bundle (`None`: read from the copy per query).
pub(super) type Kept = Vec<Option<PlainRows>>;

/// What a load found of a copy.
#[derive(Debug)]
pub(super) enum Found {
    /// None there.
    Absent,
    /// One that does not check (named, and why); the load replaces it.
    Invalid(String),
    /// A valid one, with the bundles the load keeps in memory.
    Valid(RowsFile, Kept),
}

impl RowsFile {
    /// Opens the copy of `shape` in `dir` if there is one, checking its length, its
    /// header and every bundle's hash, and keeping in memory the bundles `keep` says.
    /// I/O failures are errors; a copy that does not check is [`Found::Invalid`].
    pub(super) fn open(
        dir: &Path,
        shape: Shape,
        ctx: &HeContext,
        keep: impl Fn(usize) -> bool + Sync,
    ) -> Result<Found> {
        let path = dir.join(shape.file_name());
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Found::Absent),
            Err(e) => return Err(Error::file(&path, e)),
        };
        let invalid = |why: String| Ok(Found::Invalid(format!("{}: {why}", path.display())));
        let len = file.metadata().map_err(|e| Error::file(&path, e))?.len();
        let want = shape.offset(shape.bundles);
        if len != want {
            return invalid(format!("{len} bytes where this database's encoded plaintexts take {want}"));
        }
        let mut header = vec![0u8; shape.header_len()];
        match read_at(&file, &mut header, 0) {
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return invalid("cut short while read".into()),
            r => r.map_err(|e| Error::file(&path, e))?,
        }
        let at = shape.hashes_at();
        let hashes: Vec<[u8; 32]> =
            header[at..at + 32 * shape.bundles].chunks_exact(32).map(|c| c.try_into().expect("32 bytes")).collect();
        if shape.header(&hashes) != header {
            return invalid("its header is not this database's (another manifest, encoding, level or shape)".into());
        }
        let copy = RowsFile { file, path: path.clone(), shape, hashes };
        // Stops at the first bundle that does not check (`Ok(why)`) or fails to read.
        let kept = (0..shape.bundles)
            .into_par_iter()
            .map(|i| {
                match if keep(i) { copy.read_checked(ctx, i).map(Some) } else { copy.with_checked(ctx, i, |_| None) } {
                    Ok(plain) => Ok(plain),
                    Err(Error::Damaged { why, .. }) => Err(Ok(why)),
                    Err(Error::File { source, .. }) if source.kind() == std::io::ErrorKind::UnexpectedEof => {
                        Err(Ok("cut short while read".into()))
                    }
                    Err(e) => Err(Err(e)),
                }
            })
            .collect::<std::result::Result<Kept, std::result::Result<String, Error>>>();
        match kept {
            Ok(kept) => Ok(Found::Valid(copy, kept)),
            Err(Ok(why)) => invalid(why),
            Err(Err(e)) => Err(e),
        }
    }

    /// Writes the copy of `shape` in `dir`: each bundle's plaintexts from `encode`
    /// (in parallel), the ones `keep` says also kept in memory. The file is created as
    /// `.new`, locked, renamed `.tmp` (so an unlocked `.tmp` is a dead writer's: see
    /// [`remove_others`]), written, synced, and renamed over any copy there, then
    /// unlocked; a failed write leaves nothing behind.
    pub(super) fn write(
        dir: &Path,
        shape: Shape,
        encode: impl Fn(usize) -> Result<PlainRows> + Sync,
        keep: impl Fn(usize) -> bool + Sync,
    ) -> Result<(Self, Kept)> {
        let path = dir.join(shape.file_name());
        let mut nonce = [0u8; 8];
        crate::crypto::rng::fill_os(&mut nonce);
        let stem = format!("{}.{:016x}", shape.file_name(), u64::from_le_bytes(nonce));
        let (fresh, tmp) = (dir.join(format!("{stem}{NEW}")), dir.join(format!("{stem}{TMP}")));
        let io = |e| Error::file(&tmp, e);
        let written = (|| {
            let file = crate::io::private_options()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&fresh)
                .map_err(|e| Error::file(&fresh, e))?;
            file.lock().map_err(io)?;
            std::fs::rename(&fresh, &tmp).map_err(io)?;
            file.set_len(shape.offset(shape.bundles)).map_err(io)?;
            let done = (0..shape.bundles)
                .into_par_iter()
                .map(|i| {
                    let plain = encode(i)?;
                    if plain.words().len() != shape.words {
                        return Err(Error::usage(
                            "database",
                            format!("bundle {i} does not have the shape of the others"),
                        ));
                    }
                    let bytes = le_bytes(plain.words());
                    write_at(&file, &bytes, shape.offset(i)).map_err(io)?;
                    Ok((*blake3::hash(&bytes).as_bytes(), keep(i).then_some(plain)))
                })
                .collect::<Result<Vec<_>>>()?;
            let (hashes, kept): (Vec<[u8; 32]>, Kept) = done.into_iter().unzip();
            write_at(&file, &shape.header(&hashes), 0).map_err(io)?;
            file.sync_all().map_err(io)?;
            std::fs::rename(&tmp, &path).map_err(io)?;
            crate::io::sync_dir(&path).map_err(|e| Error::file(&path, e))?;
            // Windows' locks are mandatory: others may read the copy now.
            file.unlock().map_err(|e| Error::file(&path, e))?;
            Ok((file, hashes, kept))
        })();
        match written {
            Ok((file, hashes, kept)) => Ok((RowsFile { file, path, shape, hashes }, kept)),
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                let _ = std::fs::remove_file(&fresh);
                Err(e)
            }
        }
    }

    /// Runs `f` on bundle `i`'s plaintexts, read now into this thread's buffer and
    /// checked: its hash, and every word below its modulus (the file may have changed
    /// since it was loaded).
    pub(super) fn with_bundle<R>(&self, ctx: &HeContext, i: usize, f: impl FnOnce(Plains<'_>) -> R) -> Result<R> {
        self.with_checked(ctx, i, f).map_err(|e| match e {
            Error::Damaged { path, why } => {
                Error::damaged(&path, format!("{why}: the file changed after it was loaded"))
            }
            e => e,
        })
    }

    /// [`with_bundle`](Self::with_bundle), its errors as they are (a load names them).
    fn with_checked<R>(&self, ctx: &HeContext, i: usize, f: impl FnOnce(Plains<'_>) -> R) -> Result<R> {
        with_buffer(self.shape.words, |words| {
            self.read_words(i, words)?;
            let plains = Plains::from_words(ctx, self.shape.level, words)
                .map_err(|e| Error::damaged(&self.path, format!("bundle {i}: {e}")))?;
            Ok(f(plains))
        })
    }

    /// Bundle `i`'s plaintexts, read and checked as [`with_bundle`](Self::with_bundle)
    /// does, into memory of their own.
    fn read_checked(&self, ctx: &HeContext, i: usize) -> Result<PlainRows> {
        let mut words = Zeroizing::new(vec![0u64; self.shape.words]);
        self.read_words(i, &mut words)?;
        PlainRows::from_words(ctx, self.shape.level, std::mem::take(&mut *words))
            .map_err(|e| Error::damaged(&self.path, format!("bundle {i}: {e}")))
    }

    /// Reads bundle `i`'s words into `words` (the shape's count) and checks its hash:
    /// a chunk at a time, hashed while it is still in the cache.
    fn read_words(&self, i: usize, words: &mut [u64]) -> Result<()> {
        let (mut hasher, mut at) = (blake3::Hasher::new(), self.shape.offset(i));
        for chunk in words.chunks_mut(READ_CHUNK) {
            let bytes: &mut [u8] = bytemuck::cast_slice_mut(chunk);
            read_at(&self.file, bytes, at).map_err(|e| Error::file(&self.path, e))?;
            hasher.update(bytes);
            at += bytes.len() as u64;
        }
        if hasher.finalize().as_bytes() != &self.hashes[i] {
            return Err(Error::damaged(&self.path, format!("bundle {i}: checksum mismatch")));
        }
        words.iter_mut().for_each(|w| *w = u64::from_le(*w));
        Ok(())
    }
}

thread_local! {
    /// Each thread's buffer for the bundles it reads from a copy, kept between reads: a
    /// fresh 50 MB allocation per read costs page faults and the kernel's zeroing.
    static BUFFER: RefCell<Zeroizing<Vec<u64>>> = RefCell::new(Zeroizing::new(Vec::new()));
}

/// Runs `f` on `words` words of this thread's buffer, zeroized after however `f` ends
/// (they held the database's plaintexts); on a fresh buffer where this thread is already
/// using its own (a read nested in another's evaluation, as rayon may schedule).
fn with_buffer<R>(words: usize, f: impl FnOnce(&mut [u64]) -> R) -> R {
    BUFFER.with(|cell| match cell.try_borrow_mut() {
        Ok(buf) => {
            let mut wipe = Wipe(buf);
            wipe.0.resize(words, 0);
            f(&mut wipe.0[..])
        }
        Err(_) => f(&mut Zeroizing::new(vec![0; words])[..]),
    })
}

/// Zeroizes the thread's buffer when dropped, a panic's unwinding included.
struct Wipe<'a>(RefMut<'a, Zeroizing<Vec<u64>>>);

impl Drop for Wipe<'_> {
    fn drop(&mut self) {
        self.0.as_mut_slice().zeroize();
    }
}

/// Deletes from `dir` the copies other than `current` (a save's, or the remains of one
/// that crashed) and the temporary files of writes that died: a `.tmp` whose lock this
/// takes (held while it is deleted, so no writer can be between its checks). Files just
/// created (`.new`, not yet locked) and anything that cannot be opened or locked stay;
/// a save deletes them. A server that has a copy open keeps reading it.
pub(super) fn remove_others(dir: &Path, current: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !is_copy(&name) || name == current || name.ends_with(NEW) {
            continue;
        }
        if name.ends_with(TMP) {
            // Its writer locked it before giving it this name: free means dead.
            if let Ok(f) = File::open(entry.path())
                && f.try_lock().is_ok()
            {
                let _ = std::fs::remove_file(entry.path());
            }
            continue;
        }
        let _ = std::fs::remove_file(entry.path());
    }
}

/// The words as little-endian bytes: borrowed where that is the machine's order.
fn le_bytes(words: &[u64]) -> Cow<'_, [u8]> {
    if cfg!(target_endian = "little") {
        Cow::Borrowed(bytemuck::cast_slice(words))
    } else {
        Cow::Owned(words.iter().flat_map(|w| w.to_le_bytes()).collect())
    }
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(unix)]
fn write_at(file: &File, buf: &[u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, buf, offset)
}

#[cfg(windows)]
fn read_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    while !buf.is_empty() {
        match std::os::windows::fs::FileExt::seek_read(file, buf, offset)? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => (buf, offset) = (&mut buf[n..], offset + n as u64),
        }
    }
    Ok(())
}

#[cfg(windows)]
fn write_at(file: &File, mut buf: &[u8], mut offset: u64) -> std::io::Result<()> {
    while !buf.is_empty() {
        match std::os::windows::fs::FileExt::seek_write(file, buf, offset)? {
            0 => return Err(std::io::ErrorKind::WriteZero.into()),
            n => (buf, offset) = (&buf[n..], offset + n as u64),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The thread's buffer is zeroized after each use, resized to each read, and a read
    /// nested in another on the same thread gets a buffer of its own.
    #[test]
    fn the_threads_buffer_is_reused_zeroized_and_never_shared() {
        let outer = with_buffer(8, |outer| {
            outer.fill(7);
            let inner = with_buffer(4, |inner| {
                assert_eq!(inner, [0; 4], "a fresh buffer while the thread's own is in use");
                inner.fill(9);
                inner.as_ptr() as usize
            });
            assert_eq!(outer, [7; 8], "the nested read did not touch the outer one");
            assert_ne!(inner, outer.as_ptr() as usize);
            outer.as_ptr() as usize
        });
        with_buffer(8, |again| {
            assert_eq!(again, [0; 8], "zeroized after use");
            assert_eq!(again.as_ptr() as usize, outer, "the same allocation");
        });
        with_buffer(3, |shorter| assert_eq!(shorter.len(), 3));
    }
}
