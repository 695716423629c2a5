//! A spinner naming the current phase, shown only when stderr is a terminal.

use indicatif::{ProgressBar, ProgressStyle};
use setwise::protocols::PhaseObserver;
use std::io::IsTerminal;
use std::time::Duration;

/// A spinner and the observer that drives it, or nothing off a terminal.
pub fn spinner(label: &str) -> (Option<ProgressBar>, Option<PhaseObserver>) {
    if !std::io::stderr().is_terminal() {
        return (None, None);
    }
    let bar = ProgressBar::new_spinner();
    bar.set_style(ProgressStyle::with_template("{spinner} {prefix}: {msg} ({elapsed})").expect("valid template"));
    bar.set_prefix(label.to_string());
    bar.enable_steady_tick(Duration::from_millis(120));
    let b = bar.clone();
    (Some(bar), Some(Box::new(move |phase| b.set_message(phase))))
}
