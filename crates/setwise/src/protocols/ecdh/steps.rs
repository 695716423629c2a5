//! DH-PSI step by step, without I/O: each role's computation as methods on a state value,
//! and the whole protocol as three calls on messages for callers that move the bytes
//! themselves (a Python caller, a staged cluster run). The channel roles
//! ([`sender`](super::sender), [`receiver`](super::receiver)) are built on the same steps,
//! chunk by chunk.
//!
//! ```
//! use setwise::Operation;
//! use setwise::protocols::ecdh::steps;
//! use setwise::protocols::Outcome;
//!
//! let (sender_items, receiver_items) = (["a", "b", "c"], ["c", "d"]);
//! // Receiver: the request, and the state it keeps (it may save it with `to_bytes`).
//! let (state, request) = steps::request(Operation::Intersection, &receiver_items).unwrap();
//! // Sender: the response to the request, from its own items.
//! let response = steps::respond(Operation::Intersection, &sender_items, &request).unwrap();
//! // Receiver: the result.
//! assert_eq!(steps::finish(state, &response).unwrap(), Outcome::Intersection(vec![0]));
//! ```

use super::item_hasher;
use super::messages::{Request, Response};
use crate::crypto::dst::SessionId;
use crate::crypto::ristretto::{Encoded, SecretScalar};
use crate::crypto::rng::fill_os;
use crate::error::{Deviation, Error, Result};
use crate::protocols::{Meter, Operation, Outcome};
use crate::wire::{Reader, WireError, Writer};
use rayon::prelude::*;
use std::collections::HashSet;
use zeroize::Zeroizing;

fn check_operation(op: Operation) -> Result<()> {
    match op {
        Operation::Intersection | Operation::Cardinality => Ok(()),
        other => Err(Error::params("operation", format!("ecdh has no operation {other}"))),
    }
}

/// The sender's key and what it agreed; its steps are 2a and 2b.
#[derive(Debug)]
pub struct SenderState {
    session: SessionId,
    op: Operation,
    key: SecretScalar,
}

impl SenderState {
    /// A fresh key for `op` in `session`.
    pub fn new(session: SessionId, op: Operation) -> Result<Self> {
        Self::with_key(session, op, SecretScalar::random())
    }

    /// The state with a given key (a staged run derives its keys from its seed, so that
    /// a stage run again sends the same bytes).
    pub fn with_key(session: SessionId, op: Operation, key: SecretScalar) -> Result<Self> {
        check_operation(op)?;
        Ok(Self { session, op, key })
    }

    /// Step 2a: a·H(x) for each own item, sorted (the sorted order of pseudorandom
    /// points is a function of the set, whatever the input order: a shuffle that needs
    /// no randomness, so a staged stage run again writes the same bytes).
    pub fn blind_own<I: AsRef<[u8]> + Sync>(&self, items: &[I]) -> Vec<Encoded> {
        self.blind_own_metered(items, &Meter::default())
    }

    /// [`blind_own`](Self::blind_own), telling `meter` as pieces of the items are done.
    pub fn blind_own_metered<I: AsRef<[u8]> + Sync>(&self, items: &[I], meter: &Meter) -> Vec<Encoded> {
        let hasher = item_hasher(self.session);
        let mut own = meter.map_pieces(items, |piece| self.key.hash_and_mul(&hasher, piece));
        own.par_sort_unstable();
        own
    }

    /// Step 2b: a·(b·H(y)) for each of the receiver's points, in its order, or sorted
    /// (as [`blind_own`](Self::blind_own)) when only the cardinality may be learned. An
    /// invalid point is named by index.
    pub fn reblind(&self, blinded: &[Encoded]) -> Result<Vec<Encoded>> {
        let mut out =
            self.key.mul_encoded(blinded).map_err(|index| Error::InvalidPoint { what: "ReceiverBlinded", index })?;
        if self.op == Operation::Cardinality {
            out.par_sort_unstable();
        }
        Ok(out)
    }
}

/// The receiver's key and what it agreed, kept between its steps 1 and 3. The key is
/// zeroized on drop; [`to_bytes`](Self::to_bytes) saves the state (a secret: keep it
/// on the receiver's side).
#[derive(Debug)]
pub struct ReceiverState {
    session: SessionId,
    op: Operation,
    items: usize,
    key: SecretScalar,
}

