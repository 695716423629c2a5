//! Output files that appear complete or not at all: written to a temporary file beside
//! the target, synced, renamed over it (the atomic step), and the directory synced so the
//! rename survives a crash. Dropping an uncommitted file removes the temporary. A pipe or
//! a character device at the path (`--output /dev/null`, `/dev/stdout`) is written to
//! directly: it cannot be replaced, only fed.

use std::fs::{File, OpenOptions};
use std::hash::{BuildHasher, RandomState};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// A file being written; [`commit`](Self::commit) makes it appear at its path.
///
/// The rename replaces whatever is at the path, a symbolic link included, without
/// following it: a link planted there cannot redirect the write to another file.
#[derive(Debug)]
pub struct AtomicFile {
    path: PathBuf,
    /// The temporary beside the path; `None` when the path is a pipe or a character
    /// device, written to directly.
    tmp: Option<PathBuf>,
    file: Option<io::BufWriter<File>>,
    /// Permissions set before the rename (Unix), whatever the umask.
    #[cfg_attr(not(unix), allow(dead_code))]
    mode: Option<u32>,
}

impl AtomicFile {
    /// Starts writing `path`. With `private`, the file is readable by its owner only
    /// (mode 0600 on Unix) from its first byte; otherwise it gets the default mode
    /// (0666 less the umask).
    pub fn create(path: &Path, private: bool) -> io::Result<Self> {
        Self::open(path, private, None)
    }

    /// Starts writing `path`, which gets exactly the permissions `mode` (e.g. `0o640`;
    /// Unix only, the umask does not apply). The file is readable by its owner only
    /// while it is written, and takes `mode` when committed.
    pub fn with_mode(path: &Path, mode: u32) -> io::Result<Self> {
        Self::open(path, true, Some(mode))
    }

    fn open(path: &Path, private: bool, mode: Option<u32>) -> io::Result<Self> {
        if is_stream(path) {
            // Nothing to rename over a pipe or a character device: the bytes go to it as
            // they are written (a reader of a pipe sees them whether or not they end).
            let file = OpenOptions::new().write(true).open(path)?;
            let writer = Some(io::BufWriter::with_capacity(1 << 16, file));
            return Ok(Self { path: path.to_path_buf(), tmp: None, file: writer, mode: None });
        }
        let name = path.file_name().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file path"))?;
        // Unique, not secret: RandomState is keyed from the OS per thread.
        let nonce = RandomState::new().hash_one((std::process::id(), path));
        let tmp_name = format!(".{}.{nonce:016x}.tmp", name.to_string_lossy());
        let tmp = path.with_file_name(tmp_name);
        let mut options = if private { private_options() } else { OpenOptions::new() };
        options.write(true).create_new(true);
        let file = options.open(&tmp)?;
        Ok(Self {
            path: path.to_path_buf(),
            tmp: Some(tmp),
            file: Some(io::BufWriter::with_capacity(1 << 16, file)),
            mode,
        })
    }

