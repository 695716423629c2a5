//! The report page: one or two run reports (the JSON of `--report`) as one self-contained
//! HTML file, with inline CSS and inline SVG, no script and no external asset. Every string
//! taken from a report is escaped: a report may come from a peer.

use serde::Deserialize;
use setwise::protocols::Spec;
use setwise::protocols::spec::REVEAL_BOTH_LEAKS;
use setwise::protocols::{RESULT_DETAILS, human_bytes};
use setwise::wire::text::{MAX_SHOWN, printable};
use std::collections::BTreeMap;
use std::fmt::Write;

/// One party's run report, as `--report` writes it (fields a page needs; older reports
/// without phase start times still load).
#[derive(Debug, Deserialize)]
pub struct RunReport {
    /// Protocol name.
    pub protocol: String,
    /// Operation name.
    pub operation: String,
    /// This party's role.
    pub role: Option<String>,
    /// Canonical parameters agreed in the hello.
    #[serde(default)]
    pub params: String,
    /// This party's distinct items.
    pub own_set_size: u64,
    /// The peer's announced distinct items.
    pub peer_set_size: u64,
    /// The identity in the peer's TLS certificate.
    #[serde(default)]
    pub peer_identity: Option<String>,
    /// Worker threads used.
    #[serde(default)]
    pub threads: u64,
    /// When the run started (Unix milliseconds), if recorded.
    #[serde(default)]
    pub started_unix_ms: Option<u64>,
    /// Timed phases, in order.
    pub phases: Vec<PhaseReport>,
    /// Whole-run wall time in milliseconds.
    pub total_ms: f64,
    /// Whole-run traffic.
    pub traffic: Traffic,
    /// Result counts at the top level: reports written before results had their own
    /// section (treated as private, like [`private`](Self::private)).
    #[serde(default)]
    pub results: BTreeMap<String, u64>,
    /// Parameters the protocol chose (in older reports also the sum, a result: see
    /// [`RESULT_DETAILS`]).
    #[serde(default)]
    pub details: BTreeMap<String, String>,
    /// What the party learned (`--report-results`): not for the partner.
    #[serde(default)]
    pub private: Option<Private>,
}

/// The `private` section of a report: what the party learned.
#[derive(Debug, Default, Deserialize)]
pub struct Private {
    /// Result counts, e.g. `intersection_size`.
    #[serde(default)]
    pub results: BTreeMap<String, u64>,
    /// Results that are not counts, e.g. `intersection_sum`.
    #[serde(default)]
    pub details: BTreeMap<String, String>,
}

/// One phase of a run report.
#[derive(Debug, Deserialize)]
pub struct PhaseReport {
    /// What the phase does.
    pub name: String,
    /// Start, milliseconds after the run started (absent in older reports).
    #[serde(default)]
    pub start_ms: Option<f64>,
    /// Wall time in milliseconds.
    pub wall_ms: f64,
    /// Bytes this party sent during the phase.
    pub bytes_sent: u64,
    /// Bytes this party received during the phase.
    pub bytes_received: u64,
}

/// Traffic counters of a report.
#[derive(Debug, Deserialize)]
pub struct Traffic {
    /// Bytes sent.
    pub bytes_sent: u64,
    /// Bytes received.
    pub bytes_received: u64,
    /// Frames sent.
    #[serde(default)]
    pub messages_sent: u64,
    /// Frames received.
    #[serde(default)]
    pub messages_received: u64,
}

/// Why a report cannot be shown.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    /// Not JSON, or not a run report.
    #[error("not a setwise run report: {0}")]
    Json(#[from] serde_json::Error),
    /// A number that no run can produce.
    #[error("not a setwise run report: {0}")]
    Invalid(String),
    /// Two reports of different runs.
    #[error("the two reports are not of the same run: {0}")]
    Mismatch(String),
}

impl RunReport {
    /// Parses and checks a report: every time a number of milliseconds from 0 to
    /// [`MAX_MS`] (so that their sums stay finite), at most [`MAX_PHASES`] phases.
    pub fn parse(json: &str) -> Result<Self, PageError> {
        // Read as JSON first, so that what the report ignores (an unknown field holding a
        // number beyond f64) is refused here as `shareable` would refuse it later.
        let v: serde_json::Value = serde_json::from_str(json)?;
        let r: RunReport = serde_json::from_value(v)?;
        time("total_ms", r.total_ms).map_err(PageError::Invalid)?;
        if r.phases.len() > MAX_PHASES {
            return Err(PageError::Invalid(format!("{} phases (at most {MAX_PHASES})", r.phases.len())));
        }
        for p in &r.phases {
            let named = |e: String| PageError::Invalid(format!("phase {:?}: {e}", show_plain(&p.name)));
            if let Some(start) = p.start_ms {
                time("start_ms", start).map_err(named)?;
            }
            time("wall_ms", p.wall_ms).map_err(named)?;
        }
        Ok(r)
    }

