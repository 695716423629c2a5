//! `setwise stage run | next | status | keygen`: a staged run from files, through an
//! exchange shared with the peer instead of a connection: a directory (any mounted
//! storage) or a prefix in an S3-compatible bucket (`s3://bucket/prefix`).
//! Each invocation works out from the markers which stage comes next, so a run that
//! stopped resumes where it stopped. What each party writes there is authenticated under
//! the exchange key both operators hold (`--exchange-key`, made by `keygen`);
//! docs/scale-out.md explains the set-up and the trust model.

use crate::Failure;
use crate::args::{InputArgs, parse_size, protocol_help};
use crate::input::{read_items, sum_values};
use crate::output::{OutputArgs, write_outcome};
use clap::{Args, Subcommand};
use setwise::protocols::spec::Takes;
use setwise::session::Input;
use setwise::staged::auth::HOW_TO_MAKE;
use setwise::staged::runner;
use setwise::staged::store::Exchange;
use setwise::staged::{BucketKey, Buckets, ExchangeKey, Location, Runner, Settings, Step};
use setwise::{Operation, Protocol, Role, SumTo};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Exit code of `stage next` when the peer's messages for the next stage are not there
/// yet (EX_TEMPFAIL: call it again later).
pub const EXIT_NOT_READY: u8 = 75;

/// `setwise stage`.
#[derive(Subcommand)]
pub enum StageCommand {
    /// Run this party's remaining stages, waiting for the peer's messages between them.
    Run(StageArgs),
    /// Run this party's next stage if the peer's messages it needs are there, and exit
    /// (exit 75 when they are not, unless --wait-timeout lets it wait).
    Next(StageArgs),
    /// Print where the run stands: each stage's markers, and who stopped the run if one did.
    Status(StatusArgs),
    /// Make a new exchange key (32 random bytes as 64 hexadecimal digits, mode 0600) for
    /// the two operators of a run to share; also fits --bucket-key-file.
    Keygen(KeygenArgs),
}

/// What `--protocol auto`, the default, does in a staged run, from the rule itself and
/// the registry.
fn staged_auto_help() -> String {
    use setwise::protocols::registry::{ALL, AUTO};
    let picks: Vec<String> = AUTO
        .staged
        .iter()
        .filter_map(|&op| setwise::session::auto::choose_staged(op, 1, 1).ok().map(|c| format!("{op}: {}", c.protocol)))
        .collect();
    let follows: Vec<&str> = ALL
        .iter()
        .filter(|s| !s.own_stages && !s.staged.is_empty() && !std::ptr::eq(**s, &AUTO))
        .map(|s| s.name)
        .collect();
    format!(
        "the default: {}, picked once the peer's hello is in (mqrpmt's test from both set sizes); against a peer \
         that names {}, that one; docs/scale-out.md",
        picks.join(", "),
        follows.join(", ")
    )
}

