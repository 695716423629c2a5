//! What the `setwise` binary writes: report pages from hostile reports, shareable reports,
//! and result files that only their owner can read.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_setwise"))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn write(dir: &Path, name: &str, content: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    p
}

/// Runs `cmd`, killing it after `limit`: `None` if it had to be killed.
fn run_within(cmd: &mut Command, limit: Duration) -> Option<Output> {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(child.wait_with_output().unwrap())
}

/// A report with the given phases (JSON objects) and total.
fn report_with(phases: &str, total_ms: &str) -> String {
    format!(
        r#"{{"protocol":"ecdh","operation":"intersection","role":"receiver","params":"","own_set_size":3,
        "peer_set_size":4,"threads":2,"phases":[{phases}],"total_ms":{total_ms},
        "traffic":{{"bytes_sent":1,"bytes_received":2,"messages_sent":1,"messages_received":1}}}}"#
    )
}

/// Phase times that are finite but add up to infinity once took the page's time axis
/// into an endless loop (memory growing until the process was killed). Such a report
/// is refused, naming the field.
#[test]
fn a_report_with_absurd_times_is_refused_not_looped_on() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("page.html");
    let phase = |name: &str, fields: &str| format!(r#"{{"name":"{name}",{fields},"bytes_sent":0,"bytes_received":0}}"#);
    let cases = [
        // No start times: the starts are the sums of the phases before.
        (report_with(&[phase("a", r#""wall_ms":1e308"#), phase("b", r#""wall_ms":1e308"#)].join(","), "1"), "wall_ms"),
        (report_with(&phase("a", r#""start_ms":1.7e308,"wall_ms":1.7e308"#), "1"), "start_ms"),
        (report_with(&phase("a", r#""wall_ms":1"#), "1e300"), "total_ms"),
    ];
    for (i, (json, field)) in cases.iter().enumerate() {
        let path = write(dir.path(), &format!("huge{i}.json"), json);
        let out = run_within(
            bin().args(["report", path.to_str().unwrap(), "--html", html.to_str().unwrap()]),
            Duration::from_secs(10),
        )
        .unwrap_or_else(|| panic!("case {i}: `setwise report` did not end within 10 s"));
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "case {i}: {err}");
        assert!(err.contains(field) && err.contains("no run lasts that long"), "case {i}: {err}");
        assert!(!html.exists());
    }
    // A report is read up to a bound: an endless file is refused, not read to the end.
    let out =
        run_within(bin().args(["report", "/dev/zero", "--html", html.to_str().unwrap()]), Duration::from_secs(10))
            .expect("`setwise report /dev/zero` did not end within 10 s");
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("larger than 16 MiB"), "{}", text(&out.stderr));
}
