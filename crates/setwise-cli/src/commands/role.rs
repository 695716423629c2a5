//! `setwise sender` and `setwise receiver`.

use crate::Failure;
use crate::args::{PartyArgs, ServeArgs, parse_size};
use crate::input::{read_items, sum_values};
use crate::log::observer;
use crate::net::{connect, serve_many};
use crate::output::{OutputArgs, outcome_without_rows, write_outcome};
use crate::report::{run_role, summary};
use clap::Args;
use setwise::io::{ItemKeys, ItemSet};
use setwise::protocols::authorized::{self, Credentials, public_key_hex, read_public_key};
use setwise::protocols::spec::Takes;
use setwise::protocols::unbalanced::SenderDb;
use setwise::protocols::unbalanced::db::Open;
use setwise::protocols::{Named, human_bytes};
use setwise::session::{Input, Job, run_observed};
use setwise::{Operation, Role};
use std::path::PathBuf;

/// `setwise sender`.
#[derive(Args)]
pub struct SenderArgs {
    #[command(flatten)]
    party: PartyArgs,
    #[command(flatten)]
    out: OutputArgs,
    /// mqrpmt sum: the column holding each row's value (a non-negative integer; rows with
    /// the same key add up). The sender is the value holder and learns the sum (unless
    /// --sum-to receiver gives it to the receiver).
    #[arg(long)]
    value: Option<String>,
    /// mqrpmt sum: the declared bound of any item's value; it fixes the sum's modulus so
    /// the sum cannot wrap (the receiver learns the modulus' width in bytes).
    #[arg(long, default_value_t = u32::MAX as u64)]
    value_bound: u64,
    /// The database built by `setwise db build` (protocol unbalanced; replaces --input).
    #[arg(long)]
    db: Option<PathBuf>,
    /// With --listen: sessions to serve before exiting (0: until stopped), concurrently,
    /// each on its own thread with the input (or database) shared read-only; a failed
    /// session is logged and does not count. 1: one session, whose failure is the exit
    /// status.
    #[arg(long, default_value_t = 1)]
    sessions: usize,
    #[command(flatten)]
    serve: ServeArgs,
    /// Unbalanced: the key file of a database that keeps its OPRF key apart.
    #[arg(long)]
    key_file: Option<PathBuf>,
    /// Unbalanced: keep only the coefficients in memory and encode per query (L·2 = 4×
    /// less memory at L = 2 moduli, slower queries; `db info` gives both figures).
    #[arg(long)]
    compact: bool,
    /// Unbalanced: hold at most this much of the encoded plaintexts in memory (bytes, or
    /// with a unit: 512MiB, 4GiB, 4G, 4GB), and never more than the default; the rest is
    /// read per query from an encoded copy on disk, written beside the segments by the
    /// first load that needs it (as large as the plaintexts: `db info`). Default: the
    /// memory available less an eighth (or two bundles per thread, if more).
    #[arg(long, value_parser = parse_size, conflicts_with = "compact")]
    memory: Option<usize>,
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
    party: PartyArgs,
    /// Unbalanced: refuse to run unless the sender's parameters have this fingerprint.
    #[arg(long)]
    params_fingerprint: Option<String>,
    /// Authorized/partial: the credentials file from `setwise authorize`.
    #[arg(long)]
    credentials: Option<PathBuf>,
    #[command(flatten)]
    out: OutputArgs,
}

fn usage(msg: &str) -> Failure {
    Failure::usage(anyhow::anyhow!("{msg}"))
}