/// What `stage run` and `stage next` take.
#[derive(Args)]
pub struct StageArgs {
    /// This party's role: receiver (learns the result) or sender.
    #[arg(long, value_parser = ["receiver", "sender"])]
    role: String,
    // The help lists the protocols the registry stages, with their staged operations
    // (docs/scale-out.md).
    #[arg(long, default_value = setwise::protocols::registry::STAGED_DEFAULT.name, help = protocol_help(|s| s.staged, &staged_auto_help()))]
    protocol: Protocol,
    /// Operation, as the protocol allows it staged.
    #[arg(long = "op", default_value = "intersection")]
    operation: Operation,
    #[command(flatten)]
    input: InputArgs,
    /// sum, sender: the column holding each row's value (rows with the same key add up);
    /// the sender learns the sum of its values over the intersection (or, with
    /// `--sum-to receiver`, the receiver does).
    #[arg(long)]
    value: Option<String>,
    /// sum, sender: the declared bound of any item's value (it fixes each bucket's sum
    /// modulus).
    #[arg(long, default_value_t = u32::MAX as u64)]
    value_bound: u64,
    /// sum: who learns the sum, sender (the value holder; the receiver learns the
    /// cardinality) or receiver (it adds up every bucket's count and sum; the sender
    /// learns nothing). Both sides must agree.
    #[arg(long, default_value = "sender")]
    sum_to: SumTo,
    /// The exchange both parties read and write (one per run): a directory, or
    /// `s3://bucket/prefix` in an S3-compatible store, reached with the AWS variables
    /// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT_URL`,
    /// `AWS_ALLOW_HTTP=true` for a server on plain HTTP).
    #[arg(long, value_parser = parse_location)]
    exchange: Location,
    /// This party's own working directory for the run (seed, journal, result); keep it
    /// private.
    #[arg(long)]
    workdir: PathBuf,
    /// The run id both operators agreed (default: the exchange directory's name, or the
    /// last segment of its S3 prefix).
    #[arg(long)]
    run_id: Option<String>,
    /// Number of buckets: auto (from both set sizes, about 2^20 items a bucket) or a
    /// number; both parties must ask for the same.
    #[arg(long, default_value = "auto")]
    buckets: Buckets,
    /// A file with a 32-byte bucket key in hex that both operators hold (default: a key
    /// derived from the run's session).
    #[arg(long)]
    bucket_key_file: Option<PathBuf>,
    /// The exchange key file both operators hold (64 hexadecimal digits or 32 raw bytes;
    /// `setwise stage keygen FILE` makes one): every marker and abort note this party
    /// writes is authenticated under it, and the peer's are checked.
    #[arg(long, value_name = "FILE")]
    exchange_key: Option<PathBuf>,
    #[command(flatten)]
    out: OutputArgs,
    /// Seconds to wait for the peer's messages before giving up (default: 86400 for
    /// `run`, 0 for `next`).
    #[arg(long)]
    wait_timeout: Option<u64>,
    /// `run` of the replayed protocols (auto's picks included): the most memory the buckets' roles kept alive
    /// between stages may hold together (bytes, or with a unit: 512MiB, 12GiB, 12g, 12GB);
    /// the buckets beyond replay their rounds at each stage instead, slower. Default: the
    /// memory available less an eighth (two parties on one machine: give each its share).
    #[arg(long, value_parser = parse_size)]
    memory: Option<usize>,
}

/// What `stage status` takes.
#[derive(Args)]
pub struct StatusArgs {
    /// The exchange of the run: a directory or `s3://bucket/prefix`.
    #[arg(long, value_parser = parse_location)]
    exchange: Location,
    /// The exchange key file: with it, each marker and abort note is checked; without
    /// it, what they say is shown marked as not authenticated.
    #[arg(long, value_name = "FILE")]
    exchange_key: Option<PathBuf>,
    /// The run id (default: the exchange's last segment); needed to check the markers.
    #[arg(long)]
    run_id: Option<String>,
}

/// What `stage keygen` takes.
#[derive(Args)]
pub struct KeygenArgs {
    /// The new key file (refused if it exists).
    file: PathBuf,
}

/// Runs `setwise stage …`.
pub fn run_stage(c: StageCommand) -> Result<(), Failure> {
    match c {
        StageCommand::Status(a) => {
            let e = match &a.exchange_key {
                Some(k) => Exchange::new(&a.exchange, ExchangeKey::read_file(k)?, &run_id(&a.run_id, &a.exchange)?),
                None => Exchange::unauthenticated(&a.exchange),
            };
            runner::status(&e)?.iter().for_each(|l| println!("{l}"));
            Ok(())
        }
        StageCommand::Keygen(a) => {
            let key = ExchangeKey::generate();
            key.write_new(&a.file)?;
            eprintln!(
                "wrote a new key to {} (fingerprint {}): give the same file to the other operator over a channel \
                 you trust, keep it private, and compare the fingerprint on a call",
                a.file.display(),
                key.fingerprint()
            );
            Ok(())
        }
        StageCommand::Run(a) => drive(a, true),
        StageCommand::Next(a) => drive(a, false),
    }
}

