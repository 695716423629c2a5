//! `setwise stage`: two parties as two processes of the CLI with a temporary exchange
//! directory, compared with the plain set computation and with the single-machine CLI;
//! interrupted and resumed runs; damaged, missing and changed inputs; the exchange key,
//! forged markers and the peer's text in `stage status`.

mod common;

use common::{bin, spawn, text};

use std::collections::HashSet;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// An awkward key: quotes, commas, unicode, spaces, line breaks, or plain.
fn key(i: usize) -> String {
    match i % 7 {
        0 => format!("user{i}@example.org"),
        1 => format!("\"quoted\" {i}@x"),
        2 => format!("comma,{i}@x"),
        3 => format!("ünïcødé-{i}@例え.jp"),
        4 => format!(" spaced {i} "),
        5 => format!("line\nbreak{i}"),
        _ => format!("plain{i}"),
    }
}

/// A CSV `id,email,name` of the keys `range`, with every 50th row repeating an earlier
/// key and every 97th row's key empty; returns the path and the parsed rows.
fn input(dir: &Path, name: &str, range: std::ops::Range<usize>) -> (PathBuf, Vec<Vec<String>>) {
    let mut rows = Vec::new();
    for (n, i) in range.clone().enumerate() {
        let k = if n % 97 == 13 {
            String::new()
        } else if n % 50 == 49 {
            key(range.start + n / 2)
        } else {
            key(i)
        };
        rows.push(vec![format!("{name}{n}"), k, format!("näme, {n}")]);
    }
    let path = dir.join(format!("{name}.csv"));
    let mut w = csv::Writer::from_path(&path).unwrap();
    w.write_record(["id", "email", "name"]).unwrap();
    rows.iter().for_each(|r| w.write_record(r).unwrap());
    w.flush().unwrap();
    (path, rows)
}

fn read_csv(p: &Path) -> Vec<Vec<String>> {
    let mut r = csv::Reader::from_path(p).unwrap();
    r.records().map(|r| r.unwrap().iter().map(str::to_owned).collect()).collect()
}

/// The data of a test: sender's and receiver's files and the plain answers.
struct Data {
    dir: tempfile::TempDir,
    sender: PathBuf,
    receiver: PathBuf,
    /// The receiver's rows whose key the sender has.
    want_rows: Vec<Vec<String>>,
    /// |X ∩ Y| of distinct non-empty keys.
    want_size: usize,
    /// The exchange key file both parties are given (made by `setwise stage keygen`).
    key: PathBuf,
}

fn data() -> Data {
    let dir = tempfile::tempdir().unwrap();
    let (sender, srows) = input(dir.path(), "s", 0..10_000);
    let (receiver, rrows) = input(dir.path(), "r", 6_000..16_000);
    let x: HashSet<&str> = srows.iter().map(|r| r[1].as_str()).filter(|k| !k.is_empty()).collect();
    let want_rows: Vec<Vec<String>> = rrows.iter().filter(|r| x.contains(r[1].as_str())).cloned().collect();
    let y: HashSet<&str> = rrows.iter().map(|r| r[1].as_str()).filter(|k| !k.is_empty()).collect();
    let want_size = x.intersection(&y).count();
    assert!(want_size > 3000 && want_rows.len() > want_size, "the data overlap, with repeated rows");
    let key = dir.path().join("exchange.key");
    let o = bin().args(["stage", "keygen", path_str(&key)]).output().unwrap();
    assert!(o.status.success() && text(&o.stderr).contains("fingerprint"), "{}", text(&o.stderr));
    Data { dir, sender, receiver, want_rows, want_size, key }
}

/// The single-machine CLI over loopback TCP: the receiver's output file (intersection)
/// and standard output.
fn single_machine(d: &Data, op: &str) -> (Vec<u8>, String) {
    let addr = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let out = d.dir.path().join(format!("single-{op}.csv"));
    let common = ["--protocol", "ecdh", "--op", op, "--key", "email"];
    let sp = spawn(&[&["sender", "--listen", &addr, "--input", path_str(&d.sender)], &common[..]].concat());
    let r = bin()
        .args(
            [
                &["receiver", "--connect", &addr, "--input", path_str(&d.receiver), "--output", path_str(&out)],
                &common[..],
            ]
            .concat(),
        )
        .output()
        .unwrap();
    let so = sp.wait_with_output().unwrap();
    assert!(r.status.success() && so.status.success(), "{} {}", text(&r.stderr), text(&so.stderr));
    (std::fs::read(&out).unwrap_or_default(), text(&r.stdout))
}