/// Runs `setwise sender`.
pub fn run_sender(a: SenderArgs) -> Result<(), Failure> {
    if a.party.net.listen.is_none() || a.sessions == 1 {
        a.serve.no_metrics()?; // before any input is read
    }
    if a.party.job.protocol.spec().takes(a.party.job.operation, Role::Sender) == Takes::Database {
        let path = a.db.as_ref().ok_or_else(|| {
            usage(&format!("the {} sender serves --db DIR (see `setwise db build`)", a.party.job.protocol))
        })?;
        let how = match (a.compact, a.memory) {
            (true, _) => Open::Compact,
            (false, Some(bytes)) => Open::ServeWithin(bytes),
            (false, None) => Open::Serve,
        };
        let db = SenderDb::open(path, how, a.key_file.as_deref())?;
        return serve_database(&a, &db);
    }
    if a.db.is_some() {
        return Err(usage(&format!(
            "--db: the {} sender of {} brings {}; give --input",
            a.party.job.protocol,
            a.party.job.operation,
            a.party.job.protocol.spec().takes(a.party.job.operation, Role::Sender).name()
        )));
    }
    let set = read_items(&a.party.input)?;
    a.out.check(&set, a.party.job.operation)?;
    let judge_key = a.judge_key.as_deref().map(read_public_key).transpose()?;
    let named = Named::none()
        .with("client_id", a.client_id.as_deref())
        .with("judge_key", judge_key.as_ref().map(public_key_hex));
    let job = a.party.job.job(set.key_columns(), named)?;
    job.validate(Role::Sender)?; // before waiting for a peer
    let values = match (job.operation, &a.value) {
        (Operation::Sum, Some(col)) => sum_values(&set, col, a.value_bound)?,
        (Operation::Sum, None) => return Err(usage("--op sum: the sender holds the values; give --value COLUMN")),
        (_, Some(_)) => return Err(usage("--value is for the sender of --op sum (the value holder)")),
        (_, None) => Vec::new(),
    };
    // A sender that writes no rows keeps only its keys through the run: at 2^24 a file's
    // row index and item ranges are 335 MB.
    let rowless =
        !a.out.any() && matches!(job.operation, Operation::Intersection | Operation::Cardinality | Operation::Sum);
    let mut held = if rowless { Held::Keys(set.into_keys()) } else { Held::Set(set) };
    let items = match &mut held {
        Held::Set(set) => set.items(),
        Held::Keys(keys) => keys.take_items(),
    };
    let input = || match job.operation {
        Operation::Sum => Input::Values { items: &items, values: &values, bound: a.value_bound },
        _ => Input::Items(&items),
    };
    if let (Some(addr), n) = (&a.party.net.listen, a.sessions)
        && n != 1
    {
        if a.out.any() || matches!(job.operation, Operation::Shares | Operation::PrivateId) {
            return Err(usage(
                "a sender serving --sessions other than 1 writes no output files (shares, private-id); use --sessions 1",
            ));
        }
        let config = a.serve.config(a.party.net.config()?, &a.party.net.admission, n);
        let labels =
            [("role", "sender"), ("protocol", &job.protocol.to_string()), ("operation", &job.operation.to_string())];
        let metrics = a.serve.metrics(&labels, None);
        return serve_many(addr, config, a.serve.grace(), metrics, |ch| {
            run_observed(ch, &job, Role::Sender, input(), observer(Role::Sender))
        });
    }
    let mut ch = connect(&a.party.net)?;
    let (outcome, report) = run_role(&mut ch, &job, Role::Sender, input(), &a.party.report)?;
    let what = match &held {
        Held::Set(set) => write_outcome(set, outcome, &a.out, Role::Sender)?,
        Held::Keys(_) => outcome_without_rows(&outcome, &a.out, Role::Sender).ok_or_else(|| {
            Failure::usage(anyhow::anyhow!("this sender's outcome needs the rows it let go of (a setwise bug)"))
        })?,
    };
    summary(&a.party.report, Role::Sender, &report, &what);
    Ok(())
}

/// What the sender holds of its input through the run: the whole set, or only its keys
/// when it writes no rows.
#[allow(clippy::large_enum_variant, reason = "one value, for the length of a run")]
enum Held {
    Set(ItemSet),
    Keys(ItemKeys),
}