fn usage(msg: String) -> Failure {
    Failure::usage(anyhow::anyhow!("{msg}"))
}

/// `--exchange`: a directory or an S3 prefix.
fn parse_location(s: &str) -> Result<Location, String> {
    Location::parse(s).map_err(|e| e.to_string())
}

/// The run id given, or the exchange's last segment (the directory's name).
fn run_id(given: &Option<String>, exchange: &Location) -> Result<String, Failure> {
    match given {
        Some(r) => Ok(r.clone()),
        None => exchange
            .last_segment()
            .ok_or_else(|| usage(format!("--run-id ID is needed ({exchange} has no last segment to take it from)"))),
    }
}

/// The exchange key, which a staged run cannot go without.
fn exchange_key(a: &StageArgs) -> Result<ExchangeKey, Failure> {
    match &a.exchange_key {
        Some(p) => Ok(ExchangeKey::read_file(p)?),
        None => Err(usage(format!(
            "--exchange-key FILE is needed: the key both operators hold, under which each party's markers are \
             authenticated (without it anyone who can write the exchange could forge them); {HOW_TO_MAKE}"
        ))),
    }
}

fn settings(a: &StageArgs, key_columns: usize) -> Result<Settings, Failure> {
    let run_id = run_id(&a.run_id, &a.exchange)?;
    let bucket_key = match &a.bucket_key_file {
        Some(p) => Some(BucketKey::from_hex(&read_small(p)?)?),
        None => None,
    };
    let s = Settings {
        key_columns,
        buckets: a.buckets,
        bucket_key,
        sum_to: a.sum_to,
        ..Settings::new(&run_id, a.protocol, a.operation)
    };
    s.validate()?;
    Ok(s)
}

fn read_small(p: &Path) -> Result<String, Failure> {
    std::fs::read_to_string(p).map_err(|e| usage(format!("{}: {e}", p.display())))
}