    /// The party's role as the report names it ("party" if it does not).
    pub fn role(&self) -> &str {
        self.role.as_deref().unwrap_or("party")
    }

    /// What the party learned, wherever the report keeps it (its `private` section, or
    /// in older reports the top-level results and the sum among the details), as
    /// (name, value) pairs.
    pub fn private_results(&self) -> Vec<(&str, String)> {
        let private = self.private.as_ref();
        let counts = self.results.iter().chain(private.into_iter().flat_map(|p| &p.results));
        let texts = self.details.iter().filter(|(k, _)| RESULT_DETAILS.contains(&k.as_str()));
        let texts = texts.chain(private.into_iter().flat_map(|p| &p.details));
        counts.map(|(k, v)| (k.as_str(), v.to_string())).chain(texts.map(|(k, v)| (k.as_str(), v.clone()))).collect()
    }

    /// The parameters the protocol chose (the details that are not results).
    fn parameters(&self) -> impl Iterator<Item = (&String, &String)> {
        self.details.iter().filter(|(k, _)| !RESULT_DETAILS.contains(&k.as_str()))
    }

    /// Each phase's start, from the report or, for older reports, the sum of the
    /// phases before it.
    fn starts(&self) -> Vec<f64> {
        let mut at = 0.0;
        self.phases
            .iter()
            .map(|p| {
                let s = p.start_ms.unwrap_or(at);
                at = s + p.wall_ms;
                s
            })
            .collect()
    }

    fn end_ms(&self) -> f64 {
        self.starts().iter().zip(&self.phases).map(|(s, p)| s + p.wall_ms).fold(self.total_ms, f64::max)
    }
}

/// A report fit for the partner: `json` (a report, checked as [`RunReport::parse`] does)
/// without what the party learned: its `private` section, and in older reports the
/// top-level results and the result details. Everything else is kept as it was.
pub fn shareable(json: &str) -> Result<String, PageError> {
    RunReport::parse(json)?;
    let mut v: serde_json::Value = serde_json::from_str(json)?;
    let report = v.as_object_mut().ok_or_else(|| PageError::Invalid("not a JSON object".into()))?;
    report.remove("private");
    report.remove("results");
    if let Some(details) = report.get_mut("details").and_then(serde_json::Value::as_object_mut) {
        details.retain(|k, _| !RESULT_DETAILS.contains(&k.as_str()));
    }
    let mut out = serde_json::to_string_pretty(&v)?;
    out.push('\n');
    Ok(out)
}

/// Longest time a report may give (about three years, in milliseconds): a run takes
/// less, and [`MAX_PHASES`] such times add up to a finite number.
pub const MAX_MS: f64 = 1e11;
/// Most phases a report may list (a run has about ten).
pub const MAX_PHASES: usize = 10_000;
/// Most ticks on the time axis (the step is at least a sixth of the span).
const MAX_TICKS: usize = 12;

/// `value` as the time `field`: a number of milliseconds from 0 to [`MAX_MS`].
fn time(field: &str, value: f64) -> Result<(), String> {
    if !(value.is_finite() && value >= 0.0) {
        return Err(format!("{field} is {value}, not a time"));
    }
    if value > MAX_MS {
        return Err(format!("{field} is {value:e} ms: no run lasts that long (at most {MAX_MS:e} ms)"));
    }
    Ok(())
}

/// Text from a report (perhaps the peer's words) made safe and short for a terminal or
/// a page: controls escaped, cut after [`MAX_SHOWN`] characters.
fn show_plain(s: &str) -> String {
    printable(s, MAX_SHOWN)
}

/// Text from a report for the page: [`show_plain`], then HTML-escaped.
fn show(s: &str) -> String {
    escape(&show_plain(s))
}