/// A party of a staged run in `d`'s directory under `run`.
struct Party<'a> {
    d: &'a Data,
    role: &'static str,
    protocol: &'static str,
    op: &'static str,
    run: &'static str,
    buckets: &'static str,
    input: PathBuf,
    /// More arguments (`--value`, `--output` of operations other than intersection).
    extra: Vec<String>,
}

impl<'a> Party<'a> {
    fn new(d: &'a Data, role: &'static str, op: &'static str, run: &'static str) -> Self {
        let input = if role == "receiver" { d.receiver.clone() } else { d.sender.clone() };
        Self { d, role, protocol: "ecdh", op, run, buckets: "16", input, extra: Vec::new() }
    }

    fn exchange(&self) -> PathBuf {
        self.d.dir.path().join(self.run).join("exchange")
    }

    fn output(&self) -> PathBuf {
        self.d.dir.path().join(self.run).join("out.csv")
    }

    fn args(&self, cmd: &str) -> Vec<String> {
        let work = self.d.dir.path().join(self.run).join(format!("work-{}", self.role));
        let mut a: Vec<String> = ["stage", cmd, "--role", self.role, "--protocol", self.protocol, "--op", self.op]
            .iter()
            .map(|x| x.to_string())
            .collect();
        for (k, v) in [
            ("--input", path_str(&self.input)),
            ("--key", "email"),
            ("--exchange", path_str(&self.exchange())),
            ("--workdir", path_str(&work)),
            ("--run-id", self.run),
            ("--buckets", self.buckets),
            ("--wait-timeout", if cmd == "run" { "300" } else { "0" }),
            ("--exchange-key", path_str(&self.d.key)),
        ] {
            a.push(k.into());
            a.push(v.into());
        }
        if self.role == "receiver" && self.op == "intersection" {
            a.push("--output".into());
            a.push(path_str(&self.output()).into());
        }
        a.extend(self.extra.iter().cloned());
        a
    }

    fn spawn(&self, cmd: &str) -> Child {
        bin().args(self.args(cmd)).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
    }

    fn next(&self) -> Output {
        bin().args(self.args("next")).output().unwrap()
    }

    fn next_ok(&self, what: &str) -> Output {
        let o = self.next();
        assert!(o.status.success(), "{} next ({what}): {}", self.role, text(&o.stderr));
        assert!(text(&o.stderr).contains(what), "{} next, expected {what}: {}", self.role, text(&o.stderr));
        o
    }

    fn marker(&self, stage: u8, role: &str) -> Vec<u8> {
        std::fs::read(self.exchange().join(format!("stage-{stage}/{role}.done.json"))).unwrap()
    }
}

/// Both parties' `stage run` at once; returns the receiver's output.
fn staged_pair(r: &Party, s: &Party) -> Output {
    let (rc, sc) = (r.spawn("run"), s.spawn("run"));
    let (ro, so) = (rc.wait_with_output().unwrap(), sc.wait_with_output().unwrap());
    assert!(so.status.success(), "sender: {}", text(&so.stderr));
    assert!(ro.status.success(), "receiver: {}", text(&ro.stderr));
    ro
}

