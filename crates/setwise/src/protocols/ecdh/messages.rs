//! The messages of DH-PSI: three chunked streams of 32-byte ristretto255 encodings over
//! a channel, and two whole messages for callers that move bytes themselves
//! ([`Request`], [`Response`]; see [`steps`](super::steps)).

use crate::crypto::dst::SessionId;
use crate::crypto::ristretto::Encoded;
use crate::error::Result;
use crate::protocols::{MAX_SET_SIZE, Operation};
use crate::wire::msg::Message;
use crate::wire::stream::Stream;
use crate::wire::{Reader, WireError, Writer};

/// Receiver → sender: b·H(y) for each y, in the receiver's order.
pub const RECEIVER_BLINDED: Stream<32> = Stream::new(0x10, "ReceiverBlinded");
/// Sender → receiver: a·H(x) for each x, sorted.
pub const SENDER_BLINDED: Stream<32> = Stream::new(0x11, "SenderBlinded");
/// Sender → receiver: a·b·H(y), in the receiver's order (intersection) or sorted.
pub const DOUBLE_BLINDED: Stream<32> = Stream::new(0x12, "DoubleBlinded");

/// Version of the whole-message encodings.
const VERSION: u8 = 1;

/// The operation's byte in a [`Request`].
fn op_code(op: Operation) -> u8 {
    if op == Operation::Cardinality { 2 } else { 1 }
}

/// Reads a u64 count (at most `bound`) and that many points, copying only bytes present.
fn read_points(r: &mut Reader<'_>, what: &'static str, bound: u64) -> Result<Vec<Encoded>, WireError> {
    let n = r.u64(what)?;
    if n > bound {
        return Err(WireError::Count { what, got: n, bound });
    }
    Ok(r.records::<32>(usize::try_from(n).map_err(|_| WireError::Count { what, got: n, bound })?, what)?.to_vec())
}

/// Step 1 as one message: the session, the operation and every b·H(y).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The session id both steps hash in (chosen by the receiver).
    pub session: SessionId,
    /// `intersection` or `cardinality`.
    pub operation: Operation,
    /// b·H(y) for each of the receiver's items, in its order.
    pub points: Vec<Encoded>,
}

impl Message for Request {
    const TAG: u8 = 0x13;
    const NAME: &'static str = "EcdhRequest";
    type Agreed<'a> = ();

    fn write(&self, w: &mut Writer) {
        w.u8(VERSION).u8(op_code(self.operation)).raw(&self.session.0);
        w.u64(self.points.len() as u64).raw(self.points.as_flattened());
    }

    fn size_hint(&self) -> usize {
        42 + 32 * self.points.len()
    }

    fn read(r: &mut Reader<'_>, (): ()) -> Result<Self> {
        if r.u8("EcdhRequest.version")? != VERSION {
            return Err(WireError::Invalid { what: "EcdhRequest.version", why: "not version 1" }.into());
        }
        let operation = match r.u8("EcdhRequest.operation")? {
            1 => Operation::Intersection,
            2 => Operation::Cardinality,
            _ => return Err(WireError::Invalid { what: "EcdhRequest.operation", why: "not 1 or 2" }.into()),
        };
        let session = SessionId(r.array("EcdhRequest.session")?);
        let points = read_points(r, "EcdhRequest.points", MAX_SET_SIZE)?;
        Ok(Self { session, operation, points })
    }
}

/// Step 2 as one message: a·H(x) sorted, then a·b·H(y) (receiver's order, or sorted
/// for cardinality).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// a·H(x) for each of the sender's items, sorted.
    pub sender: Vec<Encoded>,
    /// a·b·H(y) for each point of the request.
    pub reblinded: Vec<Encoded>,
}

impl Message for Response {
    const TAG: u8 = 0x14;
    const NAME: &'static str = "EcdhResponse";
    /// The receiver's set size: the number of re-blinded points due.
    type Agreed<'a> = usize;

    fn write(&self, w: &mut Writer) {
        w.u8(VERSION).u64(self.sender.len() as u64).raw(self.sender.as_flattened());
        w.u64(self.reblinded.len() as u64).raw(self.reblinded.as_flattened());
    }

    fn size_hint(&self) -> usize {
        17 + 32 * (self.sender.len() + self.reblinded.len())
    }

    fn read(r: &mut Reader<'_>, receiver_size: usize) -> Result<Self> {
        if r.u8("EcdhResponse.version")? != VERSION {
            return Err(WireError::Invalid { what: "EcdhResponse.version", why: "not version 1" }.into());
        }
        let sender = read_points(r, "EcdhResponse.sender", MAX_SET_SIZE)?;
        let what = "EcdhResponse.reblinded";
        let due = receiver_size as u64;
        let n = r.u64(what)?;
        if n != due {
            return Err(WireError::Count { what, got: n, bound: due }.into());
        }
        let reblinded = r.records::<32>(receiver_size, what)?.to_vec();
        Ok(Self { sender, reblinded })
    }
}
