//! `setwise sender` and `setwise receiver`.

use crate::Failure;
use crate::output::{OutputArgs, write_outcome};
use crate::progress::spinner;
use clap::{ArgGroup, Args};
use setwise::io::{Format, ItemSet};
use setwise::net::{DEFAULT_MAX_FRAME, NetError, TcpChannel, TcpConfig};
use setwise::protocols::authorized;
use setwise::protocols::mqrpmt::{self, LastMove, Values};
use setwise::protocols::unbalanced::{self, SenderDb};
use setwise::session::{self, human_bytes};
use setwise::{Job, Operation, Outcome, Protocol, Report, Role};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Where the items come from.
#[derive(Args)]
pub struct InputArgs {
    /// Input file: CSV (with a header unless --no-header) or, for .txt, one item per line.
    #[arg(long)]
    input: Option<PathBuf>,
    /// Key columns: header names, or 1-based indices with --no-header; several are
    /// joined. Default: the first column.
    #[arg(long, value_delimiter = ',')]
    key: Vec<String>,
    /// The CSV input has no header row.
    #[arg(long)]
    no_header: bool,
    /// Input format, overriding the guess from the file name.
    #[arg(long, value_parser = ["csv", "text"])]
    format: Option<String>,
}

/// Options shared by both roles.
#[derive(Args)]
#[command(group(ArgGroup::new("peer").required(true).args(["listen", "connect"])))]
pub struct CommonArgs {
    /// Protocol: ecdh, fhe, unbalanced, authorized, partial, compact or mqrpmt.
    #[arg(long, default_value = "ecdh")]
    protocol: Protocol,
    /// Operation: intersection (the receiver learns the common items); cardinality (ecdh,
    /// mqrpmt: only how many); and with mqrpmt: sum (the sender holds --value; both learn
    /// the cardinality, the sender the sum of its values over the intersection), shares
    /// (both write XOR shares of the intersection), union (the receiver learns X ∪ Y),
    /// private-id (both get an ID per row and the IDs of the union).
    #[arg(long = "op", default_value = "intersection")]
    operation: Operation,
    /// mqrpmt: how the sender returns the receiver's keyed items: bloom (a Bloom filter,
    /// 58 bits per item, false positives 2^-40) or shuffle (32 bytes per item). Both
    /// sides must agree; private-id tests membership exactly either way.
    #[arg(long, default_value = "bloom")]
    last_move: LastMove,
    /// Address to listen on for the peer (e.g. 0.0.0.0:7700).
    #[arg(long)]
    listen: Option<String>,
    /// Address of the listening peer; retried until --connect-timeout.
    #[arg(long)]
    connect: Option<String>,
    /// Seconds to keep retrying --connect.
    #[arg(long, default_value_t = 30)]
    connect_timeout: u64,
    /// Seconds to wait for the peer on any read or write.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    /// Largest frame accepted from the peer, in bytes.
    #[arg(long, default_value_t = DEFAULT_MAX_FRAME)]
    max_frame: usize,
    /// Write the run report as JSON to this file.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Also print each phase's time and traffic.
    #[arg(long, short)]
    verbose: bool,
}

/// `setwise sender`.
#[derive(Args)]
pub struct SenderArgs {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    input: InputArgs,
    #[command(flatten)]
    out: OutputArgs,
    /// mqrpmt sum: the column holding each row's value (a non-negative integer; rows with
    /// the same key add up). The sender is the value holder and learns the sum.
    #[arg(long)]
    value: Option<String>,
    /// mqrpmt sum: the declared bound of any item's value; it fixes the sum's modulus so
    /// the sum cannot wrap (the receiver learns the modulus' width in bytes).
    #[arg(long, default_value_t = u32::MAX as u64)]
    value_bound: u64,
    /// The database built by `setwise db build` (protocol unbalanced; replaces --input).
    #[arg(long)]
    db: Option<PathBuf>,
    /// Unbalanced: sessions to serve before exiting (0: until stopped), concurrently,
    /// each on its own thread with the database shared read-only.
    #[arg(long, default_value_t = 1)]
    sessions: usize,
    /// Unbalanced: keep only the coefficients in memory and encode per query ((L+1)·2 =
    /// 8× less memory at L = 3 moduli, slower queries; `db info` gives both figures).
    #[arg(long)]
    compact: bool,
    /// Authorized/partial: the judge's public key file (hex, from `setwise judge`).
    #[arg(long)]
    judge_key: Option<PathBuf>,
    /// Authorized/partial: the identity of the client the judge authorised.
    #[arg(long)]
    client_id: Option<String>,
}