#[test]
fn staged_runs_equal_the_plain_computation_and_the_single_machine_cli() {
    let d = data();
    // Intersection: the matching rows, as the single-machine receiver writes them.
    let (single, _) = single_machine(&d, "intersection");
    let (r, s) =
        (Party::new(&d, "receiver", "intersection", "run-i"), Party::new(&d, "sender", "intersection", "run-i"));
    let ro = staged_pair(&r, &s);
    let staged = std::fs::read(r.output()).unwrap();
    assert_eq!(read_csv(&r.output()), d.want_rows, "the plain intersection's rows");
    assert_eq!(staged, single, "byte for byte the single-machine CLI's output");
    assert!(text(&ro.stderr).contains(&format!("intersection size {}", d.want_size)), "{}", text(&ro.stderr));
    assert!((0..16).all(|b| r.exchange().join(format!("stage-2/sender/part-{b:05}.bin")).exists()), "16 buckets");

    // Cardinality: the count on standard output, as the single-machine receiver prints it.
    let (_, single) = single_machine(&d, "cardinality");
    let (r, s) = (Party::new(&d, "receiver", "cardinality", "run-c"), Party::new(&d, "sender", "cardinality", "run-c"));
    let ro = staged_pair(&r, &s);
    assert_eq!(text(&ro.stdout), format!("{}\n", d.want_size));
    assert_eq!(text(&ro.stdout), single);

    // A finished run asked again does nothing, and says so (the count again on stdout).
    let before: Vec<Vec<u8>> = (0..=3).map(|st| r.marker(st, if st == 2 { "sender" } else { "receiver" })).collect();
    let again = r.next_ok("nothing to do");
    assert_eq!(text(&again.stdout), format!("{}\n", d.want_size));
    let after: Vec<Vec<u8>> = (0..=3).map(|st| r.marker(st, if st == 2 { "sender" } else { "receiver" })).collect();
    assert_eq!(before, after);
    let status = bin()
        .args(["stage", "status", "--exchange", path_str(&r.exchange()), "--run-id", "run-c"])
        .args(["--exchange-key", path_str(&d.key)])
        .output()
        .unwrap();
    let status = text(&status.stdout);
    assert!(status.contains("stage 3 (finish) receiver: done") && status.contains("16 parts"), "{status}");
}

/// vole and mqrpmt run staged by replay: first one process per stage (each replays its
/// role from the run seed), then the rest at once; the same rows and count as the plain
/// computation and the single-machine CLI.
#[test]
fn vole_and_mqrpmt_run_staged_by_replay_and_equal_the_plain_computation() {
    let d = data();
    let (single, _) = single_machine(&d, "intersection");
    let party = |role, protocol, op, run| Party { protocol, buckets: "4", ..Party::new(&d, role, op, run) };
    let (r, s) = (party("receiver", "vole", "intersection", "run-v"), party("sender", "vole", "intersection", "run-v"));
    for what in ["stage 0 (hello)", "stage 1 (bucket sizes)", "stage 2 (round 1)", "stage 3 (round 2)"] {
        r.next_ok(what);
        s.next_ok(what);
    }
    let ro = staged_pair(&r, &s);
    assert_eq!(read_csv(&r.output()), d.want_rows, "the plain intersection's rows");
    assert_eq!(std::fs::read(r.output()).unwrap(), single, "byte for byte the single-machine CLI's output");
    assert!(text(&ro.stderr).contains(&format!("intersection size {}", d.want_size)), "{}", text(&ro.stderr));
    let status = bin()
        .args(["stage", "status", "--exchange", path_str(&r.exchange()), "--run-id", "run-v"])
        .args(["--exchange-key", path_str(&d.key)])
        .output()
        .unwrap();
    let status = text(&status.stdout);
    assert!(status.contains("(round 3) sender: done") && status.contains("its last stage"), "{status}");

    let (r, s) =
        (party("receiver", "mqrpmt", "cardinality", "run-m"), party("sender", "mqrpmt", "cardinality", "run-m"));
    let ro = staged_pair(&r, &s);
    assert_eq!(text(&ro.stdout), format!("{}\n", d.want_size));

    // What cannot be staged is refused before anything is written, naming what can.
    let mut refused = party("receiver", "vole", "cardinality", "run-x").args("run");
    refused.retain(|a| a != "--output");
    let o = bin().args(&refused).output().unwrap();
    assert!(!o.status.success() && text(&o.stderr).contains("vole (intersection)"), "{}", text(&o.stderr));
}

