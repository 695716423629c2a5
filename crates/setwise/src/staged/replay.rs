//! Staged runs of any protocol whose roles take items, by replay: a bucket's role runs
//! over a [`ReplayChannel`] whose peer messages are those in the exchange so far; when it
//! asks for one that is not there yet, the stage ends ([`NetError::Pending`]) and the
//! messages it sent are this stage's part for the bucket. The next stage runs the role
//! again from its start, seeded ([`rng::seeded`]) from the party's run seed so that it
//! draws the same randomness, sends the same messages (checked against the digests in
//! this party's own markers: a replay that differs stops the run), and goes one message
//! further.
//!
//! A role's state between stages is therefore the run seed and the messages in the
//! exchange: no secret intermediate state is written anywhere, and the protocol's code
//! is the one a connection runs (one copy of each protocol). The price is recomputing
//! the earlier rounds at every stage; a bucket that received nothing new is not run.
//!
//! | stage | each party |
//! |---|---|
//! | 0 | its hello |
//! | 1 | its number of items in each bucket (the marker's part counts) |
//! | k ≥ 2 | per bucket, the messages its role sends after reading the peer's stages 2..k−1 |
//!
//! A party's stage k needs the peer's stage k−1, unless the peer's last stage came
//! earlier (its marker says `last`: every bucket's role ended). When every bucket's role
//! ended, the runner combines what they learned ([`super::work::Learned`]). What leaks
//! beyond the protocol: each bucket's size, and whatever a run leaks, per bucket (with
//! `mqrpmt` the receiver's count and the `sum` sender's sum; docs/scale-out.md).

use super::plan::Plan;
use super::seed::RunSeed;
use crate::crypto::dst::{self, SessionId};
use crate::crypto::rng;
use crate::error::{Deviation, Error, Result};
use crate::io::hex;
use crate::net::{Channel, DEFAULT_MAX_FRAME, NetError, Stats};
use crate::protocols::{Context, Outcome, Report, Role};
use crate::session::Item;
use crate::session::{Input, Job, run_in_context};
use crate::staged::message::part_digest;
use crate::wire::{Reader, WireError};
use std::collections::VecDeque;
use std::sync::mpsc::{Receiver, Sender, channel};
use zeroize::Zeroizing;

/// Most stages a replayed run may take.
pub const MAX_STAGES: u8 = 64;
/// Longest frame a replayed part may hold: a connection's own limit.
pub const MAX_FRAME: usize = DEFAULT_MAX_FRAME;

/// One part's bytes: each frame after its length as a little-endian `u32`.
pub fn encode_frames<F: AsRef<[u8]>>(frames: &[F]) -> Vec<u8> {
    let mut out = Vec::with_capacity(frames.iter().map(|f| f.as_ref().len() + 4).sum());
    for f in frames.iter().map(AsRef::as_ref) {
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(f);
    }
    out
}

/// The `count` frames of one part's bytes; a frame above [`MAX_FRAME`], a missing
/// frame or bytes after the last are errors.
pub fn decode_frames(bytes: &[u8], count: u64) -> std::result::Result<Vec<Vec<u8>>, WireError> {
    const WHAT: &str = "staged frames";
    let mut r = Reader::new(bytes);
    let mut out = Vec::new(); // grown as frames are read, never sized from the count
    while r.remaining() > 0 {
        if out.len() as u64 == count {
            return Err(WireError::Invalid { what: WHAT, why: "bytes after the last frame" });
        }
        let len = r.u32(WHAT)? as usize;
        if len > MAX_FRAME {
            return Err(WireError::Count { what: WHAT, got: len as u64, bound: MAX_FRAME as u64 });
        }
        out.push(r.take(len, WHAT)?.to_vec());
    }
    if out.len() as u64 != count {
        return Err(WireError::Count { what: WHAT, got: out.len() as u64, bound: count });
    }
    Ok(out)
}

/// The largest part that can hold `frames` frames, so a reader refuses a larger file
/// before reading it.
pub fn max_part_bytes(frames: u64) -> u64 {
    frames.saturating_mul(4 + MAX_FRAME as u64)
}

/// What this party sent for a bucket in one earlier stage, as its marker lists it.
#[derive(Debug, Clone)]
pub struct Sent {
    /// The stage.
    pub stage: u8,
    /// Frames sent.
    pub frames: u64,
    /// The part's digest (hexadecimal, [`part_digest`]).
    pub digest: String,
}

/// A bucket's channel in a replay: the peer's messages so far, this party's earlier
/// ones to check the replay against, and the new ones.
#[derive(Debug)]
pub struct ReplayChannel {
    session: SessionId,
    role: Role,
    bucket: u32,
    inbound: VecDeque<Vec<u8>>,
    sent: Vec<Sent>,
    /// Index into `sent` of the stage being re-sent, its frames so far and their bytes.
    at: usize,
    in_part: u64,
    part: Vec<u8>,
    fresh: Vec<Vec<u8>>,
    diverged: Option<String>,
    pending: bool,
    stats: Stats,
    link: Option<Link>,
}

