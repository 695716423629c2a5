//! `setwise`: private set operations between two processes.

mod args;
mod commands;
mod config;
mod input;
mod log;
mod metrics;
mod net;
mod output;
mod params;
mod progress;
mod report;
mod report_page;
mod sets;

use commands::{
    authorize, bench, db, demo, generate, judge, params as params_cmd, report as report_cmd, role, stage, tls, ui,
};

use clap::{CommandFactory, Parser, Subcommand};
use std::process::ExitCode;

/// Private set operations: two parties compute the intersection of their sets (or its
/// size) and learn nothing else.
#[derive(Parser)]
#[command(
    name = "setwise",
    version,
    // Every subcommand answers --version too, and its man page carries it.
    propagate_version = true,
    about = "Private set operations between parties who do not trust each other: intersection, its size, labelled look-ups, judge-authorised PSI",
    long_about = None
)]
struct Cli {
    /// Worker threads for the parallel parts (default: all cores).
    #[arg(long, global = true)]
    threads: Option<usize>,
    /// Read flags from a TOML file (its keys are the long flags; tables such as [sender]
    /// apply to one command; flags given here override it). Also SETWISE_CONFIG.
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<std::path::PathBuf>,
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
    Params(params_cmd::ParamsArgs),
    /// Be the judge of authorised PSI: sign clients' allowed items.
    Judge(judge::JudgeArgs),
    /// Ask a judge to sign your items; save the credentials.
    Authorize(authorize::AuthorizeArgs),
    /// Render run reports (--report JSON of one or both parties) as an HTML page.
    Report(report_cmd::ReportPageArgs),
    /// Build or inspect an unbalanced sender's database.
    #[command(subcommand)]
    Db(db::DbCommand),
    /// Run a protocol in stages through a shared exchange directory, bucket by bucket,
    /// resumable (docs/scale-out.md).
    #[command(subcommand)]
    Stage(stage::StageCommand),
    /// Serve a local page that runs both parties and shows each step of the protocol.
    Ui(ui::UiArgs),
    /// Make a throwaway CA and certificates for trying TLS out.
    #[command(subcommand)]
    Tls(tls::TlsCommand),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(generate::CompletionsArgs),
    /// Write the man pages (setwise.1 and one per subcommand) into a directory.
    Man(generate::ManArgs),
}

/// Exit code when the demo's result differs from the plain computation (a bug).
pub const EXIT_WRONG: u8 = 1;
/// Exit code for usage and input errors.
pub const EXIT_USAGE: u8 = 2;
/// Exit code for peer, network and protocol errors.
pub const EXIT_PEER: u8 = 3;

/// An error with the exit code it maps to.
pub struct Failure {
    /// The exit code.
    pub code: u8,
    /// What went wrong.
    pub error: anyhow::Error,
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
    let cli = match config::merged(Cli::command(), std::env::args_os().collect()) {
        Ok((argv, file)) => match Cli::try_parse_from(argv) {
            Ok(cli) => cli,
            Err(e) => {
                let _ = e.print();
                // A bad value may come from the file: say where the flags came from.
                if let Some(file) = file.filter(|_| e.use_stderr()) {
                    eprintln!("note: flags were read from the configuration file {}", file.display());
                }
                std::process::exit(e.exit_code())
            }
        },
        Err(f) => {
            eprintln!("error: {}", explain(&f.error));
            return ExitCode::from(f.code);
        }
    };
    log::init();
    if let Some(n) = cli.threads
        && let Err(e) = rayon::ThreadPoolBuilder::new().num_threads(n).build_global()
    {
        eprintln!("error: --threads: {e}");
        return ExitCode::from(EXIT_USAGE);
    }
    let result = match cli.command {
        Command::Demo(a) => demo::run_demo(a),
        Command::Sender(a) => role::run_sender(a),
        Command::Receiver(a) => role::run_receiver(a),
        Command::Bench(a) => bench::run_bench(a),
        Command::Report(a) => report_cmd::run_report(a),
        Command::Db(c) => db::run_db(c),
        Command::Tls(c) => tls::run_tls(c),
        Command::Stage(c) => stage::run_stage(c),
        Command::Ui(a) => ui::run_ui(a),
        Command::Judge(a) => judge::run_judge(a),
        Command::Params(a) => params_cmd::run_params(a),
        Command::Authorize(a) => authorize::run_authorize(a),
        Command::Completions(a) => generate::run_completions(a, Cli::command()),
        Command::Man(a) => generate::run_man(a, Cli::command()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("error: {}", explain(&f.error));
            ExitCode::from(f.code)
        }
    }
}

/// An error and its causes on one line, each cause once: library errors already show
/// their source in their own text, so a cause is added only when it says something new.
fn explain(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text = format!("{text}: {cause}");
        }
    }
    text
}