/// `auto`, the default of a staged run, runs vole for intersection and says so; against a
/// peer that names a replayed protocol, it runs that one; both give the plain results.
#[test]
fn auto_is_the_staged_default_and_follows_a_peer_that_names_its_protocol() {
    let d = data();
    let party = |role, protocol, op, run| Party { protocol, buckets: "4", ..Party::new(&d, role, op, run) };
    let (r, s) = (party("receiver", "auto", "intersection", "run-a"), party("sender", "auto", "intersection", "run-a"));
    // The receiver names no protocol at all: the default.
    let mut args = r.args("run");
    let at = args.iter().position(|a| a == "--protocol").unwrap();
    args.drain(at..at + 2);
    let rc = bin().args(&args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let so = s.spawn("run").wait_with_output().unwrap();
    let ro = rc.wait_with_output().unwrap();
    assert!(so.status.success() && ro.status.success(), "{}\n{}", text(&so.stderr), text(&ro.stderr));
    assert_eq!(read_csv(&r.output()), d.want_rows, "the plain intersection's rows");
    for o in [&ro, &so] {
        assert!(
            text(&o.stderr).contains("run-a: auto runs vole in every bucket: staged intersection"),
            "{}",
            text(&o.stderr)
        );
    }
    assert!(text(&ro.stderr).contains("stage 10 (round 9)"), "vole's rounds: {}", text(&ro.stderr));

    let (r, s) =
        (party("receiver", "auto", "cardinality", "run-am"), party("sender", "mqrpmt", "cardinality", "run-am"));
    let ro = staged_pair(&r, &s);
    assert_eq!(text(&ro.stdout), format!("{}\n", d.want_size));
    assert!(text(&ro.stderr).contains("auto runs mqrpmt in every bucket: the peer named it"), "{}", text(&ro.stderr));

    // A peer naming ecdh (stages of its own) is refused by both, naming what auto follows.
    let (r, s) =
        (party("receiver", "auto", "intersection", "run-ae"), party("sender", "ecdh", "intersection", "run-ae"));
    let (rc, sc) = (r.spawn("run"), s.spawn("run"));
    let (ro, so) = (rc.wait_with_output().unwrap(), sc.wait_with_output().unwrap());
    for o in [&ro, &so] {
        let e = text(&o.stderr);
        assert!(!o.status.success() && e.contains("protocol") && e.contains("compact, mqrpmt, vole"), "{e}");
    }
}

/// The CSV `email,amount` of the keys `range` (amount = 3·i mod 1000), and its rows.
fn valued(dir: &Path, name: &str, range: std::ops::Range<usize>) -> (PathBuf, Vec<(String, u64)>) {
    let rows: Vec<(String, u64)> = range.map(|i| (key(i), (3 * i % 1000) as u64)).collect();
    let path = dir.join(format!("{name}.csv"));
    let mut w = csv::Writer::from_path(&path).unwrap();
    w.write_record(["email", "amount"]).unwrap();
    rows.iter().for_each(|(k, v)| w.write_record([k, &v.to_string()]).unwrap());
    w.flush().unwrap();
    (path, rows)
}

/// mqrpmt's other operations staged (4 buckets, replayed): `sum` gives the sender the
/// plain sum and count, as the single-machine CLI prints them; `union` gives the receiver
/// the plain union; `private-id` gives both parties one ID per item of X ∪ Y, the same
/// for a common item on both sides.
#[test]
fn mqrpmt_sum_union_and_private_id_run_staged_and_equal_the_plain_computation() {
    let d = data();
    let (xs, xrows) = valued(d.dir.path(), "xs", 0..3_000);
    let (ys, yrows) = valued(d.dir.path(), "ys", 2_000..4_500);
    let ykeys: HashSet<&str> = yrows.iter().map(|(k, _)| k.as_str()).collect();
    let common: Vec<&(String, u64)> = xrows.iter().filter(|(k, _)| ykeys.contains(k.as_str())).collect();
    let want_sum: u64 = common.iter().map(|(_, v)| v).sum();
    let out = |run: &str, who: &str| d.dir.path().join(run).join(format!("{who}.csv"));
    let party = |role: &'static str, op: &'static str, run: &'static str, extra: &[String]| Party {
        protocol: "mqrpmt",
        buckets: "4",
        input: if role == "receiver" { ys.clone() } else { xs.clone() },
        extra: extra.to_vec(),
        ..Party::new(&d, role, op, run)
    };
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();

    // sum: the sender learns the count and the sum; the receiver only the count.
    let r = party("receiver", "sum", "run-sum", &[]);
    let s = party("sender", "sum", "run-sum", &args(&["--value", "amount", "--value-bound", "1000"]));
    let (rc, sc) = (r.spawn("run"), s.spawn("run"));
    let (ro, so) = (rc.wait_with_output().unwrap(), sc.wait_with_output().unwrap());
    assert!(ro.status.success() && so.status.success(), "{} {}", text(&ro.stderr), text(&so.stderr));
    assert_eq!(text(&ro.stdout), format!("{}\n", common.len()));
    let want = format!("{{\"cardinality\":{},\"sum\":\"{want_sum}\"}}\n", common.len());
    assert_eq!(text(&so.stdout), want, "{}", text(&so.stderr));
    // Asked again, each party prints what it learned again and runs nothing.
    assert_eq!(text(&r.next_ok("nothing to do").stdout), format!("{}\n", common.len()));
    assert_eq!(text(&s.next_ok("nothing to do").stdout), want);
    // The single-machine CLI prints the same.
    let addr = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let common_args = ["--protocol", "mqrpmt", "--op", "sum", "--key", "email"];
    let sender =
        [&["sender", "--listen", &addr, "--input", path_str(&xs), "--value", "amount"][..], &common_args].concat();
    let sp = spawn(&sender);
    let receiver = [&["receiver", "--connect", &addr, "--input", path_str(&ys)][..], &common_args].concat();
    let ro = bin().args(receiver).output().unwrap();
    let so = sp.wait_with_output().unwrap();
    assert!(ro.status.success() && so.status.success(), "{}", text(&so.stderr));
    assert_eq!(text(&so.stdout), want);

    // sum --sum-to receiver: the receiver adds up the buckets' counts and sums and prints
    // what the sender printed above; the sender learns nothing, and --output is refused.
    let to = args(&["--sum-to", "receiver"]);
    let r = party("receiver", "sum", "run-rsum", &to);
    let s =
        party("sender", "sum", "run-rsum", &[&to[..], &args(&["--value", "amount", "--value-bound", "1000"])].concat());
    let (rc, sc) = (r.spawn("run"), s.spawn("run"));
    let (ro, so) = (rc.wait_with_output().unwrap(), sc.wait_with_output().unwrap());
    assert!(ro.status.success() && so.status.success(), "{} {}", text(&ro.stderr), text(&so.stderr));
    assert_eq!((text(&ro.stdout), text(&so.stdout)), (want.clone(), String::new()), "{}", text(&ro.stderr));
    let extra = [&to[..], &args(&["--value", "amount", "--output", path_str(&out("run-rsum", "s"))])].concat();
    let o = bin().args(party("sender", "sum", "run-rsum2", &extra).args("run")).output().unwrap();
    assert!(!o.status.success() && text(&o.stderr).contains("learns nothing"), "{}", text(&o.stderr));

    // union: the receiver's keys and the sender's others.
    let r = party("receiver", "union", "run-u", &args(&["--output", path_str(&out("run-u", "r"))]));
    let s = party("sender", "union", "run-u", &[]);
    staged_pair(&r, &s);
    let mut got: Vec<String> = read_csv(&out("run-u", "r")).into_iter().map(|row| row[0].clone()).collect();
    let mut want: Vec<String> = yrows.iter().chain(&xrows).map(|(k, _)| k.clone()).collect();
    got.sort();
    want.sort();
    want.dedup();
    assert_eq!(got, want, "the plain union");

    // private-id: both parties, one ID per own item; a common item's IDs agree.
    let r = party("receiver", "private-id", "run-p", &args(&["--output", path_str(&out("run-p", "r"))]));
    let s = party("sender", "private-id", "run-p", &args(&["--output", path_str(&out("run-p", "s"))]));
    staged_pair(&r, &s);
    let ids = |who| -> std::collections::HashMap<String, String> {
        read_csv(&out("run-p", who)).into_iter().map(|row| (row[0].clone(), row[row.len() - 1].clone())).collect()
    };
    let (ri, si) = (ids("r"), ids("s"));
    assert_eq!((ri.len(), si.len()), (yrows.len(), xrows.len()));
    for (k, _) in &common {
        assert_eq!(ri[k.as_str()], si[k.as_str()], "{k}");
    }
    let distinct: HashSet<&String> = ri.values().chain(si.values()).collect();
    assert_eq!(distinct.len(), want.len(), "one ID per item of the union");

    // The sum's sender without its values is refused, naming what it needs.
    let o = bin().args(party("sender", "sum", "run-novalue", &[]).args("run")).output().unwrap();
    assert!(!o.status.success() && text(&o.stderr).contains("--value COLUMN"), "{}", text(&o.stderr));
}

