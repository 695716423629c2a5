//! The hello exchange that opens every session.

use crate::crypto::dst::session_id;
use crate::crypto::rng::fill_os;
use crate::error::{Deviation, Error, NetContext, Result};
use crate::net::{Admission, Channel};
use crate::protocols::{Context, Role};
use crate::wire::msg::{TAG_ABORT, abort_error};
use crate::wire::text::{MAX_SHOWN, printable};
use crate::wire::{Reader, WireError, Writer};

/// First bytes of every hello.
pub const MAGIC: [u8; 8] = *b"SETWISE\0";
/// Version of the wire format; peers with different versions refuse each other.
pub const WIRE_VERSION: u16 = 5;

/// Message tag of the hello.
pub(crate) const TAG_HELLO: u8 = 0x01;

/// Longest protocol, operation or parameter string accepted in a hello.
const MAX_HELLO_FIELD: usize = 4096;
/// Largest hello frame read: its three strings at their longest and the fixed fields.
/// A peer that announces more is refused before its frame is read.
pub const MAX_HELLO_FRAME: usize = 16 << 10;

/// What one side announces before any protocol message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// Protocol name, e.g. `ecdh`.
    pub protocol: String,
    /// Operation name, e.g. `intersection`.
    pub operation: String,
    /// Canonical parameter string; both sides must send the same.
    pub params: String,
    /// The announcing side's role.
    pub role: Role,
    /// The announcing side's number of distinct items.
    pub set_size: u64,
    /// Fresh randomness contributed to the session id.
    pub nonce: [u8; 16],
}

impl Hello {
    /// A hello with a fresh nonce.
    pub fn new(protocol: &str, operation: &str, params: String, role: Role, set_size: usize) -> Self {
        let mut nonce = [0u8; 16];
        fill_os(&mut nonce);
        Self { protocol: protocol.into(), operation: operation.into(), params, role, set_size: set_size as u64, nonce }
    }

    /// The hello as a frame.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(64 + self.params.len());
        w.u8(TAG_HELLO).raw(&MAGIC).u16(WIRE_VERSION);
        w.bytes(self.protocol.as_bytes()).bytes(self.operation.as_bytes()).bytes(self.params.as_bytes());
        w.u8(role_code(self.role)).u64(self.set_size).raw(&self.nonce);
        w.into_vec()
    }

    /// Decodes a peer's hello. A wrong magic or version is reported as a mismatch.
    pub fn decode(frame: &[u8]) -> Result<Self> {
        let mut r = Reader::new(frame);
        let tag = r.u8("Hello.tag")?;
        if tag == TAG_ABORT {
            return Err(abort_error(&frame[1..]));
        }
        let magic: [u8; 8] = r.array("Hello.magic").map_err(|_| not_setwise())?;
        if tag != TAG_HELLO || magic != MAGIC {
            return Err(not_setwise());
        }
        let version = r.u16("Hello.version")?;
        if version != WIRE_VERSION {
            return Err(Error::Mismatch {
                field: "wire version",
                ours: WIRE_VERSION.to_string(),
                theirs: version.to_string(),
            });
        }
        let protocol = r.str("Hello.protocol", MAX_HELLO_FIELD)?.to_owned();
        let operation = r.str("Hello.operation", MAX_HELLO_FIELD)?.to_owned();
        let params = r.str("Hello.params", MAX_HELLO_FIELD)?.to_owned();
        let role = match r.u8("Hello.role")? {
            1 => Role::Sender,
            2 => Role::Receiver,
            3 => Role::Judge,
            _ => {
                return Err(WireError::Invalid {
                    what: "Hello.role",
                    why: "not 1 (sender), 2 (receiver) or 3 (judge)",
                }
                .into());
            }
        };
        let set_size = r.u64("Hello.set_size")?;
        let nonce = r.array("Hello.nonce")?;
        r.finish("Hello")?;
        Ok(Self { protocol, operation, params, role, set_size, nonce })
    }
}

/// The role's byte in the hello.
fn role_code(role: Role) -> u8 {
    match role {
        Role::Sender => 1,
        Role::Receiver => 2,
        Role::Judge => 3,
    }
}

fn not_setwise() -> Error {
    Deviation::NotSetwise.into()
}

/// How a listener admits connections to sessions: a well-formed hello (magic, version,
/// fields; at most [`MAX_HELLO_FRAME`] bytes) within `timeout` of connecting, TLS
/// handshake included, with the other limits of [`Admission::default`]. Whether the
/// hello agrees with ours is the session's to say, once admitted.
pub fn admission(timeout: std::time::Duration) -> Admission {
    Admission {
        timeout,
        max_first_frame: MAX_HELLO_FRAME,
        check: Some(std::sync::Arc::new(|frame: &[u8]| Hello::decode(frame).map(|_| ()).map_err(|e| e.to_string()))),
        ..Admission::default()
    }
}

