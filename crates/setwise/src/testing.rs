//! Helpers to run both roles in one process, for tests and benchmarks (the `testing`
//! feature; the crate's own tests turn it on).

use crate::error::Result;
use crate::net::{Channel, DEFAULT_MAX_FRAME, MemoryChannel, NetProfile, Shaped};
use crate::protocols::{Outcome, Report, Role};
use crate::session::{self, Input, Job};

/// Both roles' results.
pub struct PairRun {
    /// The sender's outcome and report.
    pub sender: Result<(Outcome, Report)>,
    /// The receiver's outcome and report.
    pub receiver: Result<(Outcome, Report)>,
}

/// Runs `job` with the sender's and the receiver's inputs over an in-memory channel
/// pair, optionally shaped.
pub fn run_pair<I: AsRef<[u8]> + Sync>(
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

/// [`run_pair`] on plain item lists.
pub fn run_items<I: AsRef<[u8]> + Sync>(job: &Job, sender: &[I], receiver: &[I]) -> PairRun {
    run_pair(job, Input::Items(sender), Input::Items(receiver), None)
}

/// Runs both roles over two given channel ends (sender's first).
pub fn run_over<C: Channel, I: AsRef<[u8]> + Sync>(
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
