//! `setwise authorize`: a client asks the judge to sign its items and saves the
//! credentials.

use crate::args::{InputArgs, TlsArgs};
use crate::input::read_items;
use crate::net::net_failure;
use crate::{EXIT_PEER, Failure};
use clap::Args;
use setwise::net::{TcpChannel, TcpConfig};
use setwise::protocols::authorized::Mode;
use setwise::protocols::human_bytes;
use setwise::session::{Input, Job, run};
use setwise::{Outcome, Role};
use std::path::PathBuf;
use std::time::Duration;

/// `setwise authorize`.
#[derive(Args)]
pub struct AuthorizeArgs {
    /// The judge's address.
    #[arg(long)]
    connect: String,
    #[command(flatten)]
    input: InputArgs,
    /// The client identity the signatures are bound to.
    #[arg(long)]
    client_id: String,
    /// Partial-APSI: show the judge only the fraction of items it challenges.
    #[arg(long)]
    partial: bool,
    /// Where to save the credentials.
    #[arg(long)]
    credentials: PathBuf,
    /// Seconds to keep retrying --connect.
    #[arg(long, default_value_t = 30)]
    connect_timeout: u64,
    /// Seconds a whole frame from or to the judge may take.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    #[command(flatten)]
    tls: TlsArgs,
}

/// Runs `setwise authorize`.
pub fn run_authorize(a: AuthorizeArgs) -> Result<(), Failure> {
    let set = read_items(&a.input)?;
    let mode = if a.partial { Mode::Partial } else { Mode::Full };
    let config = TcpConfig {
        connect_timeout: Duration::from_secs(a.connect_timeout),
        io_timeout: Some(Duration::from_secs(a.timeout)),
        tls: a.tls.config(&a.connect, false)?,
        ..TcpConfig::default()
    };
    let mut ch = TcpChannel::connect(&a.connect, config).map_err(|e| net_failure("connecting", e))?;
    let job = Job::authorize(mode, a.client_id.as_bytes()).with_key_columns(set.key_columns());
    let (outcome, report) = run(&mut ch, &job, Role::Receiver, Input::Items(&set.items()))?;
    let Outcome::Credentials { credentials, refused } = outcome else {
        unreachable!("an authorisation ends with credentials")
    };
    credentials.save(&a.credentials)?;
    eprintln!(
        "authorize: {} of {} items signed for '{}' ({mode:?}), credentials in {} — {:.2} s, sent {}, received {}",
        credentials.entries.len(),
        set.len(),
        a.client_id,
        a.credentials.display(),
        report.total_ms / 1e3,
        human_bytes(report.traffic.bytes_sent),
        human_bytes(report.traffic.bytes_received)
    );
    for &i in refused.iter().take(10) {
        eprintln!("  refused: {}", String::from_utf8_lossy(set.item(i)));
    }
    if refused.len() > 10 {
        eprintln!("  … and {} more refused", refused.len() - 10);
    }
    if credentials.entries.is_empty() && !&set.items().is_empty() {
        return Err(Failure { code: EXIT_PEER, error: anyhow::anyhow!("the judge refused every item") });
    }
    Ok(())
}