/// Sends our hello, reads the peer's and checks that they agree.
///
/// Both sides check the same fields, so on a mismatch both end with an error naming the
/// field and both values. `max_peer_size` bounds the set size the peer may announce.
pub fn handshake(ch: &mut impl Channel, ours: &Hello, max_peer_size: u64) -> Result<Context> {
    let (ctx, theirs) = exchange(ch, ours, max_peer_size)?;
    check_protocol(ours, &theirs)?;
    Ok(ctx)
}

/// Checks that the peer's hello names our protocol and parameters.
pub fn check_protocol(ours: &Hello, theirs: &Hello) -> Result<()> {
    check("protocol", &ours.protocol, &theirs.protocol)?;
    check("parameters", &ours.params, &theirs.params)
}

/// A mismatch of `field` unless `a` (ours) and `b` (the peer's) agree.
pub(crate) fn check(field: &'static str, a: &str, b: &str) -> Result<()> {
    if a == b { Ok(()) } else { Err(Error::Mismatch { field, ours: a.into(), theirs: printable(b, MAX_SHOWN) }) }
}

/// Sends our hello, reads the peer's and checks the fields that never depend on the
/// protocol (the operation, the roles, the peer's size); returns the context and the
/// peer's hello, whose protocol and parameters the caller checks ([`check_protocol`], or
/// `auto`'s rule in the session layer).
pub fn exchange(ch: &mut impl Channel, ours: &Hello, max_peer_size: u64) -> Result<(Context, Hello)> {
    ch.send(&ours.encode()).during("sending hello")?;
    let theirs = Hello::decode(&ch.recv_limited(MAX_HELLO_FRAME).during("waiting for the peer's hello")?)?;
    check("operation", &ours.operation, &theirs.operation)?;
    if theirs.role == ours.role {
        return Err(Error::Mismatch {
            field: "role",
            ours: ours.role.to_string(),
            theirs: format!("{} too (one side must be the sender, the other the receiver)", theirs.role),
        });
    }
    if theirs.set_size > max_peer_size {
        return Err(Deviation::SetTooLarge { announced: theirs.set_size, limit: max_peer_size }.into());
    }
    let (s, r) = match ours.role {
        Role::Receiver => (&theirs.nonce, &ours.nonce),
        Role::Sender | Role::Judge => (&ours.nonce, &theirs.nonce),
    };
    let ctx = Context {
        id: session_id(s, r, ch.session_binding().as_ref()),
        role: ours.role,
        own_size: ours.set_size as usize,
        peer_size: theirs.set_size as usize,
    };
    Ok((ctx, theirs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::MemoryChannel;

    fn pair_handshake(a: Hello, b: Hello) -> (Result<Context>, Result<Context>) {
        let (mut ca, mut cb) = MemoryChannel::pair(1 << 20);
        std::thread::scope(|s| {
            let t = s.spawn(move || handshake(&mut cb, &b, u64::MAX));
            (handshake(&mut ca, &a, u64::MAX), t.join().unwrap())
        })
    }

    #[test]
    fn agreeing_hellos_give_one_session_id() {
        let a = Hello::new("ecdh", "intersection", "k=1".into(), Role::Sender, 10);
        let b = Hello::new("ecdh", "intersection", "k=1".into(), Role::Receiver, 20);
        let (sa, sb) = pair_handshake(a, b);
        let (sa, sb) = (sa.unwrap(), sb.unwrap());
        assert_eq!(sa.id, sb.id);
        assert_eq!((sa.sender_size(), sa.receiver_size()), (10, 20));
        assert_eq!((sb.sender_size(), sb.receiver_size()), (10, 20));
    }

    #[test]
    fn mismatches_name_both_values_on_both_sides() {
        let a = Hello::new("ecdh", "intersection", "k=1".into(), Role::Sender, 1);
        let b = Hello::new("fhe", "intersection", "k=1".into(), Role::Receiver, 1);
        let (ea, eb) = pair_handshake(a, b);
        let (ea, eb) = (ea.unwrap_err().to_string(), eb.unwrap_err().to_string());
        assert!(ea.contains("protocol") && ea.contains("ecdh") && ea.contains("fhe"), "{ea}");
        assert!(eb.contains("this side has fhe, the peer has ecdh"), "{eb}");

        let a = Hello::new("ecdh", "intersection", "k=1".into(), Role::Sender, 1);
        let b = Hello::new("ecdh", "intersection", "k=1".into(), Role::Sender, 1);
        assert!(pair_handshake(a, b).0.unwrap_err().to_string().contains("role"));
    }

    #[test]
    fn garbage_hellos_are_errors() {
        let good = Hello::new("ecdh", "cardinality", String::new(), Role::Sender, 3).encode();
        for cut in 0..good.len() {
            assert!(Hello::decode(&good[..cut]).is_err());
        }
        let mut bad = good.clone();
        bad[1] = b'X';
        assert!(Hello::decode(&bad).unwrap_err().to_string().contains("not a setwise peer"));
        let mut long = good.clone();
        long.push(0);
        assert!(Hello::decode(&long).is_err());
        assert!(Hello::decode(&good).is_ok());
    }
}