/// A live role's link to the runner ([`Live`]): new peer messages in, events out.
#[derive(Debug)]
struct Link {
    peer: Receiver<Vec<Vec<u8>>>,
    events: Sender<Event>,
}

/// What a live role tells the runner.
#[derive(Debug)]
enum Event {
    /// A message beyond the earlier stages'.
    Sent(Vec<u8>),
    /// It waits for the peer's next message, having read every one it was given.
    Waiting,
    /// Its end.
    Ended(Result<Outcome>),
}

impl ReplayChannel {
    /// The channel of `role`'s bucket `bucket` in a run whose session (under which its
    /// parts are digested) is `session`.
    pub fn new(session: SessionId, role: Role, bucket: u32, inbound: Vec<Vec<u8>>, sent: Vec<Sent>) -> Self {
        Self {
            session,
            role,
            bucket,
            inbound: inbound.into(),
            sent,
            at: 0,
            in_part: 0,
            part: Vec::new(),
            fresh: Vec::new(),
            diverged: None,
            pending: false,
            stats: Stats::default(),
            link: None,
        }
    }

    /// Checks each earlier stage whose frames have all been sent again.
    fn settle(&mut self) {
        while self.diverged.is_none() && self.at < self.sent.len() && self.sent[self.at].frames == self.in_part {
            let s = &self.sent[self.at];
            if hex(&part_digest(self.session, s.stage, self.role, self.bucket, &self.part)) != s.digest {
                self.diverged = Some(format!("its messages of stage {} came out different", s.stage));
            }
            self.at += 1;
            self.in_part = 0;
            self.part.clear();
        }
    }

    /// The replay's check once the role stopped: every earlier message was sent again,
    /// the same.
    fn check(&mut self) -> Result<()> {
        self.settle();
        if self.diverged.is_none() && self.at < self.sent.len() {
            self.diverged = Some(format!("it sent fewer messages than in stage {}", self.sent[self.at].stage));
        }
        match &self.diverged {
            None => Ok(()),
            Some(why) => Err(Error::usage(
                "workdir",
                format!(
                    "bucket {}: the replay of this party's role does not repeat its earlier stages ({why}); \
                 the run cannot go on (was the workdir's seed replaced, or setwise changed within the run?)",
                    self.bucket
                ),
            )),
        }
    }
}

impl Channel for ReplayChannel {
    fn send(&mut self, frame: &[u8]) -> std::result::Result<(), NetError> {
        if frame.len() > MAX_FRAME {
            return Err(NetError::FrameTooLarge { len: frame.len(), max: MAX_FRAME });
        }
        self.settle();
        if self.diverged.is_some() {
            return Err(NetError::Closed);
        }
        if self.at < self.sent.len() {
            self.part.extend_from_slice(&(frame.len() as u32).to_le_bytes());
            self.part.extend_from_slice(frame);
            self.in_part += 1;
        } else if let Some(link) = &self.link {
            link.events.send(Event::Sent(frame.to_vec())).map_err(|_| NetError::Closed)?;
        } else {
            self.fresh.push(frame.to_vec());
        }
        self.stats.count_sent(frame.len());
        Ok(())
    }

    fn recv(&mut self) -> std::result::Result<Vec<u8>, NetError> {
        loop {
            if let Some(frame) = self.inbound.pop_front() {
                self.stats.count_received(frame.len());
                return Ok(frame);
            }
            if self.link.is_none() {
                self.pending = true;
                return Err(NetError::Pending);
            }
            // Live: before the runner takes this stage as done, the earlier stages must
            // have repeated; then wait for the peer's next stage, given as one batch (so
            // the role cannot wait halfway through a stage's messages).
            self.settle();
            if self.diverged.is_some() || self.at < self.sent.len() {
                return Err(NetError::Closed); // `check` says what differed
            }
            let link = self.link.as_ref().expect("a live channel");
            link.events.send(Event::Waiting).map_err(|_| NetError::Closed)?;
            let batch = link.peer.recv().map_err(|_| NetError::Closed)?;
            self.inbound.extend(batch);
        }
    }

    fn stats(&self) -> Stats {
        self.stats
    }
}

/// The session id of bucket `bucket` of the run.
pub fn bucket_session(plan: &Plan, bucket: u32) -> SessionId {
    plan.session.sub(dst::STAGED_BUCKET_SESSION, &bucket.to_le_bytes())
}