#[test]
fn an_interrupted_stage_resumes_with_the_same_bytes_and_finished_stages_stay_done() {
    let d = data();
    let (r, s) =
        (Party::new(&d, "receiver", "intersection", "run-k"), Party::new(&d, "sender", "intersection", "run-k"));
    // `next` runs the stage the markers say; nothing is ready for stage 1 before the hellos.
    let early = r.next_ok("stage 0 (hello) done");
    assert!(early.status.success());
    let not_ready = r.next();
    assert_eq!(not_ready.status.code(), Some(75), "{}", text(&not_ready.stderr));
    assert!(text(&not_ready.stderr).contains("sender.done.json"), "{}", text(&not_ready.stderr));
    s.next_ok("stage 0 (hello) done");
    r.next_ok("stage 1 (blind) done");
    s.next_ok("stage 1 (blind) done");
    s.next_ok("stage 2 (re-blind) done");
    let parts: Vec<Vec<u8>> =
        (0..16).map(|b| std::fs::read(s.exchange().join(format!("stage-2/sender/part-{b:05}.bin"))).unwrap()).collect();
    let done: Vec<Vec<u8>> = [(0, "receiver"), (0, "sender"), (1, "receiver"), (1, "sender")]
        .iter()
        .map(|&(st, who)| r.marker(st, who))
        .collect();

    // The sender's stage 2 is cut short: its marker never written, one part missing.
    // Run again, it redoes stage 2 only, with the same bytes: the parts there are kept
    // (each is written once), the missing one written.
    let ex = s.exchange();
    std::fs::remove_file(ex.join("stage-2/sender.done.json")).unwrap();
    std::fs::remove_file(ex.join("stage-2/sender/part-00005.bin")).unwrap();
    // A part damaged meanwhile (a writer's crash cannot leave one half written: each
    // appears whole or not at all) is never replaced: refused by name, until removed.
    std::fs::write(ex.join("stage-2/sender/part-00003.bin"), &parts[3][..parts[3].len() / 2]).unwrap();
    let damaged = s.next();
    assert!(
        text(&damaged.stderr).contains("stage-2/sender/part-00003.bin: already holds other bytes"),
        "{}",
        text(&damaged.stderr)
    );
    std::fs::remove_file(ex.join("stage-2/sender/part-00003.bin")).unwrap();
    s.next_ok("stage 2 (re-blind) done");
    for (b, p) in parts.iter().enumerate() {
        assert_eq!(&std::fs::read(ex.join(format!("stage-2/sender/part-{b:05}.bin"))).unwrap(), p, "part {b}");
    }
    // The receiver's finish is killed mid-stage (or just after): run again, it finishes.
    let mut killed = r.spawn("next");
    std::thread::sleep(std::time::Duration::from_millis(30));
    let _ = killed.kill();
    let _ = killed.wait();
    let ro = r.spawn("run").wait_with_output().unwrap();
    assert!(ro.status.success(), "{}", text(&ro.stderr));
    assert_eq!(read_csv(&r.output()), d.want_rows);
    let still: Vec<Vec<u8>> = [(0, "receiver"), (0, "sender"), (1, "receiver"), (1, "sender")]
        .iter()
        .map(|&(st, who)| r.marker(st, who))
        .collect();
    assert_eq!(done, still, "finished stages were not redone (same markers, same attempt ids)");
    assert_eq!(s.next_ok("nothing to do").status.code(), Some(0));
}

