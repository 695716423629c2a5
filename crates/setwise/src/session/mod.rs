//! Sessions: the one entry point that runs a role of any protocol.
//!
//! [`run`] checks the job and the input, exchanges hellos (protocol, operation,
//! canonical parameters, set sizes, fresh nonces for the session id), dispatches to the
//! protocol's role, records the run [`Report`] and, when this side fails, tells the peer
//! why before returning. The CLI, the demo, the benchmarks and the judge all run through
//! it; nothing else dispatches on the protocol.

pub mod auto;
mod hello;
mod job;

pub use crate::protocols::params::{AuthorizedJob, Named, ProtocolParams, UnbalancedJob};
pub(crate) use hello::TAG_HELLO;
pub use hello::{Hello, MAGIC, MAX_HELLO_FRAME, WIRE_VERSION, admission, handshake};
pub use job::Job;

use crate::error::{Error, Result};
use crate::io::check_distinct;
use crate::net::Channel;
use crate::protocols::authorized::{self, Credentials, JudgeConfig, JudgeKey, Mode, Policy};
use crate::protocols::mqrpmt::{self, Values};
use crate::protocols::spec::Takes;
use crate::protocols::unbalanced::{self, SenderDb};
use crate::protocols::{
    Context, MAX_SET_SIZE, Observed, Operation, Outcome, PhaseObserver, Protocol, Report, Reveal, Role, compact, ecdh,
    fhe, reveal, vole,
};
use crate::wire::msg::send_abort;

/// What a role brings to a run besides the job.
#[non_exhaustive]
pub enum Input<'a, I = Vec<u8>> {
    /// Distinct items: every role of `ecdh`, `fhe`, `compact`, `mqrpmt` (but the `sum`
    /// sender), the `unbalanced` receiver, the `authorized` server and an authorising
    /// client.
    Items(&'a [I]),
    /// `mqrpmt` `sum`, sender: distinct items, one value per item, and the declared bound
    /// of every value (it fixes the sum's modulus).
    Values {
        /// The items.
        items: &'a [I],
        /// One value per item.
        values: &'a [u64],
        /// The largest value any item may have.
        bound: u64,
    },
    /// `unbalanced`, sender: the preprocessed database.
    Database(&'a SenderDb),
    /// `authorized` / `partial` intersection, client (receiver): its items and the judge's
    /// credentials; only the items with a signature take part.
    Credentials {
        /// The items.
        items: &'a [I],
        /// The credentials from an authorisation.
        credentials: &'a Credentials,
    },
    /// The judge of an authorisation: its key, what it allows and how it decides.
    Judge {
        /// The judge's key pair.
        key: &'a JudgeKey,
        /// Which items it signs.
        policy: &'a dyn Policy,
        /// Partial fraction and strictness.
        config: JudgeConfig,
    },
}

impl<I> std::fmt::Debug for Input<'_, I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Input::Items(_) => "Input::Items",
            Input::Values { .. } => "Input::Values",
            Input::Database(_) => "Input::Database",
            Input::Credentials { .. } => "Input::Credentials",
            Input::Judge { .. } => "Input::Judge",
        })
    }
}

impl<'a, I: AsRef<[u8]> + Sync> Input<'a, I> {
    /// The items this input brings, if any.
    fn items(&self) -> Option<&'a [I]> {
        match self {
            Input::Items(x) | Input::Values { items: x, .. } | Input::Credentials { items: x, .. } => Some(x),
            Input::Database(_) | Input::Judge { .. } => None,
        }
    }

    /// What kind of input it is.
    pub fn kind(&self) -> Takes {
        match self {
            Input::Items(_) => Takes::Items,
            Input::Values { .. } => Takes::Values,
            Input::Database(_) => Takes::Database,
            Input::Credentials { .. } => Takes::Credentials,
            Input::Judge { .. } => Takes::Judge,
        }
    }
}

