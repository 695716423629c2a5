//! Length-prefixed framing over a byte stream: `u32` little-endian length, then payload.

use super::NetError;
use std::io::{self, Read, Write};

/// Writes one frame (prefix and payload). The caller flushes.
pub fn write_frame(w: &mut impl Write, payload: &[u8], max: usize) -> Result<(), NetError> {
    if payload.len() > max || u32::try_from(payload.len()).is_err() {
        return Err(NetError::FrameTooLarge { len: payload.len(), max });
    }
    w.write_all(&(payload.len() as u32).to_le_bytes()).map_err(map_io)?;
    w.write_all(payload).map_err(map_io)?;
    Ok(())
}

/// Reads one frame, refusing a length prefix above `max`.
///
/// The buffer grows only with bytes actually received, so a prefix that claims more
/// than the peer sends costs no memory.
pub fn read_frame(r: &mut impl Read, max: usize) -> Result<Vec<u8>, NetError> {
    let mut prefix = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut prefix[got..]) {
            Ok(0) if got == 0 => return Err(NetError::Closed),
            Ok(0) => {
                return Err(NetError::Truncated { got: 0, expected: 4 });
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(map_io(e)),
        }
    }
    let len = u32::from_le_bytes(prefix) as usize;
    if len > max {
        return Err(NetError::FrameTooLarge { len, max });
    }
    let mut buf = Vec::with_capacity(len.min(1 << 20));
    r.take(len as u64).read_to_end(&mut buf).map_err(map_io)?;
    if buf.len() < len {
        return Err(NetError::Truncated { got: buf.len(), expected: len });
    }
    Ok(buf)
}

/// Maps socket timeouts to [`NetError::Timeout`]; the duration is filled in by the caller.
pub(crate) fn map_io(e: io::Error) -> NetError {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => NetError::Timeout(Default::default()),
        io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe => NetError::Closed,
        _ => NetError::Io(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut buf = Vec::new();
        write_frame(&mut buf, b"abc", 16).unwrap();
        write_frame(&mut buf, b"", 16).unwrap();
        let mut r = &buf[..];
        assert_eq!(read_frame(&mut r, 16).unwrap(), b"abc");
        assert_eq!(read_frame(&mut r, 16).unwrap(), b"");
        assert!(matches!(read_frame(&mut r, 16), Err(NetError::Closed)));
    }

    #[test]
    fn oversized_prefix_is_refused_before_reading() {
        let frame = (u32::MAX).to_le_bytes();
        let err = read_frame(&mut &frame[..], 1024).unwrap_err();
        assert!(matches!(err, NetError::FrameTooLarge { len, max: 1024 } if len == u32::MAX as usize));
        assert!(matches!(write_frame(&mut Vec::new(), &[0; 20], 16), Err(NetError::FrameTooLarge { .. })));
    }

    #[test]
    fn truncated_payload_and_prefix() {
        let mut buf = 10u32.to_le_bytes().to_vec();
        buf.extend_from_slice(b"short");
        assert!(matches!(read_frame(&mut &buf[..], 64), Err(NetError::Truncated { got: 5, expected: 10 })));
        assert!(matches!(read_frame(&mut &[1u8, 0][..], 64), Err(NetError::Truncated { .. })));
    }
}