/// Escapes text for HTML content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Colours of successive phases (colour-blind-safe palette).
const COLOURS: [&str; 8] = ["#4477aa", "#ee6677", "#228833", "#ccbb44", "#66ccee", "#aa3377", "#bbbbbb", "#332288"];

/// Clock offsets larger than this between two reports are a clock difference between
/// machines, not a late start: the timelines then both start at zero.
const MAX_CLOCK_OFFSET_MS: u64 = 60_000;

/// The page for `run`, beside its `peer`'s report when given; `source` names the files.
pub fn render(run: &RunReport, peer: Option<&RunReport>, source: &str) -> Result<String, PageError> {
    if let Some(p) = peer {
        if (p.protocol.as_str(), p.operation.as_str(), p.params.as_str())
            != (run.protocol.as_str(), run.operation.as_str(), run.params.as_str())
        {
            let run_of = |r: &RunReport| show_plain(&format!("{} {} ({})", r.protocol, r.operation, r.params));
            return Err(PageError::Mismatch(format!("{} and {}", run_of(run), run_of(p))));
        }
        if p.role == run.role {
            return Err(PageError::Mismatch(format!("both reports are the {}'s", show_plain(run.role()))));
        }
        if (p.own_set_size, p.peer_set_size) != (run.peer_set_size, run.own_set_size) {
            return Err(PageError::Mismatch("the set sizes differ".into()));
        }
    }
    // The receiver's report first when both are given.
    let parties: Vec<&RunReport> = match peer {
        Some(p) if p.role.as_deref() == Some("receiver") => vec![p, run],
        Some(p) => vec![run, p],
        None => vec![run],
    };
    let mut h = String::new();
    let title = format!("setwise {} {}", run.protocol, run.operation);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><style>{CSS}</style></head><body>\n<h1>{}</h1>\n",
        show(&title),
        show(&title)
    );
    let _ = writeln!(h, "<p class=\"source\">From {}.</p>", escape(source));
    parameters(&mut h, run, &parties);
    results(&mut h, &parties);
    timeline(&mut h, &parties);
    for p in &parties {
        phases(&mut h, p);
    }
    leaks(&mut h, run);
    h.push_str("</body></html>\n");
    Ok(h)
}

const CSS: &str = "body{font:15px/1.45 system-ui,sans-serif;max-width:960px;margin:2em auto;padding:0 1em;color:#222}\
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;margin:.5em 0}td,th{padding:.2em .7em;text-align:left;border-bottom:1px solid #eee}\
td.n{text-align:right;font-variant-numeric:tabular-nums}.source{color:#666}\
.bar{display:inline-block;height:.8em;vertical-align:middle}.s{background:#4477aa}.r{background:#ee6677}\
svg text{font:12px system-ui,sans-serif}.leak{background:#f6f6f0;padding:.6em 1em;border-left:4px solid #ccbb44}\
.private{background:#fbeeee;padding:.2em 1em;border-left:4px solid #b00020}";

fn parameters(h: &mut String, run: &RunReport, parties: &[&RunReport]) {
    let (receiver, sender) = match run.role.as_deref() {
        Some("receiver") => (run.own_set_size, run.peer_set_size),
        _ => (run.peer_set_size, run.own_set_size),
    };
    h.push_str("<h2>Run</h2>\n<table>\n");
    let mut row = |k: &str, v: &str| {
        let _ = writeln!(h, "<tr><th>{}</th><td>{}</td></tr>", show(k), show(v));
    };
    row("protocol", &run.protocol);
    row("operation", &run.operation);
    row("parameters", if run.params.is_empty() { "-" } else { &run.params });
    row("receiver's set", &format!("{receiver} items"));
    row("sender's set", &format!("{sender} items"));
    for p in parties {
        row(&format!("{}: wall time", p.role()), &format!("{:.3} s on {} threads", p.total_ms / 1e3, p.threads));
        row(
            &format!("{}: traffic", p.role()),
            &format!(
                "sent {} in {} messages, received {} in {} messages",
                human_bytes(p.traffic.bytes_sent),
                p.traffic.messages_sent,
                human_bytes(p.traffic.bytes_received),
                p.traffic.messages_received
            ),
        );
        if let Some(id) = &p.peer_identity {
            row(&format!("{}: peer's TLS identity", p.role()), id);
        }
        for (k, v) in p.parameters() {
            row(&format!("{}: {k}", p.role()), v);
        }
    }
    h.push_str("</table>\n");
}