    /// Flushes, syncs and renames the file into place, then syncs its directory. On an
    /// error nothing appears at the path and the temporary is removed.
    pub fn commit(mut self) -> io::Result<()> {
        let writer = self.file.take().expect("committed once");
        let Some(tmp) = self.tmp.clone() else {
            return writer.into_inner().map(drop).map_err(io::IntoInnerError::into_error);
        };
        let placed = (|| {
            let file = writer.into_inner().map_err(io::IntoInnerError::into_error)?;
            #[cfg(unix)]
            if let Some(mode) = self.mode {
                use std::os::unix::fs::PermissionsExt;
                file.set_permissions(std::fs::Permissions::from_mode(mode))?;
            }
            file.sync_all()?;
            drop(file);
            std::fs::rename(&tmp, &self.path)
        })();
        if placed.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        placed?;
        sync_dir(&self.path)
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.as_mut().expect("not committed").write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.as_mut().expect("not committed").flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if let (Some(_), Some(tmp)) = (self.file.take(), &self.tmp) {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// Whether `path` is a pipe or a character device (`/dev/null`, a terminal), itself or
/// where its symbolic link leads: written to in place, never replaced. A link to a
/// regular file is still replaced, not followed.
fn is_stream(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        std::fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo() || m.file_type().is_char_device())
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        false
    }
}

/// Options that create files readable and writable by their owner only (0600 on Unix).
pub(crate) fn private_options() -> OpenOptions {
    let mut o = OpenOptions::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    o
}

/// Syncs the directory holding `path`, so a rename into it is durable.
pub fn sync_dir(path: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        File::open(dir)?.sync_all()?;
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// Writes `bytes` to `path` atomically (see [`AtomicFile`]).
pub fn write_atomic(path: &Path, bytes: &[u8], private: bool) -> io::Result<()> {
    let mut f = AtomicFile::create(path, private)?;
    f.write_all(bytes)?;
    f.commit()
}

/// Writes `bytes` to `path` only if nothing is there, whole or not at all: to a
/// temporary file beside it (readable by its owner only with `private`), synced, then
/// hard-linked into place, which fails if a file is already there, so an existing file
/// is never replaced and two writers never both succeed. `Ok(false)`: `path` existed
/// and is left as it was.
pub fn write_new(path: &Path, bytes: &[u8], private: bool) -> io::Result<bool> {
    let name = path.file_name().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file path"))?;
    let nonce = RandomState::new().hash_one((std::process::id(), path));
    let tmp = path.with_file_name(format!(".{}.{nonce:016x}.tmp", name.to_string_lossy()));
    let mut options = if private { private_options() } else { OpenOptions::new() };
    let mut f = options.write(true).create_new(true).open(&tmp)?;
    let written = f.write_all(bytes).and_then(|()| f.sync_all());
    drop(f);
    let linked = written.and_then(|()| std::fs::hard_link(&tmp, path));
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => sync_dir(path).map(|()| true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appears_complete_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.csv");
        let mut f = AtomicFile::create(&path, false).unwrap();
        f.write_all(b"half").unwrap();
        assert!(!path.exists(), "nothing at the path before the commit");
        drop(f);
        assert!(!path.exists());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the temporary is gone");
        std::fs::write(&path, b"old").unwrap();
        write_atomic(&path, b"new", true).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
    }

    /// A pipe or a device named as the output (`--output /dev/null`, `/dev/stdout`, a
    /// FIFO) is written to, not replaced: renaming a file over it would leave a regular
    /// file where the device was (as root, a `/dev/null` that every later program reads
    /// text from; a benchmark's `--output /dev/null` did that to this machine). A FIFO
    /// stands for both here, reached directly and through a symbolic link.
    #[cfg(unix)]
    #[test]
    fn a_pipe_or_device_is_written_to_not_replaced() {
        use std::os::unix::fs::FileTypeExt;
        let dir = tempfile::tempdir().unwrap();
        let fifo = crate::io::fifo_in(dir.path(), "pipe");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&fifo, &link).unwrap();
        for path in [&fifo, &link] {
            let reader = {
                let fifo = fifo.clone();
                std::thread::spawn(move || std::fs::read(fifo).unwrap())
            };
            write_atomic(path, b"rows\n", true).unwrap();
            // Checked before joining: a replaced pipe would leave the reader waiting.
            assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo(), "still a pipe");
            assert_eq!(reader.join().unwrap(), b"rows\n");
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2, "no temporary left");
        }
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link kept");
    }

    /// An exact mode is set whatever the umask, and a symbolic link at the path is
    /// replaced, its target untouched.
    #[cfg(unix)]
    #[test]
    fn takes_the_mode_asked_and_replaces_a_link_without_following_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, b"keep").unwrap();
        let path = dir.path().join("out.csv");
        std::os::unix::fs::symlink(&target, &path).unwrap();
        let mut f = AtomicFile::with_mode(&path, 0o640).unwrap();
        f.write_all(b"rows").unwrap();
        f.commit().unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.file_type().is_file());
        assert_eq!(meta.permissions().mode() & 0o777, 0o640);
        assert_eq!(std::fs::read(&path).unwrap(), b"rows");
    }
}
