//! `setwise report`: a run report (`--report FILE` of `sender`/`receiver`) as a
//! self-contained HTML page, beside the peer's report when given; or the report made fit
//! for the partner (`--share`), without what its party learned.

use crate::Failure;
use crate::report_page::{RunReport, render, shareable};
use clap::{ArgGroup, Args};
use setwise::io::write_atomic;
use setwise::wire::text::printable;
use std::io::Read;
use std::path::{Path, PathBuf};

/// `setwise report`.
#[derive(Args)]
#[command(group(ArgGroup::new("out").required(true).multiple(true).args(["html", "share"])))]
pub struct ReportPageArgs {
    /// This party's run report (JSON written by --report).
    run: PathBuf,
    /// The other party's report of the same run: both timelines side by side.
    #[arg(long, requires = "html")]
    peer: Option<PathBuf>,
    /// Write the page here: one HTML file with no external asset. A page that shows a
    /// party's results (a report written with --report-results) is readable by its
    /// owner only.
    #[arg(long)]
    html: Option<PathBuf>,
    /// Write the report here without what its party learned (the `private` section), to
    /// hand to the partner.
    #[arg(long)]
    share: Option<PathBuf>,
}

/// Largest report file read: a report is a few kilobytes, and may be the peer's.
const MAX_REPORT_BYTES: u64 = 16 << 20;

/// Runs `setwise report`.
pub fn run_report(a: ReportPageArgs) -> Result<(), Failure> {
    let text = read(&a.run)?;
    let failed = |path: &Path, e: &dyn std::fmt::Display| Failure::usage(anyhow::anyhow!("{}: {e}", path.display()));
    let run = RunReport::parse(&text).map_err(|e| failed(&a.run, &e))?;
    if let Some(out) = &a.share {
        let shared = shareable(&text).map_err(|e| failed(&a.run, &e))?;
        write_atomic(out, shared.as_bytes(), false).map_err(|e| failed(out, &e))?;
        eprintln!("wrote {} (without what the {} learned)", out.display(), printable(run.role(), 32));
    }
    if let Some(html) = &a.html {
        let peer = match &a.peer {
            Some(p) => Some(RunReport::parse(&read(p)?).map_err(|e| failed(p, &e))?),
            None => None,
        };
        let mut source = a.run.display().to_string();
        if let Some(p) = &a.peer {
            source = format!("{source} and {}", p.display());
        }
        let page = render(&run, peer.as_ref(), &source).map_err(Failure::usage)?;
        // What a party learned is its own: a page showing it is the owner's only.
        let private = std::iter::once(&run).chain(&peer).any(|r| !r.private_results().is_empty());
        write_atomic(html, page.as_bytes(), private).map_err(|e| failed(html, &e))?;
        eprintln!("wrote {}", html.display());
    }
    Ok(())
}

/// A report file's text, read up to [`MAX_REPORT_BYTES`].
fn read(path: &Path) -> Result<String, Failure> {
    let failed = |e: &dyn std::fmt::Display| Failure::usage(anyhow::anyhow!("{}: {e}", path.display()));
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_REPORT_BYTES + 1).read_to_string(&mut text))
        .map_err(|e| failed(&e))?;
    if text.len() as u64 > MAX_REPORT_BYTES {
        return Err(failed(&format!("larger than {} MiB: not a setwise run report", MAX_REPORT_BYTES >> 20)));
    }
    Ok(text)
}
