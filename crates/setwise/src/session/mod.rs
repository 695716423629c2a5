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

pub use crate::protocols::Input;
pub use crate::protocols::params::{AuthorizedJob, Named, ProtocolParams, UnbalancedJob};
pub(crate) use hello::TAG_HELLO;
pub use hello::{Hello, MAGIC, MAX_HELLO_FRAME, WIRE_VERSION, admission, handshake};
pub use job::Job;

use crate::error::{Error, Result};
use crate::io::check_distinct;
use crate::net::Channel;
use crate::protocols::authorized::{self, Credentials, Mode};
use crate::protocols::spec::Takes;
use crate::protocols::{
    Call, Context, MAX_SET_SIZE, Observed, Outcome, PhaseObserver, Protocol, Report, Reveal, Role, reveal,
};
use crate::wire::msg::send_abort;
use std::borrow::Cow;

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
pub fn run<I: Item>(ch: &mut impl Channel, job: &Job, role: Role, input: Input<'_, I>) -> Result<(Outcome, Report)> {
    run_observed(ch, job, role, input, None)
}

/// [`run`], telling `observer` of each phase as it starts and of each chunk of a long
/// transfer (a frontend shows progress with it).
pub fn run_observed<I: Item>(
    ch: &mut impl Channel,
    job: &Job,
    role: Role,
    input: Input<'_, I>,
    observer: Option<PhaseObserver>,
) -> Result<(Outcome, Report)> {
    job.validate(role)?;
    let expected = job.protocol.spec().takes(job.operation, role);
    if input.kind() != expected {
        return Err(Error::usage(
            "input",
            format!(
                "{} {} {role}: takes {}, not {}",
                job.protocol,
                job.operation,
                expected.name(),
                input.kind().name()
            ),
        ));
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
pub fn run_in_context<I: Item>(
    ch: &mut impl Channel,
    job: &Job,
    ctx: &Context,
    input: Input<'_, I>,
    report: &mut Report,
) -> Result<Outcome> {
    job.validate(ctx.role)?;
    let expected = job.protocol.spec().takes(job.operation, ctx.role);
    if job.protocol == Protocol::Auto {
        return Err(Error::usage("protocol", "a run in a settled context names its protocol, not auto"));
    }
    if input.kind() != expected || !matches!(expected, Takes::Items | Takes::Values) {
        return Err(Error::usage(
            "input",
            format!(
                "{} {} {}: a run in a settled context takes items (or items and values)",
                job.protocol, job.operation, ctx.role
            ),
        ));
    }
    if let Some(items) = input.items() {
        check_distinct(items)?;
    }
    dispatch(ch, job, ctx, input, None, report)
}

/// The one dispatch: the job's protocol runs the role ([`Spec::roles`](crate::protocols::Spec)),
/// its items handed over as byte slices.
fn dispatch<I: Item>(
    ch: &mut impl Channel,
    job: &Job,
    ctx: &Context,
    input: Input<'_, I>,
    usable: Option<&[(usize, crate::crypto::bls12_381::G1Affine)]>,
    report: &mut Report,
) -> Result<Outcome> {
    let slices = input.items().map_or(Cow::Borrowed(&[][..]), I::slices);
    let input = match input {
        Input::Items(_) => Input::Items(&slices),
        Input::Values { values, bound, .. } => Input::Values { items: &slices, values, bound },
        Input::Credentials { credentials, .. } => Input::Credentials { items: &slices, credentials },
        Input::Database(db) => Input::Database(db),
        Input::Judge { key, policy, config } => Input::Judge { key, policy, config },
    };
    let call = Call {
        protocol: job.protocol,
        operation: job.operation,
        security: job.security,
        sum_to: job.sum_to,
        params: &job.params,
        ctx,
        input,
        usable,
    };
    (job.protocol.spec().roles)(ch, call, report)
}

/// An item type a run takes: bytes, owned or borrowed (byte slices, vectors, boxes,
/// `Arc`s, `Cow`s, strings, arrays). The protocols see every item as a byte slice;
/// [`Item::slices`] lends them so, borrowing a list of slices as it is (what the CLI and
/// Python pass) and listing any other kind's (16 bytes an item). Another type of bytes
/// passes its items as slices: `items.iter().map(AsRef::as_ref).collect::<Vec<&[u8]>>()`.
pub trait Item: AsRef<[u8]> + Sync {
    /// The items as byte slices.
    fn slices(items: &[Self]) -> Cow<'_, [&[u8]]>
    where
        Self: Sized,
    {
        Cow::Owned(items.iter().map(AsRef::as_ref).collect())
    }
}

impl Item for &[u8] {
    fn slices<'a>(items: &'a [&[u8]]) -> Cow<'a, [&'a [u8]]> {
        Cow::Borrowed(items)
    }
}
impl Item for Vec<u8> {}
impl Item for &Vec<u8> {}
impl Item for Box<[u8]> {}
impl Item for &Box<[u8]> {}
impl Item for std::sync::Arc<[u8]> {}
impl Item for Cow<'_, [u8]> {}
impl Item for String {}
impl Item for &String {}
impl Item for &str {}
impl<const N: usize> Item for [u8; N] {}
impl<const N: usize> Item for &[u8; N] {}

/// The client's credentials must be for the job's mode, client and judge.
fn check_credentials(c: &Credentials, mode: Mode, job: &AuthorizedJob) -> Result<()> {
    if c.mode != mode {
        return Err(Error::usage(
            "credentials",
            format!("the credentials are for {}, not {}", c.mode.protocol(), mode.protocol()),
        ));
    }
    if c.client_id != job.client_id || Some(c.judge_pk) != job.judge_key {
        return Err(Error::usage(
            "credentials",
            "the credentials are for another client identity or judge than the job",
        ));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_of_slices_is_lent_as_it_is_and_other_items_are_listed() {
        let owned = vec![b"ann".to_vec(), b"bob".to_vec()];
        let slices: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
        assert!(matches!(Item::slices(&slices), Cow::Borrowed(s) if std::ptr::eq(s, slices.as_slice())));
        let listed = Item::slices(&owned);
        assert!(matches!(listed, Cow::Owned(_)));
        assert_eq!(listed.as_ref(), slices.as_slice());
        assert_eq!(Item::slices(&[[1u8, 2], [3, 4]]).as_ref(), [&[1u8, 2][..], &[3, 4][..]]);
    }
}
