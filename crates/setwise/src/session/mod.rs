//! Sessions: the hello negotiation, running one protocol role, and the run report.

mod hello;
mod report;

pub use hello::{Hello, MAGIC, Role, Session, WIRE_VERSION, handshake, recv_message, send_abort};
pub use report::{Phase, PhaseObserver, Report, human_bytes};

use crate::error::{Error, Result};
use crate::net::Channel;
use crate::protocols::mqrpmt::{self, LastMove};
use crate::protocols::{Operation, Outcome, Protocol, compact, ecdh, fhe, unbalanced};

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
    /// mqRPMT: how the client returns the server's keyed items (ignored elsewhere).
    pub last_move: LastMove,
}

impl Job {
    /// A job with one key column.
    pub fn new(protocol: Protocol, operation: Operation) -> Self {
        Self { protocol, operation, key_columns: 1, last_move: LastMove::default() }
    }

    /// Checks that the protocol implements the operation.
    pub fn validate(&self) -> Result<()> {
        if self.protocol.operations().contains(&self.operation) {
            Ok(())
        } else {
            let ops: Vec<&str> = self.protocol.operations().iter().map(|o| o.name()).collect();
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
        match self.protocol {
            Protocol::Mqrpmt => format!("key_columns={},last_move={}", self.key_columns, self.last_move),
            _ => format!("key_columns={}", self.key_columns),
        }
    }
}

/// Runs one role of `job` on `items` (distinct keys) over `ch`: hello, protocol, report.
///
/// If this side fails for any reason but the transport or the peer's own abort, it
/// tells the peer why before returning, so both sides end with a clear error.
/// (`unbalanced` runs through [`run_with`]: its sender holds a database, not items; so
/// does the `mqrpmt` `sum` sender, which holds values: [`mqrpmt::sender`].)
pub fn run<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    job: &Job,
    role: Role,
    items: &[I],
    observer: Option<PhaseObserver>,
) -> Result<(Outcome, Report)> {
    run_with(ch, job, role, items.len(), observer, |ch, session, report| match (job.protocol, role) {
        (Protocol::Ecdh, Role::Sender) => {
            ecdh::sender(ch, session, job.operation, items, report).map(|()| Outcome::Nothing)
        }
        (Protocol::Ecdh, Role::Receiver) => ecdh::receiver(ch, session, job.operation, items, report),
        (Protocol::Fhe, Role::Sender) => fhe::sender(ch, session, items, report).map(|()| Outcome::Nothing),
        (Protocol::Fhe, Role::Receiver) => fhe::receiver(ch, session, items, report),
        (Protocol::Compact, Role::Sender) => compact::sender(ch, session, items, report).map(|()| Outcome::Nothing),
        (Protocol::Compact, Role::Receiver) => compact::receiver(ch, session, items, report),
        (Protocol::Mqrpmt, Role::Sender) => {
            mqrpmt::sender(ch, session, job.operation, items, None, job.last_move, report)
        }
        (Protocol::Mqrpmt, Role::Receiver) => {
            mqrpmt::receiver(ch, session, job.operation, items, job.last_move, report)
        }
        (Protocol::Unbalanced, Role::Receiver) => unbalanced::receiver(ch, session, items, None, report),
        (Protocol::Unbalanced | Protocol::Authorized | Protocol::Partial, _) | (_, Role::Judge) => {
            Err(Error::Params(format!(
                "{} {role}s need more than items (a database, credentials or a key): use the protocol module with session::run_with",
                job.protocol
            )))
        }
    })
}

/// Runs one role with a given protocol body: validates the job, exchanges hellos
/// (announcing `own_size` items), runs `body`, records the report, and on failure tells
/// the peer why.
pub fn run_with<C: Channel>(
    ch: &mut C,
    job: &Job,
    role: Role,
    own_size: usize,
    observer: Option<PhaseObserver>,
    body: impl FnOnce(&mut C, &Session, &mut Report) -> Result<Outcome>,
) -> Result<(Outcome, Report)> {
    job.validate()?;
    run_named(ch, (job.protocol.name(), job.operation.name()), job.params(), role, own_size, observer, body)
}

/// [`run_with`] for sessions named directly (`(protocol, operation)` and the canonical
/// parameter string), e.g. a judge's authorisation sessions.
pub fn run_named<C: Channel>(
    ch: &mut C,
    (protocol, operation): (&str, &str),
    params: String,
    role: Role,
    own_size: usize,
    observer: Option<PhaseObserver>,
    body: impl FnOnce(&mut C, &Session, &mut Report) -> Result<Outcome>,
) -> Result<(Outcome, Report)> {
    let mut report = Report::new(protocol, operation);
    if let Some(o) = observer {
        report.observe(o);
    }
    report.role = Some(role);
    report.params = params.clone();
    let hello = Hello::new(protocol, operation, params, role, own_size);
    let result = report.phase("hello", ch, |ch| handshake(ch, &hello, MAX_SET_SIZE)).and_then(|session| {
        report.own_set_size = session.own_size;
        report.peer_set_size = session.peer_size;
        body(ch, &session, &mut report)
    });
    if let Err(e) = &result
        && !matches!(
            e,
            Error::Net { .. }
                | Error::PeerAborted(_)
                | Error::Mismatch { field: "protocol" | "operation" | "parameters" | "role" | "wire version", .. }
        )
    {
        send_abort(ch, &e.to_string());
    }
    let outcome = result?;
    match &outcome {
        Outcome::Intersection(v) => report.result("intersection_size", v.len() as u64),
        Outcome::Cardinality(c) => report.result("intersection_size", *c),
        Outcome::Labelled { rows, .. } => report.result("intersection_size", rows.len() as u64),
        Outcome::CardinalitySum { cardinality, sum } => {
            report.result("intersection_size", *cardinality);
            report.detail("intersection_sum", sum.to_string());
        }
        Outcome::Union(extra) => {
            let own = report.own_set_size;
            report.result("union_size", (own + extra.len()) as u64);
        }
        Outcome::Shares(s) => {
            report.result("share_rows", s.rows() as u64);
            if !s.members.is_empty() {
                report.result("intersection_size", s.members.iter().filter(|&&m| m).count() as u64);
            }
        }
        Outcome::PrivateIds { union, .. } => report.result("union_size", union.len() as u64),
        Outcome::Nothing => {}
    }
    report.finish(ch);
    Ok((outcome, report))
}