/// Bytes of a saved [`ReceiverState`].
const STATE_BYTES: usize = 2 + 32 + 8 + 32;

impl ReceiverState {
    /// A fresh key for `op` in `session`, for `items` items.
    pub fn new(session: SessionId, op: Operation, items: usize) -> Result<Self> {
        Self::with_key(session, op, items, SecretScalar::random())
    }

    /// The state with a given key ([`SenderState::with_key`] says why).
    pub fn with_key(session: SessionId, op: Operation, items: usize, key: SecretScalar) -> Result<Self> {
        check_operation(op)?;
        Ok(Self { session, op, items, key })
    }

    /// The number of own items the state was made for (the response's re-blinded count).
    pub fn items(&self) -> usize {
        self.items
    }

    /// Step 1: b·H(y) for each item (call it on consecutive chunks, in order).
    pub fn blind<I: AsRef<[u8]> + Sync>(&self, items: &[I]) -> Vec<Encoded> {
        self.key.hash_and_mul(&item_hasher(self.session), items)
    }

    /// Step 3: b·(a·H(x)) for each of the sender's points in `chunk`, which starts at its
    /// item `offset` (an invalid point is named by its index among all).
    pub fn reblind_sender(&self, offset: usize, chunk: &[Encoded]) -> Result<Vec<Encoded>> {
        self.key.mul_encoded(chunk).map_err(|i| Error::InvalidPoint { what: "SenderBlinded", index: offset + i })
    }

    /// Step 3 begins: a matcher that takes the sender's `sender_size` blinded items, then
    /// the re-blinded own items.
    pub fn matcher(&self, sender_size: usize) -> Matcher<'_> {
        Matcher {
            state: self,
            sender: HashSet::with_capacity(sender_size.min(1 << 20)),
            sender_size,
            received: 0,
            matched: Vec::new(),
        }
    }

    /// The state as bytes (version, operation, session, item count, key), to keep
    /// between the steps; wiped when dropped.
    pub fn to_bytes(&self) -> Zeroizing<Vec<u8>> {
        let mut w = Writer::with_capacity(STATE_BYTES);
        w.u8(1).u8(if self.op == Operation::Cardinality { 2 } else { 1 }).raw(&self.session.0);
        w.u64(self.items as u64).raw(&self.key.to_bytes());
        Zeroizing::new(w.into_vec())
    }

    /// A state saved by [`to_bytes`](Self::to_bytes).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let bad = |why| Error::from(WireError::Invalid { what: "EcdhReceiverState", why });
        let mut r = Reader::new(bytes);
        if r.u8("EcdhReceiverState.version")? != 1 {
            return Err(bad("not version 1"));
        }
        let op = match r.u8("EcdhReceiverState.operation")? {
            1 => Operation::Intersection,
            2 => Operation::Cardinality,
            _ => return Err(bad("unknown operation")),
        };
        let session = SessionId(r.array("EcdhReceiverState.session")?);
        let items = usize::try_from(r.u64("EcdhReceiverState.items")?).map_err(|_| bad("item count"))?;
        let key = Zeroizing::new(r.array::<32>("EcdhReceiverState.key")?);
        r.finish("EcdhReceiverState")?;
        let key = SecretScalar::from_bytes(*key).ok_or_else(|| bad("not a canonical non-zero scalar"))?;
        Ok(Self { session, op, items, key })
    }
}

/// Step 3 of the receiver: b·(a·H(x)) of the sender's items into a set, then the own
/// items' a·b·H(y) looked up in it.
#[derive(Debug)]
pub struct Matcher<'a> {
    state: &'a ReceiverState,
    sender: HashSet<Encoded>,
    sender_size: usize,
    received: usize,
    matched: Vec<usize>,
}

