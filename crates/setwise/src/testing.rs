//! Helpers to run both roles in one process, for tests and benchmarks (the `testing`
//! feature; the crate's own tests turn it on).

use crate::error::Result;
use crate::io::{Format, ItemSet};
use crate::net::{
    Channel, DEFAULT_MAX_FRAME, Decorated, Decoration, MemoryChannel, NetError, NetProfile, Shaped, Stats, read_frame,
    write_frame,
};
use crate::protocols::unbalanced::UnbalancedParams;
use crate::protocols::{Outcome, Report, Role};
use crate::session::{self, Input, Job};
use std::path::Path;

/// Both roles' results.
pub struct PairRun {
    /// The sender's outcome and report.
    pub sender: Result<(Outcome, Report)>,
    /// The receiver's outcome and report.
    pub receiver: Result<(Outcome, Report)>,
}

/// Runs `job` with the sender's and the receiver's inputs over an in-memory channel
/// pair, optionally shaped.
pub fn run_pair<I: session::Item>(
    job: &Job,
    sender: Input<'_, I>,
    receiver: Input<'_, I>,
    profile: Option<NetProfile>,
) -> PairRun {
    let (a, b) = MemoryChannel::pair(DEFAULT_MAX_FRAME);
    match profile {
        Some(p) => run_over(job, Shaped::new(a, p), Shaped::new(b, p), sender, receiver),
        None => run_over(job, a, b, sender, receiver),
    }
}

/// Runs two halves of any two-party step (an OT, a VOLE, …) over an in-memory pair:
/// `first` on its own thread, `second` on this one; each side's channel is dropped when
/// it returns, so a failed side hangs up instead of leaving the other waiting.
pub fn two_sides<A: Send, B: Send>(
    first: impl FnOnce(&mut MemoryChannel) -> A + Send,
    second: impl FnOnce(&mut MemoryChannel) -> B + Send,
) -> (A, B) {
    let (mut a, mut b) = MemoryChannel::pair(1 << 26);
    std::thread::scope(|s| {
        let h = s.spawn(move || first(&mut a));
        let r = second(&mut b);
        drop(b);
        (h.join().expect("the first side panicked"), r)
    })
}

/// [`run_pair`] on plain item lists.
pub fn run_items<I: session::Item>(job: &Job, sender: &[I], receiver: &[I]) -> PairRun {
    run_pair(job, Input::Items(sender), Input::Items(receiver), None)
}

/// Runs both roles over two given channel ends (sender's first).
pub fn run_over<C: Channel, I: session::Item>(
    job: &Job,
    mut sender_ch: C,
    mut receiver_ch: C,
    sender: Input<'_, I>,
    receiver: Input<'_, I>,
) -> PairRun {
    std::thread::scope(|s| {
        let sender = s.spawn(move || {
            let r = session::run(&mut sender_ch, job, Role::Sender, sender);
            drop(sender_ch); // a failed side hangs up so the other cannot wait forever
            r
        });
        let receiver = session::run(&mut receiver_ch, job, Role::Receiver, receiver);
        drop(receiver_ch);
        PairRun { sender: sender.join().expect("sender thread panicked"), receiver }
    })
}

/// The plain computation protocol tests compare with: indices of `receiver`'s items
/// that `sender` also holds.
pub fn plain_intersection<I: AsRef<[u8]>>(sender: &[I], receiver: &[I]) -> std::collections::BTreeSet<usize> {
    let s: std::collections::HashSet<&[u8]> = sender.iter().map(AsRef::as_ref).collect();
    receiver.iter().enumerate().filter(|(_, y)| s.contains(y.as_ref())).map(|(i, _)| i).collect()
}

/// A peer played back from bytes: `recv` returns the frames of a script (each a `u32`
/// little-endian length and its payload, as on the TCP wire), then
/// [`NetError::Closed`]; `send` checks the frame size and discards the frame. The fuzz
/// targets run an honest party against such a peer, and [`Recording`] writes scripts.
#[derive(Debug)]
pub struct ScriptedChannel<'a> {
    script: &'a [u8],
    max_frame: usize,
    stats: Stats,
}

impl<'a> ScriptedChannel<'a> {
    /// A peer that says `script`, framed; frames above `max_frame` are refused.
    pub fn new(script: &'a [u8], max_frame: usize) -> Self {
        Self { script, max_frame, stats: Stats::default() }
    }
}

