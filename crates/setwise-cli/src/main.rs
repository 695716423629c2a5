//! `setwise`: private set operations between two processes.

mod bench;
mod db;
mod demo;
mod judge;
mod output;
mod progress;
mod role;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Private set operations: two parties compute the intersection of their sets (or its
/// size) and learn nothing else.
#[derive(Parser)]
#[command(
    name = "setwise",
    version,
    about = "Private set operations between parties who do not trust each other: intersection, its size, labelled look-ups, judge-authorised PSI",
    long_about = None
)]
struct Cli {
    /// Worker threads for the parallel parts (default: all cores).
    #[arg(long, global = true)]
    threads: Option<usize>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run both roles over loopback TCP on generated data and check the result.
    Demo(demo::DemoArgs),
    /// Play the sender: hold a set, help the receiver compute the output, learn nothing.
    Sender(role::SenderArgs),
    /// Play the receiver: hold a set and learn the output.
    Receiver(role::ReceiverArgs),
    /// Time both roles on generated sets and print a table.
    Bench(bench::BenchArgs),
    /// Choose unbalanced-PSI parameters for given sizes; print the JSON and the prediction.
    Params(db::ParamsArgs),
    /// Be the judge of authorised PSI: sign clients' allowed items.
    Judge(judge::JudgeArgs),
    /// Ask a judge to sign your items; save the credentials.
    Authorize(judge::AuthorizeArgs),
    /// Build or inspect an unbalanced sender's database.
    #[command(subcommand)]
    Db(db::DbCommand),
}

/// Exit code for usage and input errors.
const EXIT_USAGE: u8 = 2;
/// Exit code for peer and protocol errors.
const EXIT_PEER: u8 = 3;

/// An error with the exit code it maps to.
pub struct Failure {
    code: u8,
    error: anyhow::Error,
}

impl Failure {
    /// A usage or input error (exit 2).
    pub fn usage(error: impl Into<anyhow::Error>) -> Self {
        Self { code: EXIT_USAGE, error: error.into() }
    }
}

impl From<setwise::Error> for Failure {
    fn from(e: setwise::Error) -> Self {
        let code = if e.is_local() { EXIT_USAGE } else { EXIT_PEER };
        Self { code, error: e.into() }
    }
}

impl From<setwise::io::InputError> for Failure {
    fn from(e: setwise::io::InputError) -> Self {
        Self::usage(e)
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(n) = cli.threads
        && let Err(e) = rayon::ThreadPoolBuilder::new().num_threads(n).build_global()
    {
        eprintln!("error: --threads: {e}");
        return ExitCode::from(EXIT_USAGE);
    }
    let result = match cli.command {
        Command::Demo(a) => demo::run(a),
        Command::Sender(a) => role::run_sender(a),
        Command::Receiver(a) => role::run_receiver(a),
        Command::Bench(a) => bench::run(a),
        Command::Db(c) => db::run(c),
        Command::Judge(a) => judge::run_judge(a),
        Command::Params(a) => db::run_params(a),
        Command::Authorize(a) => judge::run_authorize(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("error: {:#}", f.error);
            ExitCode::from(f.code)
        }
    }
}
