//! `setwise sender` and `setwise receiver`.

use crate::Failure;
use crate::progress::spinner;
use clap::{ArgGroup, Args};
use setwise::io::{Format, ItemSet};
use setwise::net::{DEFAULT_MAX_FRAME, TcpChannel, TcpConfig};
use setwise::session::{self, human_bytes};
use setwise::{Job, Operation, Outcome, Protocol, Report, Role};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Options shared by both roles.
#[derive(Args)]
#[command(group(ArgGroup::new("peer").required(true).args(["listen", "connect"])))]
pub struct CommonArgs {
    /// Protocol: ecdh.
    #[arg(long, default_value = "ecdh")]
    protocol: Protocol,
    /// Operation: intersection (the receiver learns the common items) or cardinality
    /// (the receiver learns only how many there are).
    #[arg(long = "op", default_value = "intersection")]
    operation: Operation,
    /// Input file: CSV (with a header unless --no-header) or, for .txt, one item per line.
    #[arg(long)]
    input: PathBuf,
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
}

/// `setwise receiver`.
#[derive(Args)]
pub struct ReceiverArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Write the receiver's rows whose key is in the intersection (header kept) here.
    #[arg(long, conflicts_with = "stdout")]
    output: Option<PathBuf>,
    /// Write the matching rows to standard output instead.
    #[arg(long)]
    stdout: bool,
}

fn read_input(a: &CommonArgs) -> Result<ItemSet, Failure> {
    let format = match a.format.as_deref() {
        Some("text") => Format::Text,
        Some(_) => Format::Csv {
            header: !a.no_header,
        },
        None => Format::guess(&a.input, a.no_header),
    };
    let set = ItemSet::read(&a.input, format, &a.key)?;
    let s = set.stats();
    if s.empty_keys > 0 || s.duplicate_rows > 0 {
        eprintln!(
            "{}: {} rows, {} distinct items ({} rows with an empty key skipped, {} rows repeat an earlier key)",
            a.input.display(),
            s.rows,
            set.items().len(),
            s.empty_keys,
            s.duplicate_rows
        );
    }
    Ok(set)
}

fn connect(a: &CommonArgs) -> Result<TcpChannel, Failure> {
    let config = TcpConfig {
        max_frame: a.max_frame,
        io_timeout: Some(Duration::from_secs(a.timeout)),
        connect_timeout: Duration::from_secs(a.connect_timeout),
    };
    let net = |e| {
        Failure::from(setwise::Error::Net {
            phase: "connecting",
            source: e,
        })
    };
    match (&a.listen, &a.connect) {
        (Some(addr), _) => {
            eprintln!("listening on {addr}");
            TcpChannel::listen(addr, config).map_err(net)
        }
        (_, Some(addr)) => TcpChannel::connect(addr, config).map_err(net),
        _ => Err(Failure::usage(anyhow::anyhow!(
            "give --listen or --connect"
        ))),
    }
}

fn run_role(a: &CommonArgs, role: Role, set: &ItemSet) -> Result<(Outcome, Report), Failure> {
    let job = Job {
        protocol: a.protocol,
        operation: a.operation,
        key_columns: set.key_columns(),
    };
    job.validate()?;
    let mut ch = connect(a)?;
    let (bar, observer) = spinner(&role.to_string());
    let result = session::run(&mut ch, &job, role, set.items(), observer);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let (outcome, report) = result?;
    if a.verbose {
        eprint!("{report}");
    }
    if let Some(path) = &a.report {
        std::fs::write(path, report.to_json())
            .map_err(|e| Failure::usage(anyhow::anyhow!("{}: {e}", path.display())))?;
    }
    Ok((outcome, report))
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
    let set = read_input(&a.common)?;
    let (_, report) = run_role(&a.common, Role::Sender, &set)?;
    summary(Role::Sender, &report, "done, learned nothing");
    Ok(())
}

/// Runs `setwise receiver`.
pub fn run_receiver(a: ReceiverArgs) -> Result<(), Failure> {
    let set = read_input(&a.common)?;
    let (outcome, report) = run_role(&a.common, Role::Receiver, &set)?;
    match outcome {
        Outcome::Cardinality(c) => {
            println!("{c}");
            summary(Role::Receiver, &report, &format!("intersection size {c}"));
        }
        Outcome::Intersection(matched) => {
            let rows = write_matches(&set, &matched, a.output.as_deref(), a.stdout)?;
            let dest = match (&a.output, a.stdout) {
                (Some(p), _) => format!(", {rows} rows written to {}", p.display()),
                (None, true) => format!(", {rows} rows written to standard output"),
                (None, false) => " (use --output FILE or --stdout for the rows)".into(),
            };
            summary(
                Role::Receiver,
                &report,
                &format!("intersection size {}{dest}", matched.len()),
            );
        }
        other => summary(Role::Receiver, &report, &format!("{other:?}")),
    }
    Ok(())
}

fn write_matches(
    set: &ItemSet,
    matched: &[usize],
    output: Option<&Path>,
    stdout: bool,
) -> Result<usize, Failure> {
    Ok(match (output, stdout) {
        (Some(p), _) => set.write_rows_to(matched, p)?,
        (None, true) => set.write_rows(matched, std::io::stdout().lock())?,
        (None, false) => 0,
    })
}
