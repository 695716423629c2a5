//! Output files that appear complete or not at all: written to a temporary file beside
//! the target, synced, renamed over it (the atomic step), and the directory synced so the
//! rename survives a crash. Dropping an uncommitted file removes the temporary.

use std::fs::{File, OpenOptions};
use std::hash::{BuildHasher, RandomState};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// A file being written; [`commit`](Self::commit) makes it appear at its path.
#[derive(Debug)]
pub struct AtomicFile {
    path: PathBuf,
    tmp: PathBuf,
    file: Option<io::BufWriter<File>>,
}

impl AtomicFile {
    /// Starts writing `path`. With `private`, the file is readable by its owner only
    /// (mode 0600 on Unix) from its first byte.
    pub fn create(path: &Path, private: bool) -> io::Result<Self> {
        let name = path.file_name().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file path"))?;
        // Unique, not secret: RandomState is keyed from the OS per thread.
        let nonce = RandomState::new().hash_one((std::process::id(), path));
        let tmp_name = format!(".{}.{nonce:016x}.tmp", name.to_string_lossy());
        let tmp = path.with_file_name(tmp_name);
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        if private {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        #[cfg(not(unix))]
        let _ = private;
        let file = options.open(&tmp)?;
        Ok(Self { path: path.to_path_buf(), tmp, file: Some(io::BufWriter::with_capacity(1 << 16, file)) })
    }

    /// Flushes, syncs and renames the file into place, then syncs its directory.
    pub fn commit(mut self) -> io::Result<()> {
        let file = self.file.take().expect("committed once").into_inner().map_err(io::IntoInnerError::into_error)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&self.tmp, &self.path)?;
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
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
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
}
