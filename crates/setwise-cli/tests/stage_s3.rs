//! `setwise stage` with its exchange in an S3-compatible bucket: a real server (SeaweedFS
//! on loopback, `common/s3.rs`), both parties as processes of the CLI. Every answer is
//! compared with the plain set computation. Also what an object store changes: objects
//! written once under concurrent writers, reads bounded, a stage never taken before its
//! marker, and a damaged part named by its `s3://` address.

mod common;

use common::s3::{BUCKET, S3Server};
use common::{bin, expected, items, rows, text};
use setwise::staged::Location;
use setwise::staged::location::Put;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// `setwise stage ARGS…` with the server's environment.
fn stage<S: AsRef<std::ffi::OsStr>>(server: &S3Server, args: &[S]) -> Command {
    let mut c = bin();
    c.arg("stage").args(args).envs(server.env());
    c
}

/// The arguments of `role`'s side of run `run` (`protocol`, `op`) with its exchange at
/// `s3://exchange/runs/<run>` and its workdir under `dir`.
fn party(dir: &Path, role: &str, protocol: &str, op: &str, run: &str) -> Vec<String> {
    let input = dir.join(if role == "sender" { "s.csv" } else { "r.csv" });
    let mut a: Vec<String> = vec![
        "--role".into(),
        role.into(),
        "--protocol".into(),
        protocol.into(),
        "--op".into(),
        op.into(),
        "--input".into(),
        input.display().to_string(),
        "--exchange".into(),
        format!("s3://{BUCKET}/runs/{run}"),
        "--workdir".into(),
        dir.join(format!("{run}-{role}")).display().to_string(),
        "--buckets".into(),
        "4".into(),
        "--exchange-key".into(),
        dir.join("exchange.key").display().to_string(),
    ];
    if role == "receiver" && op == "intersection" {
        a.extend(["--output".into(), dir.join(format!("{run}.csv")).display().to_string()]);
    }
    a
}

/// Both parties' arguments (sender, receiver) of run `run`'s intersection with `protocol`.
fn parties(dir: &Path, protocol: &str, run: &str) -> (Vec<String>, Vec<String>) {
    (party(dir, "sender", protocol, "intersection", run), party(dir, "receiver", protocol, "intersection", run))
}

/// `setwise stage next ARGS…` with the server's environment, run to its end.
fn next(server: &S3Server, args: &[String]) -> Output {
    stage(server, &[&["next".to_string()], args].concat()).output().unwrap()
}

/// Both parties' `stage run` at once; the receiver's output.
fn run_both(server: &S3Server, dir: &Path, protocol: &str, op: &str, run: &str) -> Output {
    let s = party(dir, "sender", protocol, op, run);
    let r = party(dir, "receiver", protocol, op, run);
    let sender = stage(server, &[&["run".to_string()], &s[..]].concat())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ro = stage(server, &[&["run".to_string()], &r[..]].concat()).output().unwrap();
    let so = sender.wait_with_output().unwrap();
    assert!(so.status.success(), "sender: {}", text(&so.stderr));
    assert!(ro.status.success(), "receiver: {}", text(&ro.stderr));
    ro
}

fn setup(dir: &Path) {
    items(dir, "s.csv", 0..3000);
    items(dir, "r.csv", 2000..4500);
    let o = bin().args(["stage", "keygen"]).arg(dir.join("exchange.key")).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
}

#[test]
fn staged_runs_through_an_s3_bucket_equal_the_plain_computation() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    let want = expected(0..3000, 2000..4500);
    for protocol in ["ecdh", "vole"] {
        let run = format!("{protocol}-rows");
        run_both(&server, dir.path(), protocol, "intersection", &run);
        assert_eq!(rows(&dir.path().join(format!("{run}.csv"))), want, "{protocol}");
    }
    let ro = run_both(&server, dir.path(), "mqrpmt", "cardinality", "mqrpmt-count");
    assert_eq!(text(&ro.stdout), format!("{}\n", want.len()));

    // `status` reads the markers from the bucket; without the server's credentials the
    // refusal is the server's, escaped and bounded, naming the object.
    let status = stage(&server, &["status", "--exchange", &format!("s3://{BUCKET}/runs/ecdh-rows")])
        .args(["--exchange-key"])
        .arg(dir.path().join("exchange.key"))
        .output()
        .unwrap();
    let status = text(&status.stdout);
    assert!(status.contains("stage 3 (finish) receiver: done") && status.contains("4 parts"), "{status}");
    let refused = stage(&server, &["status", "--exchange", &format!("s3://{BUCKET}/runs/ecdh-rows")])
        .env("AWS_SECRET_ACCESS_KEY", "wrong")
        .output()
        .unwrap();
    let refused = text(&refused.stdout);
    assert!(refused.contains("s3://exchange/runs/ecdh-rows/stage-0/receiver.done.json: "), "{refused}");
    assert!(refused.contains("403") && refused.lines().all(|l| l.len() < 2000), "{refused}");
    // The server's XML error document has line breaks: shown escaped, none starts a line.
    assert!(refused.contains("<Error>") && !refused.lines().any(|l| l.starts_with("<Error>")), "{refused}");
}