/// Serves `--sessions` receivers (0: forever) from `db`, each on its own thread; a
/// failing session is logged and the others go on. With one session, or when
/// connecting, its failure is the exit status.
fn serve_database(a: &SenderArgs, db: &SenderDb) -> Result<(), Failure> {
    let i = db.info();
    eprintln!("database: {} items, parameters {} ({})", i.sender_size, i.preset, i.fingerprint);
    if i.on_disk_bytes > 0 {
        eprintln!(
            "plaintexts: {} in memory, {} read per query from the encoded copy on disk",
            human_bytes((i.plaintext_bytes - i.on_disk_bytes) as u64),
            human_bytes(i.on_disk_bytes as u64)
        );
    }
    if !i.encoded_copy.is_empty() {
        eprintln!("encoded copy: {}", i.encoded_copy);
    }
    // Named so that the database's protocol refuses what it does not take.
    let named = Named::none().with("client_id", a.client_id.as_deref());
    let named = named.with("judge_key", a.judge_key.as_deref().map(|p| p.display().to_string()));
    let job = a.party.job.job(db.key_columns(), named)?;
    job.validate(Role::Sender)?;
    let input = || -> Input { Input::Database(db) };
    match (&a.party.net.listen, a.sessions) {
        (Some(addr), n) if n != 1 => {
            let config = a.serve.config(a.party.net.config()?, &a.party.net.admission, n);
            let labels = [("role", "sender"), ("protocol", &job.protocol.to_string())];
            let facts = [("preset", i.preset.as_str()), ("fingerprint", i.fingerprint.as_str())];
            let metrics = a.serve.metrics(&labels, Some((i.sender_size, &facts)));
            serve_many(addr, config, a.serve.grace(), metrics, |ch| {
                run_observed(ch, &job, Role::Sender, input(), observer(Role::Sender))
            })
        }
        _ => {
            let mut ch = connect(&a.party.net)?;
            let (_, report) = run_role(&mut ch, &job, Role::Sender, input(), &a.party.report)?;
            summary(&a.party.report, Role::Sender, &report, "answered one query");
            Ok(())
        }
    }
}

/// Runs `setwise receiver`.
pub fn run_receiver(a: ReceiverArgs) -> Result<(), Failure> {
    let set = read_items(&a.party.input)?;
    a.out.check(&set, a.party.job.operation)?;
    let kc = set.key_columns();
    let takes = a.party.job.protocol.spec().takes(a.party.job.operation, Role::Receiver);
    let credentials = match takes {
        Takes::Credentials => {
            let path = a.credentials.as_deref().ok_or_else(|| {
                usage("this receiver brings credentials: give --credentials FILE (see `setwise authorize`)")
            })?;
            Some(Credentials::load(path)?)
        }
        other if a.credentials.is_some() => {
            return Err(usage(&format!(
                "--credentials: the {} receiver of {} brings {}",
                a.party.job.protocol,
                a.party.job.operation,
                other.name()
            )));
        }
        _ => None,
    };
    let job = a.party.job.job(kc, Named::none().with("fingerprint", a.params_fingerprint.as_deref()))?;
    // The credentials say whose they are and which judge signed them.
    let job = match &credentials {
        Some(c) => {
            let params = Job::authorized(job.protocol, &c.client_id, c.judge_pk).params;
            job.with_params(params)
        }
        None => job,
    };
    job.validate(Role::Receiver)?;
    let items = set.items();
    let input = match &credentials {
        Some(c) => {
            let usable = authorized::usable(c, &items).len();
            if usable < set.len() {
                eprintln!("{usable} of {} items have credentials; only those take part", set.len());
            }
            Input::Credentials { items: &items, credentials: c }
        }
        None => Input::Items(&items),
    };
    let mut ch = connect(&a.party.net)?;
    let (outcome, report) = run_role(&mut ch, &job, Role::Receiver, input, &a.party.report)?;
    let what = write_outcome(&set, outcome, &a.out, Role::Receiver)?;
    summary(&a.party.report, Role::Receiver, &report, &what);
    Ok(())
}