#[test]
fn damaged_missing_and_changed_messages_and_inputs_are_refused_by_name() {
    let d = data();
    let (r, s) =
        (Party::new(&d, "receiver", "intersection", "run-d"), Party::new(&d, "sender", "intersection", "run-d"));
    for (p, what) in [(&r, "hello"), (&s, "hello"), (&r, "blind"), (&s, "blind"), (&s, "re-blind")] {
        p.next_ok(what);
    }
    let ex = r.exchange();
    // A damaged byte in the sender's stage 2 message of bucket 7.
    let p7 = ex.join("stage-2/sender/part-00007.bin");
    let good = std::fs::read(&p7).unwrap();
    let mut bad = good.clone();
    bad[100] ^= 1;
    std::fs::write(&p7, &bad).unwrap();
    let o = r.next();
    let e = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{e}");
    assert!(e.contains("stage 3") && e.contains("stage 2 message, bucket 7") && e.contains("digest mismatch"), "{e}");
    assert!(!r.output().exists(), "no output from a failed stage");
    assert!(ex.join("abort-receiver.json").exists(), "the peer is told");
    std::fs::write(&p7, &good).unwrap();
    // A missing part of the sender's stage 1.
    let p4 = ex.join("stage-1/sender/part-00004.bin");
    let kept = std::fs::read(&p4).unwrap();
    std::fs::remove_file(&p4).unwrap();
    let e = text(&r.next().stderr);
    assert!(e.contains("stage 3") && e.contains("stage 1 message, bucket 4") && e.contains("missing"), "{e}");
    std::fs::write(&p4, kept).unwrap();
    std::fs::remove_file(ex.join("abort-receiver.json")).unwrap();
    // Restored, the finish runs and gives the plain answer.
    r.next_ok("stage 3 (finish) done");
    assert_eq!(read_csv(&r.output()), d.want_rows);

    // A changed input after stage 0 is refused.
    let (r2, _) = (Party::new(&d, "receiver", "intersection", "run-e"), ());
    r2.next_ok("hello");
    let mut changed = std::fs::read_to_string(&d.receiver).unwrap();
    changed.push_str("extra,new-key@x,Zed\n");
    let moved = Party { input: d.dir.path().join("r2.csv"), ..Party::new(&d, "receiver", "intersection", "run-e") };
    std::fs::write(&moved.input, changed).unwrap();
    let o = moved.next();
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("input changed since stage 0"), "{}", text(&o.stderr));

    // Different bucket requests are refused naming both.
    let r3 = Party::new(&d, "receiver", "intersection", "run-b");
    let s3 = Party { buckets: "8", ..Party::new(&d, "sender", "intersection", "run-b") };
    r3.next_ok("hello");
    s3.next_ok("hello");
    let e = text(&r3.next().stderr);
    assert!(e.contains("buckets") && e.contains("this side has 16, the peer has 8"), "{e}");
}

