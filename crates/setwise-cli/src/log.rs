//! Structured log lines for services (`RUST_LOG=info setwise sender --sessions 0 …`):
//! with tracing, each session's phases and finished transfers. Nothing is logged unless
//! `RUST_LOG` is set, so the default output stays as it is.

use setwise::Role;
use setwise::protocols::{PhaseObserver, Progress};
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Numbers the runs of this process, so that the lines of concurrent sessions can be
/// told apart.
static RUNS: AtomicU64 = AtomicU64::new(0);

/// Sends tracing's events to stderr, filtered by `RUST_LOG`, when it is set.
pub fn init() {
    if std::env::var_os("RUST_LOG").is_some() {
        // Fails only if a subscriber is already set, which then logs instead.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
            .try_init();
    }
}

/// An observer for one run that logs `role`'s phases (info) and transfers (debug per
/// chunk, info when one ends), each line with the run's number in this process; `None`
/// when info lines are filtered out.
pub fn observer(role: Role) -> Option<PhaseObserver> {
    if !tracing::enabled!(tracing::Level::INFO) {
        return None;
    }
    let run = RUNS.fetch_add(1, Ordering::Relaxed) + 1;
    Some(Arc::new(move |event| match event {
        Progress::Phase(phase) => tracing::info!(run, %role, phase, "phase starts"),
        Progress::Transfer(t) if t.done == t.total => {
            tracing::info!(run, %role, what = t.what, records = t.total, bytes = t.bytes, "transfer done")
        }
        Progress::Transfer(t) => {
            tracing::debug!(run, %role, what = t.what, done = t.done, total = t.total, bytes = t.bytes)
        }
        Progress::Work(w) if w.done == w.total => {
            tracing::info!(run, %role, items = w.total, unit = w.unit, "computation done")
        }
        Progress::Work(w) => tracing::debug!(run, %role, done = w.done, total = w.total, unit = w.unit, "computing"),
        _ => {}
    }))
}

/// One observer telling both `a` and `b`.
pub fn both(a: Option<PhaseObserver>, b: Option<PhaseObserver>) -> Option<PhaseObserver> {
    match (a, b) {
        (Some(a), Some(b)) => Some(Arc::new(move |event| {
            a(event);
            b(event);
        })),
        (a, b) => a.or(b),
    }
}
