//! `setwise report`: a run report (`--report FILE` of `sender`/`receiver`) as a
//! self-contained HTML page, beside the peer's report when given.

use crate::Failure;
use crate::report_page::{RunReport, render};
use clap::Args;
use setwise::io::write_atomic;
use std::io::Read;
use std::path::{Path, PathBuf};

/// `setwise report`.
#[derive(Args)]
pub struct ReportPageArgs {
    /// This party's run report (JSON written by --report).
    run: PathBuf,
    /// The other party's report of the same run: both timelines side by side.
    #[arg(long)]
    peer: Option<PathBuf>,
    /// Write the page here: one HTML file with no external asset.
    #[arg(long)]
    html: PathBuf,
}

/// Runs `setwise report`.
pub fn run_report(a: ReportPageArgs) -> Result<(), Failure> {
    let run = load(&a.run)?;
    let peer = a.peer.as_deref().map(load).transpose()?;
    let mut source = a.run.display().to_string();
    if let Some(p) = &a.peer {
        source = format!("{source} and {}", p.display());
    }
    let page = render(&run, peer.as_ref(), &source).map_err(Failure::usage)?;
    write_atomic(&a.html, page.as_bytes(), false)
        .map_err(|e| Failure::usage(anyhow::anyhow!("{}: {e}", a.html.display())))?;
    eprintln!("wrote {}", a.html.display());
    Ok(())
}

/// Largest report file read: a report is a few kilobytes, and may be the peer's.
const MAX_REPORT_BYTES: u64 = 16 << 20;

fn load(path: &Path) -> Result<RunReport, Failure> {
    let failed = |e: &dyn std::fmt::Display| Failure::usage(anyhow::anyhow!("{}: {e}", path.display()));
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_REPORT_BYTES + 1).read_to_string(&mut text))
        .map_err(|e| failed(&e))?;
    if text.len() as u64 > MAX_REPORT_BYTES {
        return Err(failed(&format!("larger than {} MiB: not a setwise run report", MAX_REPORT_BYTES >> 20)));
    }
    RunReport::parse(&text).map_err(|e| failed(&e))
}