/// What each party learned, marked private: the page of a shareable report has none.
fn results(h: &mut String, parties: &[&RunReport]) {
    h.push_str("<h2>Results</h2>\n");
    let mut any = false;
    for p in parties {
        let rows = p.private_results();
        if rows.is_empty() {
            continue;
        }
        any = true;
        let _ = writeln!(
            h,
            "<div class=\"private\"><p><strong>Private to the {0}</strong>: what the {0} learned. Do not \
             show it to the partner: the protocol may hide it from them. <code>setwise report --share</code> \
             leaves it out of a report.</p>\n<table>\n<tr><th>result</th><th>value</th></tr>",
            show(p.role())
        );
        for (k, v) in rows {
            let _ = writeln!(h, "<tr><td>{}</td><td class=\"n\">{}</td></tr>", show(&k.replace('_', " ")), show(&v));
        }
        h.push_str("</table></div>\n");
    }
    if !any {
        h.push_str(
            "<p>The reports hold no results: a shareable report leaves out what its party learned \
             (<code>--report-results</code> keeps it, in a private section).</p>\n",
        );
    }
}

/// An SVG timeline: a row per party, a bar per phase, time ticks below.
fn timeline(h: &mut String, parties: &[&RunReport]) {
    let base = parties.iter().filter_map(|p| p.started_unix_ms).min();
    let offsets: Vec<f64> = parties
        .iter()
        .map(|p| match (p.started_unix_ms, base) {
            (Some(s), Some(b)) if s - b <= MAX_CLOCK_OFFSET_MS => (s - b) as f64,
            _ => 0.0,
        })
        .collect();
    let end = parties.iter().zip(&offsets).map(|(p, o)| o + p.end_ms()).fold(1e-3, f64::max);
    let (left, width, row) = (90.0, 820.0, 34.0);
    let height = row * parties.len() as f64 + 30.0;
    h.push_str("<h2>Timeline</h2>\n");
    let _ = writeln!(
        h,
        "<svg width=\"{}\" height=\"{height}\" role=\"img\" \
         aria-label=\"timeline of phases\">",
        left + width + 10.0
    );
    let x = |t: f64| left + t / end * width;
    for (i, (p, o)) in parties.iter().zip(&offsets).enumerate() {
        let y = i as f64 * row + 4.0;
        let _ = writeln!(h, "<text x=\"0\" y=\"{:.1}\">{}</text>", y + 18.0, show(p.role()));
        for (j, (ph, s)) in p.phases.iter().zip(p.starts()).enumerate() {
            let (x0, w) = (x(o + s), (ph.wall_ms / end * width).max(1.0));
            let _ = writeln!(
                h,
                "<rect x=\"{x0:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"24\" fill=\"{}\"><title>{}: {:.1} ms, \
                 sent {}, received {}</title></rect>",
                COLOURS[j % COLOURS.len()],
                show(&ph.name),
                ph.wall_ms,
                human_bytes(ph.bytes_sent),
                human_bytes(ph.bytes_received)
            );
            if w > 8.0 * ph.name.chars().count() as f64 {
                let _ = writeln!(
                    h,
                    "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"#fff\">{}</text>",
                    x0 + 4.0,
                    y + 16.0,
                    show(&ph.name)
                );
            }
        }
    }
    let axis = row * parties.len() as f64 + 4.0;
    let step = nice_step(end / 6.0);
    for i in 0..=MAX_TICKS {
        let t = i as f64 * step;
        if t > end + 1e-9 || t.is_nan() {
            break;
        }
        let _ = writeln!(
            h,
            "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{1:.1}\" y2=\"{2:.1}\" stroke=\"#999\"/>\
             <text x=\"{0:.1}\" y=\"{3:.1}\" text-anchor=\"middle\">{4}</text>",
            x(t),
            axis,
            axis + 5.0,
            axis + 19.0,
            seconds(t)
        );
    }
    h.push_str("</svg>\n");
    if parties.len() == 2 && offsets.iter().all(|o| *o == 0.0) && parties.iter().any(|p| p.started_unix_ms.is_none()) {
        h.push_str("<p>The reports do not say when each run started: both timelines start at zero.</p>\n");
    }
}

/// A round step (1, 2 or 5 times a power of ten) near `raw` milliseconds.
fn nice_step(raw: f64) -> f64 {
    let p = 10f64.powf(raw.max(1e-3).log10().floor());
    [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * p).find(|s| *s >= raw).unwrap_or(10.0 * p)
}