/// `setwise receiver`.
#[derive(Args)]
pub struct ReceiverArgs {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    input: InputArgs,
    /// Unbalanced: refuse to run unless the sender's parameters have this fingerprint.
    #[arg(long)]
    params_fingerprint: Option<String>,
    /// Authorized/partial: the credentials file from `setwise authorize`.
    #[arg(long)]
    credentials: Option<PathBuf>,
    #[command(flatten)]
    out: OutputArgs,
}

/// Reads the items named by `a`.
pub fn read_items(a: &InputArgs) -> Result<ItemSet, Failure> {
    let path = a.input.as_ref().ok_or_else(|| Failure::usage(anyhow::anyhow!("--input FILE is required")))?;
    let format = match a.format.as_deref() {
        Some("text") => Format::Text,
        Some(_) => Format::Csv { header: !a.no_header },
        None => Format::guess(path, a.no_header),
    };
    let set = ItemSet::read(path, format, &a.key)?;
    let s = set.stats();
    if s.empty_keys > 0 || s.duplicate_rows > 0 {
        eprintln!(
            "{}: {} rows, {} distinct items ({} rows with an empty key skipped, {} rows repeat an earlier key)",
            path.display(),
            s.rows,
            set.items().len(),
            s.empty_keys,
            s.duplicate_rows
        );
    }
    Ok(set)
}

pub fn config(a: &CommonArgs) -> TcpConfig {
    TcpConfig {
        max_frame: a.max_frame,
        io_timeout: Some(Duration::from_secs(a.timeout)),
        connect_timeout: Duration::from_secs(a.connect_timeout),
    }
}

fn net(e: NetError) -> Failure {
    Failure::from(setwise::Error::Net { phase: "connecting", source: e })
}

fn connect(a: &CommonArgs) -> Result<TcpChannel, Failure> {
    match (&a.listen, &a.connect) {
        (Some(addr), _) => {
            eprintln!("listening on {addr}");
            TcpChannel::listen(addr, config(a)).map_err(net)
        }
        (_, Some(addr)) => TcpChannel::connect(addr, config(a)).map_err(net),
        _ => Err(Failure::usage(anyhow::anyhow!("give --listen or --connect"))),
    }
}

/// Runs one role over a fresh connection with a spinner, prints and saves the report.
fn with_connection(
    a: &CommonArgs,
    role: Role,
    run: impl FnOnce(&mut TcpChannel, Option<session::PhaseObserver>) -> setwise::Result<(Outcome, Report)>,
) -> Result<(Outcome, Report), Failure> {
    let mut ch = connect(a)?;
    let (bar, observer) = spinner(&role.to_string());
    let result = run(&mut ch, observer);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let (outcome, report) = result?;
    finish_report(a, &report)?;
    Ok((outcome, report))
}

fn finish_report(a: &CommonArgs, report: &Report) -> Result<(), Failure> {
    if a.verbose {
        eprint!("{report}");
    }
    if let Some(path) = &a.report {
        std::fs::write(path, report.to_json())
            .map_err(|e| Failure::usage(anyhow::anyhow!("{}: {e}", path.display())))?;
    }
    Ok(())
}

fn summary(role: Role, report: &Report, what: &str) {
    eprintln!(
        "{role}: {what} — {:.2} s, sent {}, received {} ({} items, peer {})",
        report.total_ms / 1e3,
        human_bytes(report.traffic.bytes_sent),
        human_bytes(report.traffic.bytes_received),
        report.own_set_size,
        report.peer_set_size
    );
}

