//! What the `setwise` binary writes: report pages from hostile reports, shareable reports,
//! and result files that only their owner can read.

mod common;

use common::{bin, free_port, text, write};

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

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

/// Runs a sender (listening) and a receiver (connecting); returns both outputs.
fn pair(sender: &[&str], receiver: &[&str]) -> (Output, Output) {
    let addr = free_port();
    let spawn = |args: &[&str]| bin().args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let s = spawn(&[&["sender", "--listen", &addr], sender].concat());
    let r = spawn(&[&["receiver", "--connect", &addr], receiver].concat());
    let ro = r.wait_with_output().unwrap();
    let mut s = s;
    if !ro.status.success() {
        // A receiver that never connected leaves the sender listening.
        let _ = s.kill();
    }
    let so = s.wait_with_output().unwrap();
    assert!(so.status.success() && ro.status.success(), "{}{}", text(&so.stderr), text(&ro.stderr));
    (so, ro)
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[cfg(unix)]
/// Whether `value` or anything inside it is the number or string `wanted`.
fn holds(value: &serde_json::Value, wanted: &str) -> bool {
    match value {
        serde_json::Value::Number(n) => n.to_string() == wanted,
        serde_json::Value::String(s) => s == wanted,
        serde_json::Value::Array(items) => items.iter().any(|v| holds(v, wanted)),
        serde_json::Value::Object(map) => map.values().any(|v| holds(v, wanted)),
        _ => false,
    }
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::symlink_metadata(path).unwrap().permissions().mode() & 0o777
}

/// A report is for sharing with the partner; what a party learned is not (the sender of
/// an intersection must not learn its size from the receiver's report). `--report`
/// leaves the results out; `--report-results` keeps them in a `private` section of a
/// file only its owner can read.
#[test]
fn reports_hold_no_results_unless_asked() {
    let dir = tempfile::tempdir().unwrap();
    let s = write(dir.path(), "s.csv", "id,amount\na,1\nb,20\nc,300\nd,4000\n");
    let r = write(dir.path(), "r.csv", "id\nb\nc\ne\n");
    let (s, r) = (s.to_str().unwrap(), r.to_str().unwrap());
    let path = |name: &str| dir.path().join(name);
    let p = |name: &str| path(name).to_str().unwrap().to_string();
    pair(&["--input", s, "--report", &p("s.json")], &["--input", r, "--report", &p("r.json")]);
    for file in ["s.json", "r.json"] {
        let report = json(&path(file));
        assert_eq!(report["private"], serde_json::Value::Null, "{file}: {report}");
        assert_eq!(report["results"], serde_json::Value::Null, "{file}: {report}");
        assert!(report["phases"].as_array().unwrap().len() >= 3);
        assert!(!std::fs::read_to_string(path(file)).unwrap().contains("intersection_size"));
    }
    // The sum is the sender's result.
    let mq = ["--protocol", "mqrpmt", "--op", "sum"];
    pair(
        &[&mq[..], &["--input", s, "--value", "amount", "--report", &p("sum.json")]].concat(),
        &[&mq[..], &["--input", r]].concat(),
    );
    let shared = std::fs::read_to_string(path("sum.json")).unwrap();
    // Compared as JSON values: a timing such as 11.103208 contains the digits "320".
    assert!(!holds(&json(&path("sum.json")), "320") && !shared.contains("intersection_"), "{shared}");

    // Asked for: in `private`, and the file is the owner's only.
    pair(
        &[&mq[..], &["--input", s, "--value", "amount", "--report", &p("sum-own.json"), "--report-results"]].concat(),
        &[&mq[..], &["--input", r, "--report", &p("r-own.json"), "--report-results"]].concat(),
    );
    let own = json(&path("sum-own.json"));
    assert_eq!(own["private"]["details"]["intersection_sum"], "320", "{own}");
    assert_eq!(own["private"]["results"]["intersection_size"], 2, "{own}");
    assert_eq!(json(&path("r-own.json"))["private"]["results"]["intersection_size"], 2);
    #[cfg(unix)]
    {
        assert_eq!(mode(&path("sum-own.json")), 0o600);
        assert_eq!(mode(&path("r-own.json")), 0o600);
    }
}

/// `setwise report --share` writes a report fit for the partner from one that holds
/// results (also from reports written before results had their own section); the page
/// marks what is private.
#[test]
fn share_strips_what_a_party_learned_and_the_page_marks_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = write(dir.path(), "s.csv", "id\na\nb\nc\nd\n");
    let r = write(dir.path(), "r.csv", "id\nb\nc\ne\n");
    let (s, r) = (s.to_str().unwrap(), r.to_str().unwrap());
    let path = |name: &str| dir.path().join(name);
    let p = |name: &str| path(name).to_str().unwrap().to_string();
    pair(&["--input", s], &["--input", r, "--report", &p("r.json"), "--report-results"]);

    let out = bin().args(["report", &p("r.json"), "--share", &p("shared.json")]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shared = json(&path("shared.json"));
    assert_eq!(shared["private"], serde_json::Value::Null);
    assert_eq!(shared["phases"], json(&path("r.json"))["phases"], "the rest is kept");

    // A report of the old layout: results at the top, the sum among the details.
    let mut old = json(&path("r.json"));
    old["results"] = serde_json::json!({ "intersection_size": 2 });
    old["details"]["intersection_sum"] = "320".into();
    old.as_object_mut().unwrap().remove("private");
    std::fs::write(path("old.json"), old.to_string()).unwrap();
    let out = bin().args(["report", &p("old.json"), "--share", &p("old-shared.json")]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let text_shared = std::fs::read_to_string(path("old-shared.json")).unwrap();
    assert!(!text_shared.contains("intersection_"), "{text_shared}");

    // Not a report: refused, nothing written.
    std::fs::write(path("junk.json"), "{}").unwrap();
    let out = bin().args(["report", &p("junk.json"), "--share", &p("junk-shared.json")]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(!path("junk-shared.json").exists());

    // The page of the full report shows the results as private, and is the owner's only.
    let out = bin().args(["report", &p("r.json"), "--html", &p("own.html")]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let page = std::fs::read_to_string(path("own.html")).unwrap();
    assert!(page.contains("Private to the receiver") && page.contains("intersection size</td>"), "{page}");
    #[cfg(unix)]
    assert_eq!(mode(&path("own.html")), 0o600);
    for file in ["shared.json", "old-shared.json"] {
        let out = bin().args(["report", &p(file), "--html", &p("shared.html")]).output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        let page = std::fs::read_to_string(path("shared.html")).unwrap();
        assert!(!page.contains("intersection size") && !page.contains("Private to"), "{page}");
        assert!(page.contains("hold no results"), "{page}");
    }
}

/// Result files hold what the protocol protects: written readable by their owner only
/// (0600) whatever the umask, or with the mode `--output-mode` asks for.
#[cfg(unix)]
#[test]
fn result_files_are_the_owners_only() {
    let dir = tempfile::tempdir().unwrap();
    let s = write(dir.path(), "s.csv", "id\na\nb\nc\nd\n");
    let r = write(dir.path(), "r.csv", "id\nb\nc\ne\n");
    let (s, r) = (s.to_str().unwrap(), r.to_str().unwrap());
    let path = |name: &str| dir.path().join(name);
    let p = |name: &str| path(name).to_str().unwrap().to_string();
    pair(&["--input", s], &["--input", r, "--output", &p("rows.csv")]);
    assert_eq!(std::fs::read_to_string(path("rows.csv")).unwrap(), "id\nb\nc\n");
    assert_eq!(mode(&path("rows.csv")), 0o600);

    // Both sides of private-id write IDs: rows with IDs and the union's IDs.
    let mq = ["--protocol", "mqrpmt", "--op", "private-id"];
    pair(
        &[&mq[..], &["--input", s, "--output", &p("s-ids.csv"), "--union-ids", &p("s-union.csv")]].concat(),
        &[&mq[..], &["--input", r, "--output", &p("r-ids.csv"), "--union-ids", &p("r-union.csv")]].concat(),
    );
    for file in ["s-ids.csv", "s-union.csv", "r-ids.csv", "r-union.csv"] {
        assert_eq!(mode(&path(file)), 0o600, "{file}");
    }

    // Asked otherwise: that mode exactly.
    pair(&["--input", s], &["--input", r, "--output", &p("shared-rows.csv"), "--output-mode", "0640"]);
    assert_eq!(mode(&path("shared-rows.csv")), 0o640);
    let out =
        bin().args(["receiver", "--connect", "127.0.0.1:1", "--input", r, "--output-mode", "0999"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("0999"), "{}", text(&out.stderr));
}

/// An output path that is a symbolic link is replaced, not written through: a link
/// planted at the path cannot make the run overwrite (or disclose into) another file.
#[cfg(unix)]
#[test]
fn an_output_path_that_is_a_symlink_is_replaced_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let s = write(dir.path(), "s.csv", "id\na\nb\nc\nd\n");
    let r = write(dir.path(), "r.csv", "id\nb\nc\ne\n");
    let (s, r) = (s.to_str().unwrap(), r.to_str().unwrap());
    let path = |name: &str| dir.path().join(name);
    let p = |name: &str| path(name).to_str().unwrap().to_string();
    let victim = write(dir.path(), "victim.txt", "keep me\n");
    std::fs::set_permissions(&victim, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    for (link, role_args) in [("rows.csv", "--output"), ("report.json", "--report")] {
        std::os::unix::fs::symlink(&victim, path(link)).unwrap();
        pair(&["--input", s], &["--input", r, role_args, &p(link)]);
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me\n", "{link}");
        assert_eq!(mode(&victim), 0o644);
        assert!(std::fs::symlink_metadata(path(link)).unwrap().file_type().is_file(), "{link}");
    }
    assert_eq!(std::fs::read_to_string(path("rows.csv")).unwrap(), "id\nb\nc\n");
}
