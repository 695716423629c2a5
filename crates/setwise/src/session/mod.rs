//! Sessions: the hello negotiation, running one protocol role, and the run report.

mod hello;
mod report;

pub use hello::{Hello, MAGIC, Role, Session, WIRE_VERSION, handshake, recv_message, send_abort};
pub use report::{Phase, PhaseObserver, Report, human_bytes};

use crate::error::{Error, Result};
use crate::net::Channel;
use crate::protocols::{Operation, Outcome, Protocol, ecdh, fhe};

/// Largest set size a peer may announce: 2^32 items.
pub const MAX_SET_SIZE: u64 = 1 << 32;

/// What to run: everything both sides must agree on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// The protocol family.
    pub protocol: Protocol,
    /// The operation.
    pub operation: Operation,
    /// Number of key columns joined into each item; both sides must use the same.
    pub key_columns: usize,
}

impl Job {
    /// A job with one key column.
    pub fn new(protocol: Protocol, operation: Operation) -> Self {
        Self {
            protocol,
            operation,
            key_columns: 1,
        }
    }

    /// Checks that the protocol implements the operation.
    pub fn validate(&self) -> Result<()> {
        if self.protocol.operations().contains(&self.operation) {
            Ok(())
        } else {
            let ops: Vec<&str> = self
                .protocol
                .operations()
                .iter()
                .map(|o| o.name())
                .collect();
            Err(Error::Params(format!(
                "protocol {} has no operation {} (it has: {})",
                self.protocol,
                self.operation,
                ops.join(", ")
            )))
        }
    }

    /// The canonical parameter string sent in the hello.
    pub fn params(&self) -> String {
        format!("key_columns={}", self.key_columns)
    }
}

/// Runs one role of `job` on `items` (distinct keys) over `ch`: hello, protocol, report.
///
/// If this side fails for any reason but the transport or the peer's own abort, it
/// tells the peer why before returning, so both sides end with a clear error.
pub fn run<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    job: &Job,
    role: Role,
    items: &[I],
    observer: Option<PhaseObserver>,
) -> Result<(Outcome, Report)> {
    job.validate()?;
    let mut report = Report::new(job.protocol.name(), job.operation.name());
    if let Some(o) = observer {
        report.observe(o);
    }
    report.role = Some(role);
    report.params = job.params();
    let result = run_inner(ch, job, role, items, &mut report);
    if let Err(e) = &result
        && !matches!(
            e,
            Error::Net { .. } | Error::PeerAborted(_) | Error::Mismatch { .. }
        )
    {
        send_abort(ch, &e.to_string());
    }
    let outcome = result?;
    match &outcome {
        Outcome::Intersection(v) => report.result("intersection_size", v.len() as u64),
        Outcome::Cardinality(c) => report.result("intersection_size", *c),
        Outcome::Nothing => {}
    }
    report.finish(ch);
    Ok((outcome, report))
}

fn run_inner<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    job: &Job,
    role: Role,
    items: &[I],
    report: &mut Report,
) -> Result<Outcome> {
    let hello = Hello::new(
        job.protocol.name(),
        job.operation.name(),
        job.params(),
        role,
        items.len(),
    );
    let session = report.phase("hello", ch, |ch| handshake(ch, &hello, MAX_SET_SIZE))?;
    report.own_set_size = session.own_size;
    report.peer_set_size = session.peer_size;
    match (job.protocol, role) {
        (Protocol::Ecdh, Role::Sender) => {
            ecdh::sender(ch, &session, job.operation, items, report).map(|()| Outcome::Nothing)
        }
        (Protocol::Ecdh, Role::Receiver) => {
            ecdh::receiver(ch, &session, job.operation, items, report)
        }
        (Protocol::Fhe, Role::Sender) => {
            fhe::sender(ch, &session, items, report).map(|()| Outcome::Nothing)
        }
        (Protocol::Fhe, Role::Receiver) => fhe::receiver(ch, &session, items, report),
    }
}