/// The seed of this party's randomness in bucket `bucket`.
fn bucket_seed(seed: &RunSeed, plan: &Plan, bucket: u32) -> Zeroizing<[u8; 32]> {
    let mut input = Vec::with_capacity(32 + 10 + 4);
    input.extend_from_slice(&plan.session.0);
    input.extend_from_slice(plan.role.name().as_bytes());
    input.extend_from_slice(&bucket.to_le_bytes());
    let wide = seed.derive(dst::STAGED_REPLAY_SEED, &input);
    Zeroizing::new(wide[..32].try_into().expect("32 bytes"))
}

/// A bucket's input: its items, always in the same order, and for a role that takes
/// values (the value holder of `sum`) one value per item with their declared bound.
#[derive(Debug)]
pub struct BucketInput<'a, I> {
    /// The bucket's items.
    pub items: &'a [I],
    /// One value per item and the bound of every value, if the role takes values.
    pub values: Option<(&'a [u64], u64)>,
}

impl<I> Clone for BucketInput<'_, I> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<I> Copy for BucketInput<'_, I> {}

/// A [`BucketInput`] that owns its items and values (a live role's, on its own thread).
#[derive(Debug)]
pub struct OwnedInput {
    /// The bucket's items.
    pub items: Vec<Vec<u8>>,
    /// One value per item and their bound, if the role takes values.
    pub values: Option<(Vec<u64>, u64)>,
}

impl OwnedInput {
    /// A copy of `input`.
    pub fn of<I: AsRef<[u8]>>(input: BucketInput<'_, I>) -> Self {
        let items = input.items.iter().map(|x| x.as_ref().to_vec()).collect();
        Self { items, values: input.values.map(|(v, bound)| (v.to_vec(), bound)) }
    }

    /// The input it holds.
    pub fn borrow(&self) -> BucketInput<'_, Vec<u8>> {
        BucketInput { items: &self.items, values: self.values.as_ref().map(|(v, bound)| (v.as_slice(), *bound)) }
    }
}

impl<'a, I> BucketInput<'a, I> {
    /// The role's input to the protocol.
    fn input(self) -> Input<'a, I> {
        match self.values {
            Some((values, bound)) => Input::Values { items: self.items, values, bound },
            None => Input::Items(self.items),
        }
    }
}

/// What a bucket's replay gave: the new messages, and the outcome if the role ended.
#[derive(Debug)]
pub struct BucketRun {
    /// Messages sent beyond the earlier stages', in order.
    pub fresh: Vec<Vec<u8>>,
    /// The role's outcome, if it ended.
    pub outcome: Option<Outcome>,
}

/// Replays this party's role of `job` in bucket `bucket` on its `input`, with the peer's
/// messages so far (`inbound`) and its own earlier ones (`sent`), `peer_size` the peer's
/// item count in the bucket.
#[allow(clippy::too_many_arguments)] // the run, the bucket, and both sides' messages
pub fn run_bucket<I: Item>(
    job: &Job,
    seed: &RunSeed,
    plan: &Plan,
    bucket: u32,
    input: BucketInput<'_, I>,
    peer_size: usize,
    inbound: Vec<Vec<u8>>,
    sent: Vec<Sent>,
) -> Result<BucketRun> {
    // Parts are digested under the run's session, as the exchange writes them.
    let mut ch = ReplayChannel::new(plan.session, plan.role, bucket, inbound, sent);
    let ran = play(&mut ch, job, seed, plan, bucket, input, peer_size);
    match ran {
        Ok(outcome) => Ok(BucketRun { fresh: ch.fresh, outcome: Some(outcome) }),
        Err(_) if ch.pending && ch.diverged.is_none() => Ok(BucketRun { fresh: ch.fresh, outcome: None }),
        Err(e) => Err(e),
    }
}

/// Runs the role over `ch`, seeded for the bucket, and checks the replay.
fn play<I: Item>(
    ch: &mut ReplayChannel,
    job: &Job,
    seed: &RunSeed,
    plan: &Plan,
    bucket: u32,
    input: BucketInput<'_, I>,
    peer_size: usize,
) -> Result<Outcome> {
    let ctx = Context { id: bucket_session(plan, bucket), role: plan.role, own_size: input.items.len(), peer_size };
    let mut report = Report::new(job.protocol.name(), job.operation.name());
    let ran = rng::seeded(&bucket_seed(seed, plan, bucket), || {
        run_in_context(&mut *ch, job, &ctx, input.input(), &mut report)
    });
    ch.check()?;
    let outcome = ran?;
    if !ch.inbound.is_empty() {
        return Err(Deviation::StagedMessage {
            why: format!(
                "bucket {bucket}: {} messages more than the protocol reads (after the role's end)",
                ch.inbound.len()
            ),
        }
        .into());
    }
    Ok(outcome)
}