impl Matcher<'_> {
    /// Takes a chunk of the sender's a·H(x) that starts at item `offset`.
    pub fn add_sender(&mut self, offset: usize, chunk: &[Encoded]) -> Result<()> {
        let doubled = self.state.reblind_sender(offset, chunk)?;
        self.received += chunk.len();
        self.sender.extend(doubled);
        Ok(())
    }

    /// Checks that the sender's items are all in and distinct (distinct items hash to
    /// distinct points except with negligible probability).
    pub fn sender_done(&self) -> Result<()> {
        if self.received != self.sender_size {
            return Err(Deviation::Count {
                what: "SenderBlinded",
                got: self.received as u64,
                expected: self.sender_size as u64,
            }
            .into());
        }
        if self.sender.len() != self.sender_size {
            return Err(Deviation::Repeated { what: "SenderBlinded" }.into());
        }
        Ok(())
    }

    /// Takes a chunk of the own items' a·b·H(y) that starts at item `offset`.
    pub fn match_chunk(&mut self, offset: usize, chunk: &[Encoded]) {
        self.matched
            .extend(chunk.iter().enumerate().filter(|(_, e)| self.sender.contains(*e)).map(|(i, _)| offset + i));
    }

    /// The result: the matching own items (sorted indices) or their number.
    pub fn outcome(self) -> Outcome {
        match self.state.op {
            Operation::Cardinality => Outcome::Cardinality(self.matched.len() as u64),
            _ => Outcome::Intersection(self.matched),
        }
    }
}

/// Receiver, step 1: a fresh session and key, and the request for `items` (distinct).
pub fn request<I: AsRef<[u8]> + Sync>(op: Operation, items: &[I]) -> Result<(ReceiverState, Request)> {
    let mut session = SessionId::default();
    fill_os(&mut session.0);
    let state = ReceiverState::new(session, op, items.len())?;
    let points = state.blind(items);
    Ok((state, Request { session, operation: op, points }))
}

/// Sender, step 2: the response to `request` from its distinct `items`; `op` is what
/// the sender agrees to (a request for another operation is refused).
pub fn respond<I: AsRef<[u8]> + Sync>(op: Operation, items: &[I], request: &Request) -> Result<Response> {
    if request.operation != op {
        return Err(Error::Mismatch {
            field: "operation",
            ours: op.name().into(),
            theirs: request.operation.name().into(),
        });
    }
    let state = SenderState::new(request.session, op)?;
    let sender = state.blind_own(items);
    let reblinded = state.reblind(&request.points)?;
    Ok(Response { sender, reblinded })
}

/// Receiver, step 3: the result from the sender's response.
pub fn finish(state: ReceiverState, response: &Response) -> Result<Outcome> {
    if response.reblinded.len() != state.items {
        return Err(Deviation::Count {
            what: "DoubleBlinded",
            got: response.reblinded.len() as u64,
            expected: state.items as u64,
        }
        .into());
    }
    let mut m = state.matcher(response.sender.len());
    m.add_sender(0, &response.sender)?;
    m.sender_done()?;
    m.match_chunk(0, &response.reblinded);
    Ok(m.outcome())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::msg::Message;

    #[test]
    fn steps_through_bytes_match_the_plain_intersection() {
        let x: Vec<String> = (0..300).map(|i| format!("x{i}")).collect();
        let y: Vec<String> = (200..400).map(|i| format!("x{i}")).collect();
        for op in [Operation::Intersection, Operation::Cardinality] {
            let (state, req) = request(op, &y).unwrap();
            let saved = state.to_bytes();
            drop(state);
            let req = Request::from_frame(&req.encode(), ()).unwrap();
            let resp = respond(op, &x, &req).unwrap();
            let resp = Response::from_frame(&resp.encode(), y.len()).unwrap();
            let got = finish(ReceiverState::from_bytes(&saved).unwrap(), &resp).unwrap();
            let want: Vec<usize> = (0..100).collect();
            match got {
                Outcome::Intersection(v) => assert_eq!(v, want),
                Outcome::Cardinality(c) => assert_eq!(c, 100),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn refusals() {
        let (state, req) = request(Operation::Cardinality, &["a"]).unwrap();
        let e = respond(Operation::Intersection, &["a"], &req).unwrap_err();
        assert!(e.to_string().contains("operation"), "{e}");
        assert!(request(Operation::Sum, &["a"]).is_err());
        let resp = Response { sender: vec![], reblinded: vec![] };
        assert!(finish(state, &resp).unwrap_err().to_string().contains("requires 1"));
        assert!(ReceiverState::from_bytes(&[1, 1]).is_err());
        let mut saved = request(Operation::Intersection, &["a"]).unwrap().0.to_bytes().to_vec();
        saved[STATE_BYTES - 1] = 0xff; // key above the group order
        assert!(ReceiverState::from_bytes(&saved).is_err());
        let frame = req.encode();
        assert!(Response::from_frame(&frame, 1).is_err(), "a request is not a response");
        assert!(Request::from_frame(&frame[..frame.len() - 1], ()).is_err());
    }
}