/// Runs one role of `job` with `input` over `ch`: checks, hello, protocol, report.
///
/// Local mistakes (a wrong input for the role, repeated items, parameters that do not
/// fit) are reported before anything is sent. If this side fails for any reason but the
/// transport or the peer's own abort, it tells the peer why before returning, so both
/// sides end with a clear error.
///
/// ```
/// use setwise::net::MemoryChannel;
/// use setwise::session::{Input, Job, run};
/// use setwise::{Operation, Outcome, Protocol, Role};
///
/// let job = Job::new(Protocol::Ecdh, Operation::Intersection);
/// let sender_items = [b"ann".to_vec(), b"bob".to_vec(), b"cid".to_vec()];
/// let receiver_items = [b"bob".to_vec(), b"dan".to_vec()];
/// let (mut a, mut b) = MemoryChannel::pair(1 << 20);
/// let (_, (outcome, report)) = std::thread::scope(|s| {
///     let sender = s.spawn(|| run(&mut a, &job, Role::Sender, Input::Items(&sender_items)));
///     let receiver = run(&mut b, &job, Role::Receiver, Input::Items(&receiver_items)).unwrap();
///     (sender.join().unwrap().unwrap(), receiver)
/// });
/// assert_eq!(outcome, Outcome::Intersection(vec![0])); // receiver_items[0] is common
/// assert_eq!(report.peer_set_size, 3);
/// ```
pub fn run<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    job: &Job,
    role: Role,
    input: Input<'_, I>,
) -> Result<(Outcome, Report)> {
    run_observed(ch, job, role, input, None)
}

