//! Running one role in the foreground: progress while it runs, the report afterwards
//! (stderr with `-v`, JSON with `--report`) and a one-line summary (none with `--quiet`).

use crate::Failure;
use crate::args::ReportArgs;
use crate::progress::progress;
use setwise::io::write_atomic;
use setwise::net::Channel;
use setwise::protocols::human_bytes;
use setwise::session::{Input, Job, run_observed};
use setwise::{Outcome, Report, Role};

/// Runs `role` of `job` over `ch` showing progress, then prints and saves the report.
pub fn run_role<I: setwise::Item>(
    ch: &mut impl Channel,
    job: &Job,
    role: Role,
    input: Input<'_, I>,
    a: &ReportArgs,
) -> Result<(Outcome, Report), Failure> {
    let (bar, observer) = progress(role.name(), a.quiet);
    let observer = crate::log::both(observer, crate::log::observer(role));
    let result = run_observed(ch, job, role, input, observer);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let (outcome, report) = result?;
    if a.verbose {
        eprint!("{report}");
    }
    if let Some(path) = &a.report {
        let json = if a.report_results { report.to_json_with_results() } else { report.to_json() };
        write_atomic(path, json.as_bytes(), a.report_results)
            .map_err(|e| Failure::usage(anyhow::anyhow!("{}: {e}", path.display())))?;
    }
    Ok((outcome, report))
}

/// The line that ends a role's run: what it learned, time and traffic (none with
/// `--quiet`).
pub fn summary(a: &ReportArgs, role: Role, report: &Report, what: &str) {
    if a.quiet {
        return;
    }
    eprintln!(
        "{role}: {what} — {:.2} s, sent {}, received {} ({} items, peer {})",
        report.total_ms / 1e3,
        human_bytes(report.traffic.bytes_sent),
        human_bytes(report.traffic.bytes_received),
        report.own_set_size,
        report.peer_set_size
    );
}
