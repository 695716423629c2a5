//! `setwise report`: a run report (`--report FILE` of `sender`/`receiver`) as a
//! self-contained HTML page, beside the peer's report when given.

use crate::Failure;
use crate::report_page::{RunReport, render};
use clap::Args;
use setwise::io::write_atomic;
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

fn load(path: &Path) -> Result<RunReport, Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| Failure::usage(anyhow::anyhow!("{}: {e}", path.display())))?;
    RunReport::parse(&text).map_err(|e| Failure::usage(anyhow::anyhow!("{}: {e}", path.display())))
}