/// `run` (all stages, waiting between them) or `next` (one stage).
fn drive(a: StageArgs, all: bool) -> Result<(), Failure> {
    let role = if a.role == "receiver" { Role::Receiver } else { Role::Sender };
    let learns = role == Role::Receiver || a.operation.sender_learns(a.sum_to);
    if !all && a.memory.is_some() {
        return Err(usage("--memory is for `stage run`: `stage next` keeps no role alive between stages".into()));
    }
    if !learns && a.out.any() {
        return Err(usage(format!("the sender of {} learns nothing: --output is for the receiver", a.operation)));
    }
    let rows = matches!(a.operation, Operation::Intersection | Operation::Union | Operation::PrivateId);
    if learns && rows && !a.out.any() {
        return Err(usage(format!(
            "the {role}'s finish writes the {} rows once: give --output FILE (or --stdout) on every call",
            a.operation
        )));
    }
    let key = exchange_key(&a)?;
    let set = read_items(&a.input)?;
    a.out.check(&set, a.operation)?;
    let settings = settings(&a, set.key_columns())?;
    let run_id = settings.run_id.clone();
    let items = set.items();
    let takes_values = a.protocol.spec().takes(a.operation, role) == Takes::Values;
    let values = match (&a.value, takes_values) {
        (Some(col), true) => sum_values(&set, col, a.value_bound)?,
        (None, true) => {
            return Err(usage(format!("the {role} of {} holds the values: give --value COLUMN", a.operation)));
        }
        (Some(_), false) => {
            return Err(usage(format!("--value is for the value holder of sum, not the {role} of {}", a.operation)));
        }
        (None, false) => Vec::new(),
    };
    let input = match takes_values {
        true => Input::Values { items: &items, values: &values, bound: a.value_bound },
        false => Input::Items(&items),
    };
    let mut r = Runner::open_input(settings, role, &a.exchange, &a.workdir, input, key)?;
    if all {
        // One process runs every stage: the roles that fit the budget go on without replay.
        r.keep_roles_alive();
        let available = setwise::io::memory::available_memory().map(|m| m - m / 8);
        if let Some(bytes) = a.memory.or(available) {
            r.limit_live_roles(bytes as u64);
        }
    }
    let timeout = Duration::from_secs(a.wait_timeout.unwrap_or(if all { 86_400 } else { 0 }));
    let mut summary = None;
    let mut deliver = |o: &setwise::Outcome| {
        let line = write_outcome(&set, o.clone(), &a.out, role)
            .map_err(|f| setwise::Error::usage("output", format!("{:#}", f.error)))?;
        summary = Some(line);
        Ok(())
    };
    let started = Instant::now();
    let mut waited_since: Option<Instant> = None;
    let mut told = Instant::now();
    // Short first pauses: a replayed run has a dozen stages, each waiting for the peer's
    // last; a peer late by hours costs one look at two files a second.
    let mut pause = Duration::from_millis(20);
    loop {
        let t = Instant::now();
        match r.step(&mut deliver)? {
            Step::Ran(s) => {
                eprintln!(
                    "setwise {run_id}: {role} stage {s} ({}) done in {:.1} s",
                    r.stage_label(s),
                    t.elapsed().as_secs_f64()
                );
                if s == 1 {
                    // Only said: a failure here is the next stage's to report.
                    if let Ok(Some((protocol, why))) = r.protocol_agreed() {
                        eprintln!("setwise {run_id}: auto runs {protocol} in every bucket: {why}");
                    }
                }
                waited_since = None;
                pause = Duration::from_millis(20);
                if !all {
                    break;
                }
            }
            Step::Finished => {
                if summary.is_none() {
                    report_finished(&r, role, &run_id)?;
                }
                break;
            }
            Step::Waiting { stage, marker } => {
                let since = *waited_since.get_or_insert_with(|| {
                    eprintln!("setwise {run_id}: {role} stage {stage} ({}) waits for {marker}", r.stage_label(stage));
                    told = Instant::now();
                    Instant::now()
                });
                if since.elapsed() >= timeout {
                    if timeout.is_zero() {
                        return Err(Failure {
                            code: EXIT_NOT_READY,
                            error: anyhow::anyhow!(
                                "stage {stage} ({}) is not ready: waiting for {marker}; run again later",
                                r.stage_label(stage)
                            ),
                        });
                    }
                    return Err(Failure {
                        code: crate::EXIT_PEER,
                        error: anyhow::anyhow!(
                            "stage {stage} ({}): gave up after {} s waiting for {marker} (the run resumes with the same command)",
                            r.stage_label(stage),
                            timeout.as_secs()
                        ),
                    });
                }
                if told.elapsed() >= Duration::from_secs(60) {
                    eprintln!(
                        "setwise {run_id}: still waiting for {marker}, {} min of {} min",
                        since.elapsed().as_secs() / 60,
                        timeout.as_secs() / 60
                    );
                    told = Instant::now();
                }
                std::thread::sleep(pause.min(timeout.saturating_sub(since.elapsed())).max(Duration::from_millis(10)));
                pause = (pause * 2).min(Duration::from_secs(1));
            }
        }
    }
    if let Some(line) = summary {
        eprintln!("setwise {run_id}: {line} (all stages in {:.1} s)", started.elapsed().as_secs_f64());
    }
    Ok(())
}

/// Tells about a run whose stages were all done before this invocation.
fn report_finished<I: setwise::Item>(r: &Runner<'_, I>, role: Role, run_id: &str) -> Result<(), Failure> {
    match r.result()? {
        Some(res) => {
            // What the finish printed: the count, or the sum's holder its count and sum.
            let counted = [Operation::Cardinality.name(), Operation::Sum.name()].contains(&res.operation.as_str());
            match &res.sum {
                Some(sum) => println!("{}", serde_json::json!({ "cardinality": res.size, "sum": sum })),
                None if counted => println!("{}", res.size),
                None => {}
            }
            eprintln!("setwise {run_id}: the run is finished ({} {}); nothing to do", res.operation, res.size);
        }
        None => eprintln!("setwise {run_id}: all of the {role}'s stages are done; nothing to do"),
    }
    Ok(())
}
