//! Small files (keys, key files' hex): read through a limit, whatever the file's size
//! or kind, so a key path pointed at a huge file or a device cannot exhaust memory.

use std::io::{self, Read};
use std::path::Path;

/// The bytes of `path`, which must hold at most `max` bytes; never reads more than
/// `max + 1`. A larger file is an `InvalidData` error saying so.
pub fn read_small(path: &Path, max: usize) -> io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    std::fs::File::open(path)?.take(max as u64 + 1).read_to_end(&mut buf)?;
    if buf.len() > max {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("larger than {max} bytes")));
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_up_to_the_limit_and_refuses_more() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k");
        std::fs::write(&p, [7u8; 32]).unwrap();
        assert_eq!(read_small(&p, 32).unwrap(), [7u8; 32]);
        assert!(read_small(&p, 31).unwrap_err().to_string().contains("larger than 31 bytes"));
        // A device that never ends is read only up to the limit.
        let e = read_small(Path::new("/dev/zero"), 1 << 10).unwrap_err();
        assert!(e.to_string().contains("larger than 1024 bytes"), "{e}");
    }
}