/// A reader takes a stage only by its marker: parts without one are never read (the
/// peer waits), and a part damaged after its marker is refused by its address.
#[test]
fn a_stage_is_taken_by_its_marker_only_and_a_damaged_part_is_named() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    let (s, r) = parties(dir.path(), "ecdh", "half");
    let next = |a: &[String]| next(&server, a);
    for a in [&r, &s, &r, &s] {
        assert!(next(a).status.success());
    }
    // The sender's stage 2 (re-blind) half done: parts there, no marker. The receiver's
    // finish waits for the marker (exit 75), whatever parts it could list.
    let bucket = Location::parse_with(&format!("s3://{BUCKET}/runs/half"), &server.env()).unwrap();
    for b in 0..4 {
        let name = format!("stage-2/sender/part-{b:05}.bin");
        assert_eq!(bucket.put_new(&name, b"not yet a message").unwrap(), Put::Created);
    }
    let waiting = next(&r);
    assert_eq!(waiting.status.code(), Some(75), "{}", text(&waiting.stderr));
    assert!(text(&waiting.stderr).contains("s3://exchange/runs/half/stage-2/sender.done.json"));
    // The sender's own parts there are not what it writes: refused by name, never
    // replaced (each object is written once), and its peer is not told to stop.
    let refused = next(&s);
    assert!(!refused.status.success());
    assert!(
        text(&refused.stderr)
            .contains("s3://exchange/runs/half/stage-2/sender/part-00000.bin: already holds other bytes"),
        "{}",
        text(&refused.stderr)
    );
    assert_eq!(bucket.get("abort-sender.json", 1 << 20).unwrap(), None, "no abort note");

    // A clean run, then one of its parts replaced after the marker: the receiver's finish
    // refuses it by address.
    let (s, r) = parties(dir.path(), "ecdh", "damaged");
    for a in [&r, &s, &r, &s, &s] {
        let o = next(a);
        assert!(o.status.success(), "{}", text(&o.stderr));
    }
    let damaged = Location::parse_with(&format!("s3://{BUCKET}/runs/damaged"), &server.env()).unwrap();
    let part = "stage-2/sender/part-00002.bin";
    let mut bytes = damaged.get(part, 1 << 30).unwrap().unwrap();
    bytes[40] ^= 1;
    damaged.put_replace(part, &bytes).unwrap();
    let o = next(&r);
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("s3://exchange/runs/damaged/stage-2/sender/part-00002.bin: digest mismatch"),
        "{}",
        text(&o.stderr)
    );
}

/// A replayed stage interrupted in a bucket (some parts written, no marker) runs again:
/// it finds the parts it wrote, identical, creates the others, and the run ends with the
/// plain intersection.
#[test]
fn an_interrupted_stage_resumes_in_a_bucket_keeping_the_parts_it_wrote() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    let (s, r) = parties(dir.path(), "vole", "kept");
    let next = |a: &[String]| {
        let o = next(&server, a);
        assert!(o.status.success(), "{}", text(&o.stderr));
        text(&o.stderr)
    };
    for a in [&r, &s, &r, &s] {
        next(a);
    }
    let bucket = Location::parse_with(&format!("s3://{BUCKET}/runs/kept"), &server.env()).unwrap();
    let part = |k: u8, b: u32| format!("stage-{k}/sender/part-{b:05}.bin");
    let parts =
        |k: u8| -> Vec<Vec<u8>> { (0..4).map(|b| bucket.get(&part(k, b), 1 << 30).unwrap().unwrap()).collect() };
    // The rounds in turn, to the sender's first stage whose parts carry messages.
    let mut k = 2;
    let written = loop {
        next(&r);
        assert!(next(&s).contains(&format!("sender stage {k} (round {})", k - 1)));
        let written = parts(k);
        if written.iter().all(|p| !p.is_empty()) {
            break written;
        }
        k += 1;
        assert!(k < 10, "the sender sends in some round");
    };
    // Killed after writing parts 0 and 2: parts 1 and 3 and the marker are not there.
    for key in [part(k, 1), part(k, 3), format!("stage-{k}/sender.done.json")] {
        server.delete(&format!("runs/kept/{key}"));
    }
    assert_eq!(bucket.get(&part(k, 1), 1 << 30).unwrap(), None);
    assert!(next(&s).contains(&format!("sender stage {k} (round {}) done", k - 1)), "the stage again");
    assert_eq!(parts(k), written, "the same bytes, the kept parts and the new ones");
    run_both(&server, dir.path(), "vole", "intersection", "kept");
    assert_eq!(rows(&dir.path().join("kept.csv")), expected(0..3000, 2000..4500));
}

/// Of many writers of one name, one creates it and the others find it, whatever the
/// timing; reads are cut at their bound; a missing object is absent, not an error.
#[test]
fn objects_are_written_once_under_racing_writers_and_read_within_bounds() {
    let server = S3Server::start();
    let at = Location::parse_with(&format!("s3://{BUCKET}/race"), &server.env()).unwrap();
    for round in 0..5 {
        let name = format!("object-{round}");
        let outcomes: Vec<(usize, Put)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|w| {
                    let (at, name) = (at.clone(), name.clone());
                    s.spawn(move || (w, at.put_new(&name, format!("writer {w}").as_bytes()).unwrap()))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let won: Vec<usize> = outcomes.iter().filter(|(_, p)| *p == Put::Created).map(|(w, _)| *w).collect();
        assert_eq!(won.len(), 1, "round {round}: {outcomes:?}");
        assert_eq!(at.get(&name, 100).unwrap().unwrap(), format!("writer {}", won[0]).as_bytes(), "the winner's");
    }
    assert_eq!(at.get("absent", 10).unwrap(), None);
    at.put_new("big", &[7u8; 1000]).unwrap();
    let e = at.get("big", 999).unwrap_err().to_string();
    assert!(e.contains("s3://exchange/race/big: more than the 999 bytes"), "{e}");
    assert_eq!(at.get("big", 1000).unwrap().unwrap().len(), 1000);
}