impl Channel for ScriptedChannel<'_> {
    fn send(&mut self, frame: &[u8]) -> Result<(), NetError> {
        if frame.len() > self.max_frame {
            return Err(NetError::FrameTooLarge { len: frame.len(), max: self.max_frame });
        }
        self.stats.count_sent(frame.len());
        Ok(())
    }

    fn recv(&mut self) -> Result<Vec<u8>, NetError> {
        self.recv_limited(self.max_frame)
    }

    fn recv_limited(&mut self, max: usize) -> Result<Vec<u8>, NetError> {
        let frame = read_frame(&mut self.script, max.min(self.max_frame))?;
        self.stats.count_received(frame.len());
        Ok(frame)
    }

    fn stats(&self) -> Stats {
        self.stats
    }
}

/// A channel that keeps every frame it receives, in the script form
/// [`ScriptedChannel`] plays back.
pub type Recording<C> = Decorated<C, Heard>;

/// The frames a [`Recording`] received, framed.
#[derive(Debug, Default)]
pub struct Heard(Vec<u8>);

impl<C: Channel> Recording<C> {
    /// Records what `inner` receives.
    pub fn new(inner: C) -> Self {
        Decorated::wrap(inner, Heard::default())
    }

    /// The frames received so far, framed.
    pub fn heard(&self) -> &[u8] {
        &self.decoration.0
    }
}

impl Decoration for Heard {
    fn received(&mut self, frame: Vec<u8>) -> Result<Vec<u8>, NetError> {
        write_frame(&mut self.0, &frame, usize::MAX).expect("writing to a Vec");
        Ok(frame)
    }
}

/// A channel that damages what it sends: the `nth` frame (from 0) with tag `tag` goes out
/// with the top bit of its last byte flipped (which also makes a point encoding
/// non-canonical), as a peer that deviates in that message alone.
pub type Tampering<C> = Decorated<C, Tamper>;

/// Which frame a [`Tampering`] channel damages, and how many of its tag went out.
#[derive(Debug)]
pub struct Tamper {
    tag: u8,
    nth: usize,
    seen: usize,
}

impl<C: Channel> Tampering<C> {
    /// Damages the `nth` frame tagged `tag` that `inner` sends.
    pub fn new(inner: C, tag: u8, nth: usize) -> Self {
        Decorated::wrap(inner, Tamper { tag, nth, seen: 0 })
    }

    /// Whether the frame was sent (and damaged).
    pub fn tampered(&self) -> bool {
        self.decoration.seen > self.decoration.nth
    }
}

impl Decoration for Tamper {
    fn send<C: Channel + ?Sized>(&mut self, inner: &mut C, frame: &[u8]) -> Result<(), NetError> {
        if frame.first() == Some(&self.tag) {
            self.seen += 1;
            if self.seen == self.nth + 1 {
                let mut bad = frame.to_vec();
                *bad.last_mut().expect("a tagged frame") ^= 0x80;
                return inner.send(&bad);
            }
        }
        inner.send(frame)
    }
}

/// One side of a session: its job, role and input.
pub struct Party<'a> {
    /// The job as this side sees it.
    pub job: Job,
    /// Its role.
    pub role: Role,
    /// Its input.
    pub input: Input<'a>,
}

/// Runs `a` against `b` over an in-memory pair and returns what each side heard, as
/// scripts (`[heard by a, heard by b]`), and whether each side's run succeeded.
pub fn transcripts(a: Party<'_>, b: Party<'_>) -> ([Vec<u8>; 2], [bool; 2]) {
    let (ca, cb) = MemoryChannel::pair(DEFAULT_MAX_FRAME);
    let (mut ca, mut cb) = (Recording::new(ca), Recording::new(cb));
    std::thread::scope(|s| {
        let t = s.spawn(move || {
            let ok = session::run(&mut ca, &a.job, a.role, a.input).is_ok();
            (ca, ok)
        });
        let ok_b = session::run(&mut cb, &b.job, b.role, b.input).is_ok();
        let heard_b = std::mem::take(&mut cb.decoration.0);
        drop(cb); // hang up so a failed side cannot leave the other waiting
        let (ca, ok_a) = t.join().expect("party thread panicked");
        ([ca.decoration.0, heard_b], [ok_a, ok_b])
    })
}

/// Small unbalanced parameters for fast tests: one bundle index of 1024 bins, 8 items a
/// bin, every query power sent (no relinearisation key).
pub fn small_unbalanced_params() -> UnbalancedParams {
    crate::protocols::unbalanced::params::small_test_params()
}

/// Unbalanced parameters whose sender derives powers (products and Paterson–Stockmeyer),
/// so the receiver sends a relinearisation key and the sender uses it.
pub fn keyed_unbalanced_params() -> UnbalancedParams {
    UnbalancedParams::from_json(
        r#"{"table_params":{"hash_func_count":3,"table_size":2048,"max_items_per_bin":15},
            "item_params":{"felts_per_item":4},
            "query_params":{"ps_low_degree":3,"query_powers":[1,2,4]},
            "seal_params":{"poly_modulus_degree":8192,"coeff_modulus_bits":[43,43,44,44,44],"plain_modulus":1785857}}"#,
    )
    .expect("valid parameters")
}