#[test]
fn keys_are_made_by_keygen_and_a_run_without_one_is_refused_saying_how_to_make_one() {
    let d = data();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&d.key).unwrap().permissions().mode() & 0o777, 0o600);
    }
    let key = std::fs::read_to_string(&d.key).unwrap();
    assert_eq!(key.trim().len(), 64);
    let again = bin().args(["stage", "keygen", path_str(&d.key)]).output().unwrap();
    assert_eq!(again.status.code(), Some(2), "{}", text(&again.stderr));
    assert!(text(&again.stderr).contains("already exists"), "{}", text(&again.stderr));
    assert_eq!(std::fs::read_to_string(&d.key).unwrap(), key, "an existing key file is never replaced");

    let r = Party::new(&d, "receiver", "intersection", "run-nokey");
    let args: Vec<String> = r.args("next");
    let at = args.iter().position(|a| a == "--exchange-key").unwrap();
    let without: Vec<&String> =
        args.iter().enumerate().filter(|(i, _)| *i != at && *i != at + 1).map(|(_, a)| a).collect();
    let o = bin().args(&without).output().unwrap();
    let e = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("--exchange-key FILE is needed") && e.contains("setwise stage keygen"), "{e}");
    assert!(!r.exchange().exists(), "nothing written without the key");
    std::fs::write(d.dir.path().join("short.key"), "abcd").unwrap();
    let mut short = args.clone();
    short[at + 1] = path_str(&d.dir.path().join("short.key")).into();
    let e = text(&bin().args(&short).output().unwrap().stderr);
    assert!(e.contains("short.key") && e.contains("64 hexadecimal digits"), "{e}");
}