/// [`run`], telling `observer` of each phase as it starts and of each chunk of a long
/// transfer (a frontend shows progress with it).
pub fn run_observed<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    job: &Job,
    role: Role,
    input: Input<'_, I>,
    observer: Option<PhaseObserver>,
) -> Result<(Outcome, Report)> {
    job.validate(role)?;
    let expected = job.protocol.spec().takes(job.operation, role);
    if input.kind() != expected {
        return Err(Error::Usage(format!(
            "{} {} {role}: takes {}, not {}",
            job.protocol,
            job.operation,
            expected.name(),
            input.kind().name()
        )));
    }
    if let Some(items) = input.items() {
        check_distinct(items)?;
    }
    // Only the items the judge signed take part in an authorised intersection.
    let usable = match (&input, &job.params) {
        (Input::Credentials { items, credentials }, ProtocolParams::Authorized(a)) => {
            check_credentials(credentials, Mode::of(job.protocol).expect("an authorised protocol"), a)?;
            Some(authorized::usable(credentials, items))
        }
        _ => None,
    };
    let own_size = match (&input, &usable) {
        (_, Some(u)) => u.len(),
        (Input::Database(db), _) => {
            db.key()?;
            if db.key_columns() != job.key_columns {
                return Err(Error::params(
                    "key_columns",
                    format!(
                        "key_columns: the database joins {} key columns, the job {}",
                        db.key_columns(),
                        job.key_columns
                    ),
                ));
            }
            db.info().sender_size
        }
        (input, _) => input.items().map_or(0, <[I]>::len),
    };
    let (protocol, operation) = job.hello_names();
    let mut report = Report::new(protocol, operation);
    if let Some(o) = &observer {
        report.observe(o.clone());
    }
    let ch = &mut Observed::new(ch, observer);
    report.role = Some(role);
    report.params = job.hello_params();
    report.peer_identity = ch.peer_identity();
    let hello = Hello::new(protocol, operation, job.hello_params(), role, own_size);
    let result = report
        .phase("hello", ch, |ch| {
            let (ctx, theirs) = hello::exchange(ch, &hello, job.max_peer_size.min(MAX_SET_SIZE))?;
            Ok((ctx, auto::meet(job, role, &hello, &theirs)?))
        })
        .and_then(|(ctx, named_by_peer)| {
            report.own_set_size = ctx.own_size;
            report.peer_set_size = ctx.peer_size;
            let items = input.items();
            let chosen;
            let job = if let Some(named) = named_by_peer {
                report.protocol = named.protocol.name().to_string();
                report.detail("protocol", format!("{}, named by the peer (this side said auto)", named.protocol));
                chosen = named;
                &chosen
            } else if job.protocol == Protocol::Auto {
                let choice = auto::choose(job.operation, job.security, ctx.sender_size(), ctx.receiver_size())?;
                report.protocol = choice.protocol.name().to_string();
                report.detail("protocol", format!("{}, chosen by auto: {}", choice.protocol, choice.why));
                chosen = job.clone().resolved(choice.protocol).with_params(choice.params);
                &chosen
            } else {
                job
            };
            let outcome = dispatch(ch, job, &ctx, input, usable.as_deref(), &mut report)?;
            match (job.reveal, ctx.role, items) {
                (Reveal::Both, Role::Receiver, Some(y)) => {
                    reveal::tell_sender(ch, &ctx, y, &outcome, &mut report).map(|()| outcome)
                }
                (Reveal::Both, Role::Sender, Some(x)) => reveal::learn(ch, &ctx, job.operation, x, &mut report),
                _ => Ok(outcome),
            }
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
    record(&mut report, &outcome);
    report.finish(ch);
    Ok((outcome, report))
}

/// Runs one role of `job` with `input` over `ch` in a session whose [`Context`] was
/// settled elsewhere (a staged run's bucket: the two hellos and the bucket sizes are in
/// the exchange): the checks of [`run`] and the protocol, without a hello, an abort or a
/// report of its own. `job` names a concrete protocol whose role takes items (or, for
/// the value holder of `sum`, items and values).
pub fn run_in_context<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    job: &Job,
    ctx: &Context,
    input: Input<'_, I>,
    report: &mut Report,
) -> Result<Outcome> {
    job.validate(ctx.role)?;
    let expected = job.protocol.spec().takes(job.operation, ctx.role);
    if job.protocol == Protocol::Auto || input.kind() != expected || !matches!(expected, Takes::Items | Takes::Values) {
        return Err(Error::Usage(format!(
            "{} {} {}: a run in a settled context takes items (or items and values)",
            job.protocol, job.operation, ctx.role
        )));
    }
    if let Some(items) = input.items() {
        check_distinct(items)?;
    }
    dispatch(ch, job, ctx, input, None, report)
}

/// The one dispatch: which role function runs for the job, the role and the input.
fn dispatch<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    job: &Job,
    ctx: &Context,
    input: Input<'_, I>,
    usable: Option<&[(usize, crate::crypto::bls12_381::G1Affine)]>,
    report: &mut Report,
) -> Result<Outcome> {
    let op = job.operation;
    let nothing = |r: Result<()>| r.map(|()| Outcome::Nothing);
    match (job.protocol, &job.params, ctx.role, input) {
        (Protocol::Ecdh, _, Role::Sender, Input::Items(x)) => nothing(ecdh::sender(ch, ctx, op, x, report)),
        (Protocol::Ecdh, _, Role::Receiver, Input::Items(y)) => ecdh::receiver(ch, ctx, op, y, report),
        (Protocol::Fhe, _, Role::Sender, Input::Items(x)) => nothing(fhe::sender(ch, ctx, x, report)),
        (Protocol::Fhe, _, Role::Receiver, Input::Items(y)) => fhe::receiver(ch, ctx, y, report),
        (Protocol::Compact, _, Role::Sender, Input::Items(x)) => nothing(compact::sender(ch, ctx, x, report)),
        (Protocol::Compact, _, Role::Receiver, Input::Items(y)) => compact::receiver(ch, ctx, y, report),
        (Protocol::Vole, _, Role::Sender, Input::Items(x)) => nothing(vole::sender(ch, ctx, job.security, x, report)),
        (Protocol::Vole, _, Role::Receiver, Input::Items(y)) => vole::receiver(ch, ctx, job.security, y, report),
        (Protocol::Mqrpmt, ProtocolParams::Mqrpmt(m), Role::Sender, Input::Items(x)) => {
            mqrpmt::sender(ch, ctx, op, x, None, m, report)
        }
        (Protocol::Mqrpmt, ProtocolParams::Mqrpmt(m), Role::Sender, Input::Values { items, values, bound }) => {
            mqrpmt::sender(ch, ctx, op, items, Some(Values { values, bound }), m, report)
        }
        (Protocol::Mqrpmt, ProtocolParams::Mqrpmt(m), Role::Receiver, Input::Items(y)) => {
            mqrpmt::receiver(ch, ctx, op, y, m, report)
        }
        (Protocol::Unbalanced, _, Role::Sender, Input::Database(db)) => {
            nothing(unbalanced::sender(ch, ctx, db, report))
        }
        (Protocol::Unbalanced, ProtocolParams::Unbalanced(u), Role::Receiver, Input::Items(y)) => {
            unbalanced::receiver(ch, ctx, y, u.fingerprint.as_deref(), report)
        }
        (Protocol::Authorized | Protocol::Partial, ProtocolParams::Authorized(a), role, input) => {
            let mode = Mode::of(job.protocol).expect("an authorised protocol");
            match (op, role, input, &a.judge_key) {
                (Operation::Intersection, Role::Sender, Input::Items(y), Some(pk)) => {
                    nothing(authorized::sender(ch, ctx, mode, pk, &a.client_id, y, report))
                }
                (Operation::Intersection, Role::Receiver, Input::Credentials { credentials, .. }, _) => {
                    authorized::receiver(ch, ctx, credentials, usable.unwrap_or_default(), report)
                }
                (Operation::Authorize, Role::Judge, Input::Judge { key, policy, config }, _) => {
                    authorized::judge(ch, ctx, key, policy, &config, report).map(Outcome::Judged)
                }
                (Operation::Authorize, Role::Receiver, Input::Items(x), _) => {
                    let (credentials, refused) = authorized::authorize(ch, x, &a.client_id, mode, report)?;
                    Ok(Outcome::Credentials { credentials: Box::new(credentials), refused })
                }
                (_, role, input, _) => Err(unsupported(job, role, input.kind())),
            }
        }
        (_, _, role, input) => Err(unsupported(job, role, input.kind())),
    }
}

