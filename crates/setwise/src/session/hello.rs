//! The hello exchange that opens every session, and the abort message.

use crate::error::{Error, NetContext, Result};
use crate::hash::{SessionId, session_id};
use crate::net::Channel;
use crate::rng::fill_os;
use crate::wire::{Reader, WireError, Writer};
use std::fmt;

/// First bytes of every hello.
pub const MAGIC: [u8; 8] = *b"SETWISE\0";
/// Version of the wire format; peers with different versions refuse each other.
pub const WIRE_VERSION: u16 = 1;

/// Message tag of the hello.
pub(crate) const TAG_HELLO: u8 = 0x01;
/// Message tag of an abort: the sender of it stops and says why.
pub(crate) const TAG_ABORT: u8 = 0xff;

/// Longest protocol, operation or parameter string accepted in a hello.
const MAX_HELLO_FIELD: usize = 4096;
/// Longest abort reason accepted.
const MAX_ABORT_REASON: usize = 4096;

/// Which output-learning side a party plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Holds a set and learns nothing (or what the operation grants the sender).
    Sender,
    /// Holds a set and learns the output.
    Receiver,
    /// Authorises a client's items (authorised PSI); plays the sender's part in hellos.
    Judge,
}

impl Role {
    fn code(self) -> u8 {
        match self {
            Role::Sender => 1,
            Role::Receiver => 2,
            Role::Judge => 3,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Sender => "sender",
            Role::Receiver => "receiver",
            Role::Judge => "judge",
        })
    }
}

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
        w.u8(self.role.code()).u64(self.set_size).raw(&self.nonce);
        w.into_vec()
    }

    /// Decodes a peer's hello. A wrong magic or version is reported as a mismatch.
    pub fn decode(frame: &[u8]) -> Result<Self> {
        let mut r = Reader::new(frame);
        let tag = r.u8("Hello.tag")?;
        if tag == TAG_ABORT {
            return Err(decode_abort(&mut r));
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

fn not_setwise() -> Error {
    Error::PeerMisbehaved("the peer is not a setwise peer (bad magic in hello)".into())
}

/// What both sides agreed in the hello exchange.
#[derive(Debug, Clone)]
pub struct Session {
    /// Per-session value for domain separation.
    pub id: SessionId,
    /// This side's role.
    pub role: Role,
    /// This side's set size.
    pub own_size: usize,
    /// The peer's announced set size.
    pub peer_size: usize,
}

impl Session {
    /// The sender's set size.
    pub fn sender_size(&self) -> usize {
        if self.role == Role::Receiver { self.peer_size } else { self.own_size }
    }

    /// The receiver's set size.
    pub fn receiver_size(&self) -> usize {
        if self.role == Role::Receiver { self.own_size } else { self.peer_size }
    }
}

/// Sends our hello, reads the peer's and checks that they agree.
///
/// Both sides check the same fields, so on a mismatch both end with an error naming the
/// field and both values. `max_peer_size` bounds the set size the peer may announce.
pub fn handshake(ch: &mut impl Channel, ours: &Hello, max_peer_size: u64) -> Result<Session> {
    ch.send(&ours.encode()).during("sending hello")?;
    let theirs = Hello::decode(&ch.recv().during("waiting for the peer's hello")?)?;
    let check = |field: &'static str, a: &str, b: &str| {
        if a == b { Ok(()) } else { Err(Error::Mismatch { field, ours: a.into(), theirs: b.into() }) }
    };
    check("protocol", &ours.protocol, &theirs.protocol)?;
    check("operation", &ours.operation, &theirs.operation)?;
    check("parameters", &ours.params, &theirs.params)?;
    if theirs.role == ours.role {
        return Err(Error::Mismatch {
            field: "role",
            ours: ours.role.to_string(),
            theirs: format!("{} too (one side must be the sender, the other the receiver)", theirs.role),
        });
    }
    if theirs.set_size > max_peer_size {
        return Err(Error::PeerMisbehaved(format!(
            "announced set size {} exceeds the limit {max_peer_size}",
            theirs.set_size
        )));
    }
    let (s, r) = match ours.role {
        Role::Receiver => (&theirs.nonce, &ours.nonce),
        Role::Sender | Role::Judge => (&ours.nonce, &theirs.nonce),
    };
    Ok(Session {
        id: session_id(s, r),
        role: ours.role,
        own_size: ours.set_size as usize,
        peer_size: theirs.set_size as usize,
    })
}

/// Tells the peer we stop and why (best effort: the connection may already be gone).
pub fn send_abort(ch: &mut impl Channel, reason: &str) {
    let reason = &reason.as_bytes()[..reason.len().min(MAX_ABORT_REASON)];
    let mut w = Writer::with_capacity(8 + reason.len());
    w.u8(TAG_ABORT).bytes(reason);
    let _ = ch.send(&w.into_vec());
}

fn decode_abort(r: &mut Reader<'_>) -> Error {
    match r.bytes("Abort.reason", MAX_ABORT_REASON) {
        Ok(b) => Error::PeerAborted(String::from_utf8_lossy(b).into_owned()),
        Err(e) => e.into(),
    }
}

/// Receives the next protocol message, which must carry `tag`; returns its body.
/// An abort from the peer becomes [`Error::PeerAborted`].
pub fn recv_message(ch: &mut impl Channel, tag: u8, name: &'static str, phase: &'static str) -> Result<Vec<u8>> {
    let mut frame = ch.recv().during(phase)?;
    match frame.first() {
        Some(&t) if t == tag => {
            frame.remove(0);
            Ok(frame)
        }
        Some(&TAG_ABORT) => Err(decode_abort(&mut Reader::new(&frame[1..]))),
        Some(&t) => Err(WireError::UnexpectedMessage { expected: name, got: t }.into()),
        None => Err(WireError::Truncated { what: name, need: 1, have: 0 }.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::MemoryChannel;

    fn pair_handshake(a: Hello, b: Hello) -> (Result<Session>, Result<Session>) {
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