#[test]
fn a_forged_marker_is_refused_by_name_and_status_shows_the_peers_text_escaped() {
    let d = data();
    let (r, s) =
        (Party::new(&d, "receiver", "intersection", "run-f"), Party::new(&d, "sender", "intersection", "run-f"));
    r.next_ok("hello");
    s.next_ok("hello");
    // Someone who can write the exchange but holds no key edits the sender's hello marker.
    let ex = r.exchange();
    let marker = ex.join("stage-0/sender.done.json");
    let honest = std::fs::read(&marker).unwrap();
    let mut m: serde_json::Value = serde_json::from_slice(&honest).unwrap();
    m["attempt"] = "forged".into();
    std::fs::write(&marker, m.to_string()).unwrap();
    let o = r.next();
    let e = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{e}");
    assert!(e.contains("stage-0/sender.done.json: its MAC does not verify under the exchange key"), "{e}");
    assert!(e.contains("or the two parties hold different keys"), "{e}");
    std::fs::write(&marker, &honest).unwrap();
    std::fs::remove_file(ex.join("abort-receiver.json")).unwrap();

    // A party given another key is refused by the other.
    let other = d.dir.path().join("other.key");
    assert!(bin().args(["stage", "keygen", path_str(&other)]).status().unwrap().success());
    let mut args = s.args("next");
    let at = args.iter().position(|a| a == "--exchange-key").unwrap();
    args[at + 1] = path_str(&other).into();
    let e = text(&bin().args(&args).output().unwrap().stderr);
    assert!(e.contains("exchange key"), "a key changed within a run: {e}");

    // An abort note with an ANSI escape and a megabyte: status shows it escaped and
    // bounded, and with the key refuses it as unauthenticated.
    let hostile = format!("\u{1b}[2J\u{1b}]0;pwned\u{7}{}", "A".repeat(1_000_000));
    let note = serde_json::json!({ "format": "setwise-staged/v2", "role": "sender", "error": hostile });
    std::fs::write(ex.join("abort-sender.json"), note.to_string()).unwrap();
    let plain = bin().args(["stage", "status", "--exchange", path_str(&ex)]).output().unwrap();
    let keyed = bin()
        .args(["stage", "status", "--exchange", path_str(&ex), "--run-id", "run-f"])
        .args(["--exchange-key", path_str(&d.key)])
        .output()
        .unwrap();
    for o in [&plain, &keyed] {
        let out = text(&o.stdout);
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert!(!out.contains('\u{1b}') && !out.contains('\u{7}') && out.len() < 4000, "{:.300}", out);
    }
    let (plain, keyed) = (text(&plain.stdout), text(&keyed.stdout));
    assert!(
        plain.contains("stopped the run (the note is not authenticated)") && plain.contains("\\u{1b}[2J"),
        "{plain:.500}"
    );
    assert!(plain.contains("stage 0 (hello) sender: done (not authenticated: run run-f"), "{plain:.500}");
    assert!(keyed.contains("abort-sender.json: its MAC does not verify"), "{keyed:.500}");
    assert!(keyed.contains("stage 0 (hello) sender: done (run run-f"), "{keyed:.500}");
    // The receiver, waiting on the sender, refuses the forged note by name.
    let o = r.next();
    assert_eq!(o.status.code(), Some(3));
    assert!(text(&o.stderr).contains("abort-sender.json: its MAC does not verify"), "{}", text(&o.stderr));
}