/// Runs `setwise sender`.
pub fn run_sender(a: SenderArgs) -> Result<(), Failure> {
    let c = &a.common;
    if c.protocol == Protocol::Unbalanced {
        let path = a.db.as_ref().ok_or_else(|| {
            Failure::usage(anyhow::anyhow!("the unbalanced sender serves --db FILE (see `setwise db build`)"))
        })?;
        let db = if a.compact { SenderDb::load_compact(path) } else { SenderDb::load(path) }.map_err(Failure::usage)?;
        return serve(c, Arc::new(db), a.sessions);
    }
    if a.db.is_some() {
        return Err(Failure::usage(anyhow::anyhow!("--db is for --protocol unbalanced; give --input")));
    }
    let set = read_items(&a.input)?;
    if let Some(mode) = crate::judge::mode_of(c.protocol) {
        let (pk, id) = crate::judge::server_identity(a.judge_key.as_deref(), a.client_id.as_deref())?;
        let params = authorized::intersect_params(id.as_bytes(), &pk);
        let (_, report) = with_connection(c, Role::Sender, |ch, obs| {
            session::run_named(
                ch,
                (mode.protocol_name(), "intersection"),
                params,
                Role::Sender,
                set.items().len(),
                obs,
                |ch, s, r| {
                    authorized::sender(ch, s, mode, &pk, id.as_bytes(), set.items(), r).map(|()| Outcome::Nothing)
                },
            )
        })?;
        summary(Role::Sender, &report, "done, learned nothing");
        return Ok(());
    }
    let job = Job { key_columns: set.key_columns(), last_move: c.last_move, ..Job::new(c.protocol, c.operation) };
    job.validate()?;
    let values = sum_values(&a, &set, &job)?;
    let (outcome, report) = with_connection(c, Role::Sender, |ch, obs| {
        if c.protocol == Protocol::Mqrpmt {
            let v = values.as_deref().map(|values| Values { values, bound: a.value_bound });
            session::run_with(ch, &job, Role::Sender, set.items().len(), obs, |ch, s, r| {
                mqrpmt::sender(ch, s, job.operation, set.items(), v, job.last_move, r)
            })
        } else {
            session::run(ch, &job, Role::Sender, set.items(), obs)
        }
    })?;
    let what = write_outcome(&set, outcome, &a.out, Role::Sender)?;
    summary(Role::Sender, &report, &what);
    Ok(())
}