fn seconds(ms: f64) -> String {
    if ms < 1000.0 { format!("{ms:.0} ms") } else { format!("{:.1} s", ms / 1e3) }
}

/// A table of one party's phases: time and the bytes each way, with bars.
fn phases(h: &mut String, p: &RunReport) {
    let _ = writeln!(h, "<h2>Phases of the {}</h2>", show(p.role()));
    let max = p.phases.iter().map(|ph| ph.bytes_sent.max(ph.bytes_received)).max().unwrap_or(0).max(1);
    h.push_str("<table>\n<tr><th>phase</th><th>start</th><th>time</th><th>sent</th><th>received</th><th></th></tr>\n");
    for (ph, s) in p.phases.iter().zip(p.starts()) {
        let bar = |b: u64| (b as f64 / max as f64 * 160.0).max(if b > 0 { 1.0 } else { 0.0 });
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{:.1} ms</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td><span class=\"bar s\" style=\"width:{:.0}px\"></span><br>\
             <span class=\"bar r\" style=\"width:{:.0}px\"></span></td></tr>",
            show(&ph.name),
            seconds(s),
            ph.wall_ms,
            human_bytes(ph.bytes_sent),
            human_bytes(ph.bytes_received),
            bar(ph.bytes_sent),
            bar(ph.bytes_received)
        );
    }
    h.push_str(
        "</table>\n<p><span class=\"bar s\" style=\"width:1em\"></span> sent \
         <span class=\"bar r\" style=\"width:1em\"></span> received</p>\n",
    );
}

fn leaks(h: &mut String, run: &RunReport) {
    h.push_str("<h2>What the protocol reveals</h2>\n<div class=\"leak\">\n");
    match Spec::named(&run.protocol).map(|spec| spec.leakage) {
        Some(l) => {
            let _ = writeln!(h, "<p>Security model: {}. {}</p>", escape(l.model), escape(l.text));
            if run.params.contains("reveal=both") {
                let _ = writeln!(h, "<p>{}</p>", escape(REVEAL_BOTH_LEAKS));
            }
            let _ = writeln!(h, "<p>Details: {} in the setwise repository.</p>", escape(l.doc));
        }
        None => {
            let _ = writeln!(h, "<p>setwise does not know the protocol {}.</p>", show(&run.protocol));
        }
    }
    h.push_str("</div>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_that_parses_can_be_shared() {
        // Found by the `report` fuzz target: an unknown field with a number beyond f64
        // parsed as a report but could not be shared.
        let text = r#"{"operation":"intersection","own_set_size":1,"peer_set_size":1,"phases":[],"protocol":"ecdh","total_ms":1.0,"traffic":{"bytes_received":0,"bytes_sent":0,"messages_received":0,"messages_sent":0},"start_mj":5E999999995}"#;
        match RunReport::parse(text) {
            Ok(_) => assert!(shareable(text).is_ok(), "a report that parses can be shared"),
            Err(e) => assert!(e.to_string().contains("number out of range"), "{e}"),
        }
    }

    #[test]
    fn escapes_markup() {
        assert_eq!(escape("<a href=\"x\">'&'</a>"), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
    }

    /// Times that add up to infinity (which [`RunReport::parse`] refuses) once kept the
    /// time axis adding ticks until memory ran out; the page now ends all the same.
    #[test]
    fn the_time_axis_has_few_ticks_whatever_the_times() {
        let phase = r#"{"name":"p","wall_ms":1e308,"bytes_sent":0,"bytes_received":0}"#;
        let json = format!(
            r#"{{"protocol":"ecdh","operation":"intersection","own_set_size":1,"peer_set_size":1,
            "phases":[{phase},{phase}],"total_ms":1e308,"traffic":{{"bytes_sent":0,"bytes_received":0}}}}"#
        );
        assert!(RunReport::parse(&json).is_err());
        let report: RunReport = serde_json::from_str(&json).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(render(&report, None, "test").unwrap()));
        let page = rx.recv_timeout(std::time::Duration::from_secs(10)).expect("the page is rendered");
        assert!(page.matches("<line ").count() <= MAX_TICKS + 1);
    }

    #[test]
    fn steps_are_round() {
        assert_eq!(nice_step(3.0), 5.0);
        assert_eq!(nice_step(140.0), 200.0);
        assert_eq!(nice_step(1000.0), 1000.0);
    }
}
