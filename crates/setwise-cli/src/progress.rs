//! Progress on a terminal: a spinner naming the current phase, a bar for each long
//! transfer (bytes or items done of the total, rate, time left) and for each metered
//! computation (items done of the total), driven by the library's [`Progress`] events.
//! Nothing is drawn off a terminal or with `--quiet`.

use indicatif::{ProgressBar, ProgressStyle};
use setwise::net::Transfer;
use setwise::protocols::{PhaseObserver, Progress, Work};
use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the bar shows now: a phase (spinner) or one stream's transfer.
#[derive(PartialEq)]
enum Showing {
    Phase,
    Transfer { what: &'static str, sending: bool, bytes: bool },
    Work(&'static str),
}

/// A progress display and the observer that drives it; nothing when `quiet` or when
/// stderr is not a terminal.
pub fn progress(label: &str, quiet: bool) -> (Option<ProgressBar>, Option<PhaseObserver>) {
    if quiet || !std::io::stderr().is_terminal() {
        return (None, None);
    }
    let bar = ProgressBar::new_spinner();
    bar.set_style(spinner_style());
    bar.set_prefix(label.to_string());
    bar.set_message("starting");
    bar.enable_steady_tick(Duration::from_millis(120));
    let b = bar.clone();
    // What is shown, and the current phase's name (a transfer's bar names its stream,
    // a computation's bar the phase).
    let state = Mutex::new((Showing::Phase, "starting"));
    let observer: PhaseObserver = Arc::new(move |event| {
        let Ok(mut state) = state.lock() else { return };
        let (showing, phase) = &mut *state;
        match event {
            Progress::Phase(name) => {
                if *showing != Showing::Phase {
                    b.set_style(spinner_style());
                    *showing = Showing::Phase;
                }
                *phase = name;
                b.reset_elapsed();
                b.set_message(name);
            }
            Progress::Transfer(t) => show_transfer(&b, showing, &t),
            Progress::Work(w) => show_work(&b, showing, phase, &w),
            _ => {}
        }
    });
    (Some(bar), Some(observer))
}

/// Moves the bar to transfer `t`, restyling (and restarting the rate) when a new
/// stream begins.
fn show_transfer(bar: &ProgressBar, showing: &mut Showing, t: &Transfer) {
    let bytes = t.total_bytes.is_some();
    let now = Showing::Transfer { what: t.what, sending: t.sending, bytes };
    if *showing != now {
        bar.set_length(t.total_bytes.unwrap_or(t.total));
        bar.reset();
        bar.set_style(transfer_style(bytes, t.sending));
        bar.set_message(if t.sending { t.what.to_string() } else { format!("waiting for the peer: {}", t.what) });
        *showing = now;
    }
    match t.total_bytes {
        Some(total) => {
            bar.set_length(total);
            bar.set_position(t.bytes);
        }
        None => {
            bar.set_length(t.total);
            bar.set_position(t.done);
        }
    }
}

/// Moves the bar to `w` items computed, turning the phase's spinner into a bar (the
/// message stays the phase's name).
fn show_work(bar: &ProgressBar, showing: &mut Showing, phase: &'static str, w: &Work) {
    if *showing != Showing::Work(w.unit) {
        // Length first: restyling draws, and the last bar's length would show.
        bar.set_length(w.total);
        bar.reset();
        bar.set_style(work_style(w.unit));
        bar.set_message(phase);
        *showing = Showing::Work(w.unit);
    }
    bar.set_length(w.total);
    bar.set_position(w.done);
}

fn work_style(unit: &str) -> ProgressStyle {
    let template =
        format!("{{prefix}}: {{msg}} [{{bar:24}}] {{human_pos}} of {{human_len}} {unit} ({{rate}}, {{eta}} left)");
    items_per_sec(ProgressStyle::with_template(&template).expect("valid template")).progress_chars("=> ")
}

fn spinner_style() -> ProgressStyle {
    ProgressStyle::with_template("{spinner} {prefix}: {msg} ({elapsed})").expect("valid template")
}

fn transfer_style(bytes: bool, sending: bool) -> ProgressStyle {
    let verb = if sending { "sent" } else { "received" };
    let template = if bytes {
        format!(
            "{{prefix}}: {{msg}} [{{bar:24}}] {{decimal_bytes}} of {{decimal_total_bytes}} {verb} \
             ({{decimal_bytes_per_sec}}, {{eta}} left)"
        )
    } else {
        format!("{{prefix}}: {{msg}} [{{bar:24}}] {{human_pos}} of {{human_len}} items {verb} ({{rate}}, {{eta}} left)")
    };
    items_per_sec(ProgressStyle::with_template(&template).expect("valid template")).progress_chars("=> ")
}

/// `{rate}`: items (or whatever is counted) per second as a whole number with separators
/// (indicatif's `per_sec` prints four decimals).
fn items_per_sec(style: ProgressStyle) -> ProgressStyle {
    style.with_key("rate", |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
        let _ = write!(w, "{}/s", indicatif::HumanCount(state.per_sec().round() as u64));
    })
}