/// The sender's values for `sum` (per item, rows with one key added), checked against
/// the bound; `None` for other operations.
fn sum_values(a: &SenderArgs, set: &ItemSet, job: &Job) -> Result<Option<Vec<u64>>, Failure> {
    match (job.operation, &a.value) {
        (Operation::Sum, Some(col)) => {
            let sums = set.column_sums(col)?;
            let values = sums
                .iter()
                .enumerate()
                .map(|(i, &v)| {
                    u64::try_from(v).ok().filter(|&v| v <= a.value_bound).ok_or_else(|| {
                        Failure::usage(anyhow::anyhow!(
                            "item {} has the value {v}, above --value-bound {}",
                            String::from_utf8_lossy(&set.items()[i]),
                            a.value_bound
                        ))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Some(values))
        }
        (Operation::Sum, None) => {
            Err(Failure::usage(anyhow::anyhow!("--op sum: the sender holds the values; give --value COLUMN")))
        }
        (_, Some(_)) => Err(Failure::usage(anyhow::anyhow!("--value is for --protocol mqrpmt --op sum"))),
        (_, None) => Ok(None),
    }
}

/// One unbalanced session over `ch`.
fn serve_one(
    ch: &mut TcpChannel,
    db: &SenderDb,
    observer: Option<session::PhaseObserver>,
) -> setwise::Result<(Outcome, Report)> {
    let job = Job::new(Protocol::Unbalanced, Operation::Intersection);
    session::run_with(ch, &job, Role::Sender, db.info().sender_size, observer, |ch, s, r| {
        unbalanced::sender(ch, s, db, r).map(|()| Outcome::Nothing)
    })
}

/// Serves `sessions` receivers (0: forever), each on its own thread; a failing session
/// is logged and the others go on. With one session, its failure is the exit status.
fn serve(c: &CommonArgs, db: Arc<SenderDb>, sessions: usize) -> Result<(), Failure> {
    eprintln!("database: {} items, parameters {} ({})", db.info().sender_size, db.info().preset, db.info().fingerprint);
    if sessions == 1 || c.listen.is_none() {
        let (_, report) = with_connection(c, Role::Sender, |ch, obs| serve_one(ch, &db, obs))?;
        summary(Role::Sender, &report, "answered one query");
        return Ok(());
    }
    let addr = c.listen.as_deref().expect("checked above");
    serve_many(addr, config(c), sessions, |ch| {
        serve_one(ch, &db, None).map(|(_, r)| {
            format!(
                "answered {} items in {:.2} s, sent {}, received {}",
                r.peer_set_size,
                r.total_ms / 1e3,
                human_bytes(r.traffic.bytes_sent),
                human_bytes(r.traffic.bytes_received)
            )
        })
    })
}

/// Accepts `sessions` connections on `addr` (0: forever) and runs `handle` on each in
/// its own thread, logging each session's summary or error; one bad peer never stops
/// the others.
pub fn serve_many(
    addr: &str,
    config: TcpConfig,
    sessions: usize,
    handle: impl Fn(&mut TcpChannel) -> setwise::Result<String> + Sync,
) -> Result<(), Failure> {
    let listener = TcpListener::bind(addr).map_err(|e| net(e.into()))?;
    let what = if sessions == 0 { "any number of sessions".to_string() } else { format!("{sessions} sessions") };
    eprintln!("listening on {addr} for {what}");
    let handle = &handle;
    std::thread::scope(|s| {
        let mut served = 0usize;
        while sessions == 0 || served < sessions {
            let stream = match listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) => {
                    eprintln!("accept failed: {e}");
                    continue;
                }
            };
            served += 1;
            let n = served;
            s.spawn(move || {
                let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
                let result = TcpChannel::from_stream(stream, config)
                    .map_err(|e| setwise::Error::Net { phase: "accepting", source: e })
                    .and_then(|mut ch| handle(&mut ch));
                match result {
                    Ok(line) => eprintln!("session {n} ({peer}): {line}"),
                    Err(e) => eprintln!("session {n} ({peer}): error: {e}"),
                }
            });
        }
    });
    Ok(())
}

/// Runs `setwise receiver`.
pub fn run_receiver(a: ReceiverArgs) -> Result<(), Failure> {
    let c = &a.common;
    let set = read_items(&a.input)?;
    let job = Job { key_columns: set.key_columns(), last_move: c.last_move, ..Job::new(c.protocol, c.operation) };
    job.validate()?;
    let fp = a.params_fingerprint.as_deref();
    let creds = match crate::judge::mode_of(c.protocol) {
        Some(mode) => Some(crate::judge::load_credentials(a.credentials.as_deref(), mode)?),
        None => None,
    };
    let usable = creds.as_ref().map(|cr| authorized::intersect::usable(cr, set.items()));
    if let Some(u) = &usable
        && u.len() < set.items().len()
    {
        eprintln!("{} of {} items have credentials; only those take part", u.len(), set.items().len());
    }
    let (outcome, report) = with_connection(c, Role::Receiver, |ch, obs| {
        if let (Some(cr), Some(u)) = (&creds, &usable) {
            let params = authorized::intersect_params(&cr.client_id, &cr.judge_pk);
            session::run_named(
                ch,
                (cr.mode.protocol_name(), "intersection"),
                params,
                Role::Receiver,
                u.len(),
                obs,
                |ch, s, r| authorized::receiver(ch, s, cr, u, r),
            )
        } else if c.protocol == Protocol::Unbalanced {
            session::run_with(ch, &job, Role::Receiver, set.items().len(), obs, |ch, s, r| {
                unbalanced::receiver(ch, s, set.items(), fp, r)
            })
        } else {
            session::run(ch, &job, Role::Receiver, set.items(), obs)
        }
    })?;
    let what = write_outcome(&set, outcome, &a.out, Role::Receiver)?;
    summary(Role::Receiver, &report, &what);
    Ok(())
}