/// A bucket's role kept running between the stages of one process (`setwise stage
/// run`), so that a stage does not recompute the earlier rounds: it is given the peer's
/// new messages and runs until it waits again. It starts as a replay (same seed, same
/// checks), so a process started later replays to exactly where this one got.
#[derive(Debug)]
pub struct Live {
    peer: Sender<Vec<Vec<u8>>>,
    events: Receiver<Event>,
    /// The last stage whose part the runner wrote from this role, and that part's digest:
    /// the role may go on only from there (else the runner replays).
    pub written: Option<(u8, String)>,
}

impl Live {
    /// Starts the role of bucket `bucket` on a thread of its own, on its items and values
    /// (owned: [`BucketInput`]), replaying `inbound` and `sent` as [`run_bucket`] does,
    /// then returns what it sent and whether it ended ([`Live::advance`]).
    #[allow(clippy::too_many_arguments)] // as run_bucket
    pub fn start(
        job: Job,
        seed: RunSeed,
        plan: Plan,
        bucket: u32,
        input: OwnedInput,
        peer_size: usize,
        inbound: Vec<Vec<u8>>,
        sent: Vec<Sent>,
    ) -> Result<(Self, BucketRun)> {
        let (peer, peer_rx) = channel();
        let (events_tx, events) = channel();
        let mut ch = ReplayChannel::new(plan.session, plan.role, bucket, inbound, sent);
        ch.link = Some(Link { peer: peer_rx, events: events_tx.clone() });
        std::thread::Builder::new()
            .name(format!("setwise-bucket-{bucket}"))
            .spawn(move || {
                let ran = play(&mut ch, &job, &seed, &plan, bucket, input.borrow(), peer_size);
                let _ = events_tx.send(Event::Ended(ran));
            })
            .map_err(|e| Error::usage("internal", format!("bucket {bucket}: cannot start a thread: {e}")))?;
        let live = Self { peer, events, written: None };
        let run = live.collect()?;
        Ok((live, run))
    }

    /// Gives the role the peer's new messages and runs it until it waits or ends.
    pub fn advance(&self, frames: Vec<Vec<u8>>) -> Result<BucketRun> {
        // A role that ended already says why in its events.
        let _ = self.peer.send(frames);
        self.collect()
    }

    fn collect(&self) -> Result<BucketRun> {
        let mut fresh = Vec::new();
        loop {
            match self.events.recv() {
                Ok(Event::Sent(f)) => fresh.push(f),
                Ok(Event::Waiting) => return Ok(BucketRun { fresh, outcome: None }),
                Ok(Event::Ended(r)) => return r.map(|o| BucketRun { fresh, outcome: Some(o) }),
                Err(_) => {
                    return Err(Error::usage("internal", "a bucket's role stopped without a word (it panicked)"));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_damage_is_refused() {
        let frames = vec![b"ab".to_vec(), Vec::new(), vec![7; 300]];
        let bytes = encode_frames(&frames);
        assert_eq!(decode_frames(&bytes, 3).unwrap(), frames);
        assert!(decode_frames(&bytes, 2).is_err(), "bytes after the last frame");
        assert!(decode_frames(&bytes, 4).is_err(), "a frame missing");
        assert!(decode_frames(&bytes[..bytes.len() - 1], 3).is_err(), "truncated");
        let mut huge = (u32::MAX).to_le_bytes().to_vec();
        huge.extend_from_slice(&[0; 8]);
        assert!(decode_frames(&huge, 1).is_err(), "a length above the limit, refused before reading");
        assert!(decode_frames(&[], 0).unwrap().is_empty());
    }

    #[test]
    fn a_replay_that_sends_other_or_fewer_messages_is_refused() {
        let session = SessionId([4; 32]);
        let sent = |frames: &[&[u8]]| {
            let bytes = encode_frames(&frames.iter().map(|f| f.to_vec()).collect::<Vec<_>>());
            vec![Sent {
                stage: 2,
                frames: frames.len() as u64,
                digest: hex(&part_digest(session, 2, Role::Sender, 0, &bytes)),
            }]
        };
        let replay = |recorded: &[&[u8]], again: &[&[u8]]| {
            let mut ch = ReplayChannel::new(session, Role::Sender, 0, Vec::new(), sent(recorded));
            for f in again {
                if ch.send(f).is_err() {
                    break;
                }
            }
            let _ = ch.recv();
            ch.check().map(|()| ch.fresh.clone())
        };
        assert_eq!(replay(&[b"a", b"b"], &[b"a", b"b", b"c"]).unwrap(), vec![b"c".to_vec()], "the same, then new");
        let e = replay(&[b"a", b"b"], &[b"a", b"x", b"c"]).unwrap_err().to_string();
        assert!(e.contains("does not repeat its earlier stages") && e.contains("stage 2 came out different"), "{e}");
        let e = replay(&[b"a", b"b"], &[b"a"]).unwrap_err().to_string();
        assert!(e.contains("fewer messages than in stage 2"), "{e}");
    }
}