/// Hostile variants of a serialised relinearisation key `good`, each named: the forms
/// that made `fhe` 0.1 assert before keys were checked field by field (a `c0`
/// polynomial marked NTT or power basis instead of NTT-Shoup, another ciphertext level,
/// another decomposition base, `c1` sent in full instead of its seed). A sender must
/// refuse every one.
pub fn crafted_relin_keys(good: &[u8]) -> Vec<(&'static str, Vec<u8>)> {
    use crate::he::wire::{KeySwitchingKey, RelinearizationKey, Rq};
    use prost::Message;
    let edit = |f: &dyn Fn(&mut KeySwitchingKey)| {
        let mut rk = RelinearizationKey::decode(good).expect("a relinearisation key");
        f(rk.ksk.as_mut().expect("a key-switching key"));
        rk.encode_to_vec()
    };
    let remark = |ksk: &mut KeySwitchingKey, index: usize, representation: i32| {
        let mut rq = Rq::decode(&ksk.c0[index][..]).expect("a polynomial");
        rq.representation = representation;
        ksk.c0[index] = rq.encode_to_vec();
    };
    vec![
        ("c0 marked NTT", edit(&|k| remark(k, 0, 2))),
        ("c0 in the power basis", edit(&|k| remark(k, 1, 1))),
        ("another level", edit(&|k| k.ciphertext_level += 1)),
        ("a decomposition base", edit(&|k| k.log_base = 20)),
        ("c1 sent instead of its seed", edit(&|k| k.c1 = k.c0.clone())),
    ]
}

/// For fuzzing the input reader: whether a CSV file without quotes (and without a lone
/// `\r`) gives the same rows, keys and header, or fails alike, on the fast path and
/// through the csv crate. `true` for a file the fast path does not take.
pub fn csv_paths_agree(text: &[u8], header: bool, key: &[String]) -> bool {
    match (crate::io::split_with(text, header, key, false), crate::io::split_with(text, header, key, true)) {
        (Some(Ok(a)), Some(Ok(b))) => a == b,
        (Some(Err(_)), Some(Err(_))) | (None, None) => true,
        _ => false,
    }
}

/// For fuzzing the input reader: whether the file at `path`, holding `bytes`, reads the
/// same in blocks of `block` bytes as whole: the same items, counts and rows written
/// back, or the same error.
pub fn blocks_read_as_whole(path: &Path, bytes: &[u8], format: Format, key: &[String], block: usize) -> bool {
    let all = |s: &ItemSet| {
        let mut out = Vec::new();
        let all: Vec<usize> = (0..s.len()).collect();
        s.write_rows(&all, &mut out)
            .map(|n| (s.items().iter().map(|i| i.to_vec()).collect::<Vec<_>>(), s.stats(), n, out))
    };
    let whole = ItemSet::from_bytes(bytes.to_vec(), path, format, key).and_then(|s| all(&s));
    let blocks = ItemSet::read_in_blocks(path, format, key, block).and_then(|s| all(&s));
    match (whole, blocks) {
        (Ok(a), Ok(b)) => a == b,
        (Err(a), Err(b)) => a.to_string() == b.to_string(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocols::{Operation, Protocol};

    /// A recorded peer played back gives the honest side the same session up to the
    /// point where fresh randomness makes it diverge: here, the sender reads the whole
    /// script without a decoding error.
    #[test]
    fn a_recorded_transcript_plays_back() {
        let items: Vec<Vec<u8>> = (0..20u8).map(|i| vec![i]).collect();
        let job = Job::new(Protocol::Ecdh, Operation::Intersection);
        let party = |role| Party { job: job.clone(), role, input: Input::Items(&items) };
        let ([heard_by_sender, _], ok) = transcripts(party(Role::Sender), party(Role::Receiver));
        assert_eq!(ok, [true, true]);
        let mut ch = ScriptedChannel::new(&heard_by_sender, DEFAULT_MAX_FRAME);
        session::run(&mut ch, &job, Role::Sender, Input::Items(&items)).unwrap();
        assert_eq!(ch.stats().bytes_received as usize, heard_by_sender.len());
        let mut cut = ScriptedChannel::new(&heard_by_sender[..heard_by_sender.len() - 1], DEFAULT_MAX_FRAME);
        assert!(session::run(&mut cut, &job, Role::Sender, Input::Items(&items)).is_err());
    }
}