fn unsupported(job: &Job, role: Role, input: Takes) -> Error {
    Error::Usage(format!("{} {} has no {role} role that takes {}", job.protocol, job.operation, input.name()))
}

/// The client's credentials must be for the job's mode, client and judge.
fn check_credentials(c: &Credentials, mode: Mode, job: &AuthorizedJob) -> Result<()> {
    if c.mode != mode {
        return Err(Error::Usage(format!("the credentials are for {}, not {}", c.mode.protocol(), mode.protocol())));
    }
    if c.client_id != job.client_id || Some(c.judge_pk) != job.judge_key {
        return Err(Error::Usage("the credentials are for another client identity or judge than the job".into()));
    }
    Ok(())
}

/// Result counts in the report.
fn record(report: &mut Report, outcome: &Outcome) {
    match outcome {
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
        Outcome::Credentials { credentials, refused } => {
            report.result("signed", credentials.entries.len() as u64);
            report.result("refused", refused.len() as u64);
        }
        Outcome::Judged(j) => {
            report.result("signed", j.signed as u64);
            report.result("refused", j.refused as u64);
        }
        Outcome::Nothing => {}
    }
}

/// One log line for a session a server completed: the peer's set size and what this
/// side learned (a judge: what it signed for whom), the time and the traffic. Shared by
/// every front end that serves sessions.
pub fn served_line(outcome: &Outcome, r: &Report) -> String {
    use crate::protocols::human_bytes;
    let traffic = format!(
        "in {:.2} s, sent {}, received {}",
        r.total_ms / 1e3,
        human_bytes(r.traffic.bytes_sent),
        human_bytes(r.traffic.bytes_received)
    );
    let learned = match outcome {
        Outcome::Judged(o) => {
            let opened = if o.mode == Mode::Partial { format!(", opened {}", o.opened) } else { String::new() };
            return format!(
                "client '{}' ({:?}): signed {}, refused {}{opened} {traffic}",
                o.client_id, o.mode, o.signed, o.refused
            );
        }
        Outcome::CardinalitySum { cardinality, sum } => format!(", learned cardinality {cardinality}, sum {sum}"),
        Outcome::Cardinality(c) => format!(", learned cardinality {c}"),
        Outcome::Intersection(rows) => format!(", learned an intersection of {}", rows.len()),
        _ => String::new(),
    };
    format!("answered {} items{learned} {traffic}", r.peer_set_size)
}
