//! The `setwise` binary as two processes over TCP on CSV files.

mod common;

use common::{bin, free_port, s, spawn, text, write};

use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Runs a sender (listening) and a receiver (connecting); returns both outputs.
fn pair(sender: &[&str], receiver: &[&str]) -> (Output, Output) {
    let addr = free_port();
    let s = spawn(&[&["sender", "--listen", &addr], sender].concat());
    let r = spawn(&[&["receiver", "--connect", &addr], receiver].concat());
    (s.wait_with_output().unwrap(), r.wait_with_output().unwrap())
}

#[test]
fn intersection_writes_matching_rows_with_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let s = write(dir.path(), "s.csv", "email,name\na@x,Ann\nb@x,Bob\nc@x,Cy\n");
    let r = write(dir.path(), "r.csv", "id,email\n1,b@x\n2,z@x\n3,c@x\n4,b@x\n5,\n");
    let out = dir.path().join("out.csv");
    let report = dir.path().join("r.json");
    let (so, ro) = pair(
        &["--input", s.to_str().unwrap(), "--key", "email"],
        &[
            "--input",
            r.to_str().unwrap(),
            "--key",
            "email",
            "--output",
            out.to_str().unwrap(),
            "--report",
            report.to_str().unwrap(),
            "--report-results",
        ],
    );
    assert!(so.status.success(), "sender: {}", text(&so.stderr));
    assert!(ro.status.success(), "receiver: {}", text(&ro.stderr));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "id,email\n1,b@x\n3,c@x\n4,b@x\n");
    let stderr = text(&ro.stderr);
    assert!(stderr.contains("intersection size 2") && stderr.contains("1 rows with an empty key"), "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(json["private"]["results"]["intersection_size"], 2);
    assert_eq!(json["own_set_size"], 3);
    assert_eq!(json["peer_set_size"], 3);
    assert!(json["phases"].as_array().unwrap().len() >= 3);
}

#[test]
fn cardinality_prints_the_count_with_text_and_headerless_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let s = write(dir.path(), "s.txt", "a\nb\nc\nd\n");
    let r = write(dir.path(), "r.csv", "9,c\n8,d\n7,e\n");
    let (so, ro) = pair(
        &["--op", "cardinality", "--input", s.to_str().unwrap()],
        &["--op", "cardinality", "--input", r.to_str().unwrap(), "--no-header", "--key", "2"],
    );
    assert!(so.status.success(), "{}", text(&so.stderr));
    assert!(ro.status.success(), "{}", text(&ro.stderr));
    assert_eq!(text(&ro.stdout).trim(), "2");
}

#[test]
fn reveal_both_gives_the_sender_its_rows_and_the_count() {
    let dir = tempfile::tempdir().unwrap();
    let s = write(dir.path(), "s.csv", "email,name\na@x,Ann\nb@x,Bob\nc@x,Cy\nb@x,Bea\n");
    let r = write(dir.path(), "r.csv", "id,email\n1,b@x\n2,z@x\n3,c@x\n");
    let (sp, rp) = (s.to_str().unwrap(), r.to_str().unwrap());
    for protocol in ["ecdh", "mqrpmt", "fhe", "compact"] {
        let out = dir.path().join(format!("{protocol}.csv"));
        let (so, ro) = pair(
            &[
                "--protocol",
                protocol,
                "--reveal",
                "both",
                "--input",
                sp,
                "--key",
                "email",
                "--output",
                out.to_str().unwrap(),
            ],
            &["--protocol", protocol, "--reveal", "both", "--input", rp, "--key", "email"],
        );
        assert!(so.status.success() && ro.status.success(), "{protocol}: {}{}", text(&so.stderr), text(&ro.stderr));
        // Every sender row of a common key, duplicates included, in the input's order.
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "email,name\nb@x,Bob\nc@x,Cy\nb@x,Bea\n", "{protocol}");
    }
    for protocol in ["ecdh", "mqrpmt"] {
        let both = ["--protocol", protocol, "--op", "cardinality", "--reveal", "both", "--key", "email"];
        let (so, ro) = pair(&[&both[..], &["--input", sp]].concat(), &[&both[..], &["--input", rp]].concat());
        assert_eq!((text(&so.stdout), text(&ro.stdout)), ("2\n".into(), "2\n".into()), "{protocol}");
    }
    // A sender without --output keeps only its keys through the run, and still says how
    // many matched.
    let both = ["--protocol", "vole", "--reveal", "both", "--key", "email"];
    let (so, ro) = pair(&[&both[..], &["--input", sp]].concat(), &[&both[..], &["--input", rp]].concat());
    assert!(so.status.success() && ro.status.success(), "{}{}", text(&so.stderr), text(&ro.stderr));
    assert!(text(&so.stderr).contains("intersection size 2 (use --output FILE"), "{}", text(&so.stderr));
    // A protocol or operation without it is refused before any connection.
    let o = bin()
        .args(["sender", "--protocol", "mqrpmt", "--op", "union", "--reveal", "both", "--input", sp])
        .args(["--listen", "127.0.0.1:1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("--reveal both is not for mqrpmt union; no protocol reveals union"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn mismatched_operations_fail_both_sides_with_exit_3() {
    let dir = tempfile::tempdir().unwrap();
    let s = write(dir.path(), "s.txt", "a\n");
    let (so, ro) = pair(
        &["--op", "cardinality", "--input", s.to_str().unwrap()],
        &["--op", "intersection", "--input", s.to_str().unwrap()],
    );
    assert_eq!(so.status.code(), Some(3));
    assert_eq!(ro.status.code(), Some(3));
    assert!(text(&so.stderr).contains("operation: this side has cardinality, the peer has intersection"));
    assert!(text(&ro.stderr).contains("operation: this side has intersection, the peer has cardinality"));
}

/// A run that fails leaves no file under the output's name, no temporary file beside
/// it, and an older output of the same name as it was.
#[test]
fn a_failed_run_leaves_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let s = write(dir.path(), "s.txt", "a\nb\n");
    let fresh = dir.path().join("fresh.csv");
    let kept = write(dir.path(), "kept.csv", "id\nfrom an earlier run\n");
    for out in [&fresh, &kept] {
        let (so, ro) = pair(
            &["--op", "cardinality", "--input", s.to_str().unwrap()],
            &["--op", "intersection", "--input", s.to_str().unwrap(), "--output", out.to_str().unwrap()],
        );
        assert_eq!((so.status.code(), ro.status.code()), (Some(3), Some(3)));
    }
    assert!(!fresh.exists());
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), "id\nfrom an earlier run\n");
    let mut names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    names.sort();
    assert_eq!(names, ["kept.csv", "s.txt"], "no temporary file is left behind");
}

/// The judge's secret key goes where the operator says, never to a default file in
/// the working directory.
#[test]
fn the_judge_needs_an_explicit_secret_key_path() {
    let dir = tempfile::tempdir().unwrap();
    let allow = write(dir.path(), "allow.txt", "a\n");
    let o = bin()
        .current_dir(dir.path())
        .args(["judge", "--listen", "127.0.0.1:0", "--allow", allow.to_str().unwrap(), "--public-key", "j.pub"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--secret-key"), "{}", text(&o.stderr));
    assert!(!dir.path().join("judge.key").exists() && !dir.path().join("j.pub").exists());
}

#[test]
fn different_key_column_counts_are_a_parameter_mismatch() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "f.csv", "a,b\n1,2\n");
    let (so, ro) =
        pair(&["--input", f.to_str().unwrap(), "--key", "a,b"], &["--input", f.to_str().unwrap(), "--key", "a"]);
    assert_eq!(so.status.code(), Some(3));
    assert!(
        text(&ro.stderr).contains("parameters: this side has key_columns=1, the peer has key_columns=2"),
        "{}",
        text(&ro.stderr)
    );
}

#[test]
fn input_errors_exit_2_and_name_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "f.csv", "name,email\nann,a@x\n");
    let o = bin()
        .args(["receiver", "--connect", "127.0.0.1:1", "--input", f.to_str().unwrap(), "--key", "id"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("no column named 'id' (columns: name, email)"), "{}", text(&o.stderr));
    let o = bin().args(["sender", "--input", f.to_str().unwrap()]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "neither --listen nor --connect");
    let o = bin().args(["sender", "--listen", "127.0.0.1:0", "--input", "/nonexistent.csv"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
}

/// A protocol's own options reach it by name, and one it does not take is refused
/// before any connection (before the registry, ecdh ignored `--rpmt`).
#[test]
fn an_option_the_protocol_does_not_take_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "f.txt", "a\n");
    let f = f.to_str().unwrap();
    let run =
        |args: &[&str]| bin().args(["sender", "--connect", "127.0.0.1:1", "--input", f]).args(args).output().unwrap();
    let o = run(&["--rpmt", "poprf"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("unknown option 'rpmt'") && text(&o.stderr).contains("ecdh, which takes none"),
        "{}",
        text(&o.stderr)
    );
    let o = run(&["--protocol", "mqrpmt", "--rpmt", "cwprf2"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("cwprf2") && text(&o.stderr).contains("poprf"), "{}", text(&o.stderr));
    let o = bin().args(["receiver", "--connect", "127.0.0.1:1", "--input", f, "--credentials", f]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = text(&o.stderr);
    assert!(e.contains("--credentials: the ecdh receiver of intersection brings items"), "{e}");
    let o = run(&["--protocol", "vole", "--client-id", "lab"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("option 'client_id'") && text(&o.stderr).contains("vole, which takes none"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn connect_gives_up_after_its_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "f.txt", "a\n");
    let o = bin()
        .args(["receiver", "--connect", &free_port(), "--connect-timeout", "1", "--input", f.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3));
    assert!(text(&o.stderr).contains("could not connect"), "{}", text(&o.stderr));
}

#[test]
fn demo_verifies_itself() {
    let o = bin().args(["demo", "--size", "500", "--overlap", "0.3"]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains("intersection: 150 items (plain computation: 150 items) ✓"), "{out}");
    for op in ["cardinality", "sum", "shares", "union", "private-id"] {
        let o = bin().args(["demo", "--protocol", "mqrpmt", "--op", op, "--size", "300"]).output().unwrap();
        assert!(o.status.success() && text(&o.stdout).contains('✓'), "{op}: {}{}", text(&o.stdout), text(&o.stderr));
    }
}

/// `setwise params` chooses a set (JSON on stdout, the prediction on stderr), predicts
/// for a given file or preset (the same prediction for its own choice), and refuses a
/// file whose BFV configuration it has no costs for, before calibrating, naming it.
#[test]
fn params_chooses_or_predicts_for_a_given_set() {
    let dir = tempfile::tempdir().unwrap();
    let sizes = ["params", "--sender-size", "65536", "--receiver-size", "256"];
    let chosen = bin().args(sizes).output().unwrap();
    assert!(chosen.status.success(), "{}", text(&chosen.stderr));
    let predicted = |o: &Output| {
        let e = text(&o.stderr);
        let line =
            e.lines().find(|l| l.starts_with("predicted per query")).unwrap_or_else(|| panic!("{e}")).to_string();
        // The bundles and bytes, not the seconds (each run calibrates anew).
        line.split_once(", ").unwrap().1.to_string()
    };
    let file = write(dir.path(), "chosen.json", &text(&chosen.stdout));
    let given = bin().args(sizes).args(["--params", s(&file)]).output().unwrap();
    assert!(given.status.success(), "{}", text(&given.stderr));
    assert_eq!(given.stdout, chosen.stdout);
    assert_eq!(predicted(&given), predicted(&chosen));
    let preset = bin().args(sizes).args(["--params", "64K-256"]).output().unwrap();
    assert!(preset.status.success() && predicted(&preset).contains("bundles per index"), "{}", text(&preset.stderr));
    let other = write(
        dir.path(),
        "other.json",
        r#"{"table_params":{"hash_func_count":3,"table_size":1024,"max_items_per_bin":8},
            "item_params":{"felts_per_item":4},
            "query_params":{"ps_low_degree":0,"query_powers":[1,2,3,4,5,6,7,8]},
            "seal_params":{"poly_modulus_degree":4096,"coeff_modulus_bits":[42,36,31],"plain_modulus":2056193}}"#,
    );
    let o = bin().args(sizes).args(["--params", s(&other)]).output().unwrap();
    let e = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("no costs measured for N = 4096 over moduli of [42, 36, 31]") && !e.contains("measured N="),
        "{e}"
    );
}

/// A small CSV intersection with `protocol` as two processes; returns the receiver's stderr.
fn small_intersection_over_tcp(protocol: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let s: String = std::iter::once("id\n".to_string()).chain((0..150).map(|i| format!("k{i}\n"))).collect();
    let r: String = std::iter::once("id\n".to_string()).chain((100..220).map(|i| format!("k{i}\n"))).collect();
    let (s, r) = (write(dir.path(), "s.csv", &s), write(dir.path(), "r.csv", &r));
    let out = dir.path().join("out.csv");
    let (so, ro) = pair(
        &["--protocol", protocol, "--input", s.to_str().unwrap()],
        &["--protocol", protocol, "--input", r.to_str().unwrap(), "--output", out.to_str().unwrap(), "-v"],
    );
    assert!(so.status.success(), "{}", text(&so.stderr));
    assert!(ro.status.success(), "{}", text(&ro.stderr));
    let expected: String = std::iter::once("id\n".to_string()).chain((100..150).map(|i| format!("k{i}\n"))).collect();
    assert_eq!(std::fs::read_to_string(&out).unwrap(), expected, "{protocol}");
    text(&ro.stderr)
}

#[test]
fn compact_intersection_over_tcp() {
    small_intersection_over_tcp("compact");
}

#[test]
fn fhe_intersection_over_tcp() {
    let stderr = small_intersection_over_tcp("fhe");
    assert!(stderr.contains("fhe: N="), "the report shows the chosen parameters");
}

#[test]
fn unbalanced_serves_concurrent_receivers_and_survives_a_hostile_one() {
    use std::io::Write as _;
    let dir = tempfile::tempdir().unwrap();
    let s: String = std::iter::once("id,city\n".to_string()).chain((0..3000).map(|i| format!("u{i},c{i}\n"))).collect();
    let s = write(dir.path(), "s.csv", &s);
    let db = dir.path().join("s.db");
    let o = bin()
        .args(["db", "build", "--input", s.to_str().unwrap(), "--key", "id", "--out", db.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let info = bin().args(["db", "info", "--db", db.to_str().unwrap()]).output().unwrap();
    assert!(text(&info.stdout).contains("sender items:        3000"), "{}", text(&info.stdout));

    let addr = free_port();
    let sender = spawn(&[
        "sender",
        "--protocol",
        "unbalanced",
        "--db",
        db.to_str().unwrap(),
        "--listen",
        &addr,
        "--sessions",
        "2",
        "--timeout",
        "10",
        // Long enough that the slow client is still waiting however loaded the machine.
        "--hello-timeout",
        "120",
        // Nothing held in memory: every bundle read per query from the encoded copy on
        // disk, the path of a database larger than the memory, under concurrent queries.
        "--memory",
        "0",
    ]);
    let connect = || loop {
        match std::net::TcpStream::connect(&addr) {
            Ok(s) => break s,
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(50)),
        }
    };
    // A slow client: connects first and then says nothing while the others are served.
    let slow = connect();
    // A hostile client: a valid frame prefix, then garbage, then it hangs up.
    let mut hostile = connect();
    hostile.write_all(&[8, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
    drop(hostile);
    let receivers: Vec<_> = [(0..40, 0..40), (2990..3030, 2990..3000)]
        .into_iter()
        .enumerate()
        .map(|(k, (range, hits))| {
            let r: String = std::iter::once("id\n".to_string()).chain(range.map(|i| format!("u{i}\n"))).collect();
            let input = write(dir.path(), &format!("r{k}.csv"), &r);
            let out = dir.path().join(format!("out{k}.csv"));
            let child = spawn(&[
                "receiver",
                "--protocol",
                "unbalanced",
                "--input",
                input.to_str().unwrap(),
                "--connect",
                &addr,
                "--output",
                out.to_str().unwrap(),
            ]);
            (child, out, hits)
        })
        .collect();
    for (child, out, hits) in receivers {
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "receiver: {}", text(&o.stderr));
        let expected: String = std::iter::once("id\n".to_string()).chain(hits.map(|i| format!("u{i}\n"))).collect();
        assert_eq!(std::fs::read_to_string(out).unwrap(), expected);
    }
    // The receivers were answered while the slow client was connected, waiting for its
    // hello (120 s): it did not block them. The server stops after the two sessions and
    // drops it, counting it as refused (below).
    let so = sender.wait_with_output().unwrap();
    assert!(so.status.success(), "{}", text(&so.stderr));
    let log = text(&so.stderr);
    assert_eq!(log.matches("answered 40 items").count(), 2, "{log}");
    assert!(log.contains("plaintexts: 0 B in memory"), "{log}");
    assert!(std::fs::read_dir(&db).unwrap().any(|e| e.unwrap().file_name().to_string_lossy().starts_with("ROWS-")));
    // Neither took a session's place: the hostile one is refused for its first frame,
    // the slow one is still waiting for its hello when the server stops (and is counted).
    assert_eq!(log.matches("error:").count(), 0, "{log}");
    assert!(log.contains("refused before its hello: its first message does not open a session"), "{log}");
    assert!(log.contains("2 connections refused before their hello"), "{log}");
    drop(slow);
}

/// A database of rows keyed by two columns answers receivers that join the same two
/// columns, and refuses one that joins one (the key-column count is in the hello).
#[test]
fn unbalanced_with_two_key_columns() {
    let dir = tempfile::tempdir().unwrap();
    let s: String =
        std::iter::once("first,last\n".to_string()).chain((0..500).map(|i| format!("f{i},l{}\n", i % 7))).collect();
    let s = write(dir.path(), "s.csv", &s);
    let db = dir.path().join("s.db");
    let o = bin()
        .args(["db", "build", "--input", s.to_str().unwrap(), "--key", "first,last", "--out", db.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let info = text(&bin().args(["db", "info", "--db", db.to_str().unwrap()]).output().unwrap().stdout);
    assert!(info.contains("key columns:         2"), "{info}");
    // f3,l3 and f10,l3 are rows of the sender; f4,l0 is not (f4 has l4).
    let r = write(dir.path(), "r.csv", "first,last\nf3,l3\nf4,l0\nf10,l3\n");
    let out = dir.path().join("out.csv");
    let d = db.to_str().unwrap();
    let (so, ro) = pair(
        &["--protocol", "unbalanced", "--db", d],
        &[
            "--protocol",
            "unbalanced",
            "--input",
            r.to_str().unwrap(),
            "--key",
            "first,last",
            "--output",
            out.to_str().unwrap(),
        ],
    );
    assert!(so.status.success() && ro.status.success(), "{}{}", text(&so.stderr), text(&ro.stderr));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "first,last\nf3,l3\nf10,l3\n");
    let (so, ro) = pair(
        &["--protocol", "unbalanced", "--db", d],
        &["--protocol", "unbalanced", "--input", r.to_str().unwrap(), "--key", "first"],
    );
    assert_eq!((so.status.code(), ro.status.code()), (Some(3), Some(3)));
    assert!(text(&ro.stderr).contains("key_columns=1"), "{}", text(&ro.stderr));
}

/// Connections that never complete a session do not count towards `--sessions`: after
/// three junk connections the sender still answers its two real receivers, then exits.
#[test]
fn junk_connections_do_not_count_as_sessions() {
    use std::io::Write as _;
    let dir = tempfile::tempdir().unwrap();
    let s: String = std::iter::once("id\n".to_string()).chain((0..200).map(|i| format!("u{i}\n"))).collect();
    let s = write(dir.path(), "s.csv", &s);
    let db = dir.path().join("s.db");
    let o =
        bin().args(["db", "build", "--input", s.to_str().unwrap(), "--out", db.to_str().unwrap()]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let addr = free_port();
    let args = ["sender", "--protocol", "unbalanced", "--db", db.to_str().unwrap(), "--listen", &addr];
    let sender = spawn(&[&args[..], &["--sessions", "2", "--timeout", "5"]].concat());
    let connect = || loop {
        match std::net::TcpStream::connect(&addr) {
            Ok(s) => break s,
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(50)),
        }
    };
    for junk in [&b"GET / HTTP/1.1\r\n\r\n"[..], &[0xff; 8], &[]] {
        let mut c = connect();
        let _ = c.write_all(junk);
        drop(c);
    }
    let r = write(dir.path(), "r.csv", "id\nu3\nnope\n");
    for k in 0..2 {
        let out = dir.path().join(format!("out{k}.csv"));
        let o = bin()
            .args(["receiver", "--protocol", "unbalanced", "--input", r.to_str().unwrap(), "--connect", &addr])
            .args(["--connect-timeout", "10", "--output", out.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(o.status.success(), "receiver {k}: {}", text(&o.stderr));
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "id\nu3\n");
    }
    let so = sender.wait_with_output().unwrap();
    assert!(so.status.success(), "{}", text(&so.stderr));
    assert_eq!(text(&so.stderr).matches("answered 2 items").count(), 2, "{}", text(&so.stderr));
}

/// `db build --params` naming neither a preset nor a file is refused before the input
/// is read (at 2^24 the reading took 3 s first): here the input does not exist, and the
/// error is about the parameters.
#[test]
fn an_unknown_parameter_set_is_refused_before_the_input_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let (input, db) = (dir.path().join("missing.csv"), dir.path().join("s.db"));
    let args = ["db", "build", "--input", s(&input), "--params", "16M-1O24", "--out", s(&db)];
    let o = bin().args(args).output().unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("16M-1O24") && !err.contains("missing.csv"), "{err}");
    assert!(!db.exists());
}

/// `db strip` moves the OPRF key out of the directory: the sender then needs
/// `--key-file`, and says so.
#[test]
fn a_database_with_its_key_apart() {
    let dir = tempfile::tempdir().unwrap();
    let s: String = std::iter::once("id\n".to_string()).chain((0..300).map(|i| format!("u{i}\n"))).collect();
    let s = write(dir.path(), "s.csv", &s);
    let (db, key) = (dir.path().join("s.db"), dir.path().join("s.key"));
    let (d, k) = (db.to_str().unwrap(), key.to_str().unwrap());
    let o = bin().args(["db", "build", "--input", s.to_str().unwrap(), "--out", d]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = bin().args(["db", "strip", "--db", d, "--key-file", k]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let info = text(&bin().args(["db", "info", "--db", d]).output().unwrap().stdout);
    assert!(info.contains("kept apart"), "{info}");
    let o = bin().args(["sender", "--protocol", "unbalanced", "--db", d, "--listen", "127.0.0.1:1"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--key-file"), "{}", text(&o.stderr));
    let r = write(dir.path(), "r.csv", "id\nu7\nzz\n");
    let out = dir.path().join("out.csv");
    let (so, ro) = pair(
        &["--protocol", "unbalanced", "--db", d, "--key-file", k],
        &["--protocol", "unbalanced", "--input", r.to_str().unwrap(), "--output", out.to_str().unwrap()],
    );
    assert!(so.status.success() && ro.status.success(), "{}{}", text(&so.stderr), text(&ro.stderr));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "id\nu7\n");
}

#[test]
fn judge_client_and_server_as_three_processes() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let list = |r: std::ops::Range<usize>| -> String {
        std::iter::once("item\n".to_string()).chain(r.map(|i| format!("x{i}\n"))).collect()
    };
    write(dir.path(), "allow.csv", &list(0..40));
    write(dir.path(), "x.csv", &list(0..30));
    write(dir.path(), "x2.csv", &list(30..50));
    write(dir.path(), "y.csv", &list(20..70));
    let judge_addr = free_port();
    let judge = spawn(&[
        "judge",
        "--listen",
        &judge_addr,
        "--allow",
        &p("allow.csv"),
        "--public-key",
        &p("judge.pub"),
        "--secret-key",
        &p("judge.key"),
        "--fraction",
        "0.5",
        "--sessions",
        "3",
    ]);
    let auth = |input: &str, creds: &str, partial: bool| {
        let mut args = vec![
            "authorize",
            "--connect",
            &judge_addr,
            "--input",
            input,
            "--client-id",
            "alice",
            "--credentials",
            creds,
        ];
        if partial {
            args.push("--partial");
        }
        bin().args(&args).output().unwrap()
    };
    let (x, x2, full, part, mixed) = (p("x.csv"), p("x2.csv"), p("full.bin"), p("partial.bin"), p("mixed.bin"));
    let o = auth(&x, &full, false);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = auth(&x, &part, true);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // x30..x49: x40.. are not allowed; full mode signs x30..x39 only.
    let o = auth(&x2, &mixed, false);
    assert!(text(&o.stderr).contains("10 of 20 items signed"), "{}", text(&o.stderr));
    let jo = judge.wait_with_output().unwrap();
    let log = text(&jo.stderr);
    assert!(log.contains("(Partial): signed 30, refused 0, opened 15"), "{log}");

    for (protocol, creds, input, expected) in
        [("authorized", &full, &x, 20..30), ("partial", &part, &x, 20..30), ("authorized", &mixed, &x2, 30..40)]
    {
        let out = p("out.csv");
        let (so, ro) = pair(
            &["--protocol", protocol, "--judge-key", &p("judge.pub"), "--client-id", "alice", "--input", &p("y.csv")],
            &["--protocol", protocol, "--credentials", creds, "--input", input, "--output", &out],
        );
        assert!(so.status.success(), "{}", text(&so.stderr));
        assert!(ro.status.success(), "{}", text(&ro.stderr));
        assert_eq!(std::fs::read_to_string(&out).unwrap(), list(expected), "{protocol}");
    }
    // Another client's identity at the server: a named parameter mismatch.
    let (so, ro) = pair(
        &["--protocol", "authorized", "--judge-key", &p("judge.pub"), "--client-id", "bob", "--input", &p("y.csv")],
        &["--protocol", "authorized", "--credentials", &full, "--input", &x],
    );
    assert_eq!(so.status.code(), Some(3));
    assert!(
        text(&ro.stderr).contains("parameters: this side has key_columns=1;client_id=616c696365"),
        "{}",
        text(&ro.stderr)
    );
}

#[test]
fn labelled_lookup_appends_sender_columns() {
    let dir = tempfile::tempdir().unwrap();
    let s: String = std::iter::once("id,name,city\n".to_string())
        .chain((0..500).map(|i| format!("u{i},Name {i},Zürich-{}\n", i % 3)))
        .collect();
    let s = write(dir.path(), "s.csv", &s);
    let db = dir.path().join("s.db");
    let o = bin()
        .args([
            "db",
            "build",
            "--input",
            s.to_str().unwrap(),
            "--key",
            "id",
            "--label",
            "name,city",
            "--out",
            db.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let r = write(dir.path(), "r.csv", "id,name\nu7,mine\nzz,other\nu499,x\n");
    let out = dir.path().join("out.csv");
    let (so, ro) = pair(
        &["--protocol", "unbalanced", "--db", db.to_str().unwrap()],
        &["--protocol", "unbalanced", "--input", r.to_str().unwrap(), "--key", "id", "--output", out.to_str().unwrap()],
    );
    assert!(so.status.success(), "{}", text(&so.stderr));
    assert!(ro.status.success(), "{}", text(&ro.stderr));
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "id,name,sender.name,city\nu7,mine,Name 7,Zürich-1\nu499,x,Name 499,Zürich-1\n"
    );
}

/// A build killed with SIGKILL once it has written a bundle is refused until resumed;
/// `--resume` reuses what it wrote and the database answers with the right labels.
#[test]
fn a_killed_build_resumes_and_answers_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let s: String =
        std::iter::once("id,name\n".to_string()).chain((0..60000).map(|i| format!("u{i},n{i}\n"))).collect();
    let s = write(dir.path(), "s.csv", &s);
    let db = dir.path().join("s.db");
    let args = ["db", "build", "--input", s.to_str().unwrap(), "--key", "id", "--label", "name"];
    let args = [&args[..], &["--receiver-max", "64", "--out", db.to_str().unwrap(), "-q"]].concat();
    let mut child = bin().args(&args).stderr(std::process::Stdio::null()).spawn().unwrap();
    let segments = || {
        std::fs::read_dir(&db)
            .map_or(0, |d| d.flatten().filter(|e| e.file_name().to_string_lossy().starts_with("seg-")).count())
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    while segments() == 0 {
        assert!(child.try_wait().unwrap().is_none(), "the build ended before it wrote a bundle");
        assert!(std::time::Instant::now() < deadline, "no bundle written in 300 s");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!db.join("MANIFEST").exists(), "the build finished before it was killed");
    let refused = bin().args(&args).output().unwrap();
    assert!(!refused.status.success() && text(&refused.stderr).contains("--resume"), "{}", text(&refused.stderr));
    let resumed = bin().args(&args).arg("--resume").output().unwrap();
    let err = text(&resumed.stderr);
    assert!(resumed.status.success(), "{err}");
    assert!(err.contains("resumed: reused the OPRF results and"), "{err}");
    let r = write(dir.path(), "r.csv", "id\nu7\nzz\nu59999\n");
    let out = dir.path().join("out.csv");
    let (so, ro) = pair(
        &["--protocol", "unbalanced", "--db", db.to_str().unwrap()],
        &["--protocol", "unbalanced", "--input", r.to_str().unwrap(), "--key", "id", "--output", out.to_str().unwrap()],
    );
    assert!(so.status.success() && ro.status.success(), "{}{}", text(&so.stderr), text(&ro.stderr));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "id,name\nu7,n7\nu59999,n59999\n");
}

#[test]
fn mqrpmt_intersection_over_tcp() {
    small_intersection_over_tcp("mqrpmt");
}

/// Reads a CSV file written by setwise into its header and rows.
fn read_csv(p: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let text = std::fs::read_to_string(p).unwrap();
    let mut lines = text.lines().map(|l| l.split(',').map(str::to_string).collect::<Vec<_>>());
    (lines.next().unwrap(), lines.collect())
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// Every mqRPMT operation but intersection as two processes: sender k0..k149 with an
/// amount (k7 on two rows), receiver k100..k219; common k100..k149.
#[test]
fn mqrpmt_operations_over_tcp() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = "id,amount\n".to_string();
    for i in 0..150 {
        s += &format!("k{i},{}\n", i * 10);
    }
    s += "k120,5\n"; // a second row for k120: its values add up
    let r: String = std::iter::once("id\n".to_string()).chain((100..220).map(|i| format!("k{i}\n"))).collect();
    let (s, r) = (write(dir.path(), "s.csv", &s), write(dir.path(), "r.csv", &r));
    let (s, r) = (s.to_str().unwrap(), r.to_str().unwrap());
    let common: std::collections::BTreeSet<String> = (100..150).map(|i| format!("k{i}")).collect();
    let mq = |op: &'static str| ["--protocol", "mqrpmt", "--op", op];

    // sum: the sender holds the amounts and learns the sum; the receiver the count.
    let (so, ro) = pair(
        &[&mq("sum")[..], &["--input", s, "--key", "id", "--value", "amount"]].concat(),
        &[&mq("sum")[..], &["--input", r]].concat(),
    );
    assert!(so.status.success() && ro.status.success(), "{}{}", text(&so.stderr), text(&ro.stderr));
    let want_sum: u64 = (100..150).map(|i| i * 10).sum::<u64>() + 5;
    assert_eq!(text(&so.stdout).trim(), format!("{{\"cardinality\":50,\"sum\":\"{want_sum}\"}}"));
    assert_eq!(text(&ro.stdout).trim(), "50");

    // sum --sum-to receiver (reverse; auto runs mqrpmt for it): the
    // receiver prints the count and the sum, the sender learns nothing.
    let (so, ro) = pair(
        &[
            "--protocol",
            "auto",
            "--op",
            "sum",
            "--sum-to",
            "receiver",
            "--input",
            s,
            "--key",
            "id",
            "--value",
            "amount",
        ],
        &["--protocol", "auto", "--op", "sum", "--sum-to", "receiver", "--input", r],
    );
    assert!(so.status.success() && ro.status.success(), "{}{}", text(&so.stderr), text(&ro.stderr));
    assert_eq!(text(&ro.stdout).trim(), format!("{{\"cardinality\":50,\"sum\":\"{want_sum}\"}}"));
    assert_eq!(text(&so.stdout).trim(), "");
    assert!(text(&so.stderr).contains("learned nothing"), "{}", text(&so.stderr));
    // Only one side asking for it: both refuse, naming the setting.
    let (so, ro) = pair(
        &[&mq("sum")[..], &["--input", s, "--key", "id", "--value", "amount"]].concat(),
        &[&mq("sum")[..], &["--input", r, "--sum-to", "receiver"]].concat(),
    );
    assert!(!so.status.success() && !ro.status.success());
    assert!(text(&ro.stderr).contains("sum_to=receiver"), "{}", text(&ro.stderr));

    // union: the receiver writes the keys of X ∪ Y; the shuffle last move.
    let out = dir.path().join("union.csv");
    let (so, ro) = pair(
        &[&mq("union")[..], &["--input", s, "--last-move", "shuffle"]].concat(),
        &[&mq("union")[..], &["--input", r, "--last-move", "shuffle", "--output", out.to_str().unwrap()]].concat(),
    );
    assert!(so.status.success() && ro.status.success(), "{}{}", text(&so.stderr), text(&ro.stderr));
    let (header, rows) = read_csv(&out);
    assert_eq!(header, ["id"]);
    let got: std::collections::BTreeSet<String> = rows.into_iter().map(|r| r[0].clone()).collect();
    assert_eq!(got, (0..220).map(|i| format!("k{i}")).collect());

    // shares: the two files recombine, row by row, to exactly X ∩ Y.
    let (sf, rf) = (dir.path().join("s.shares"), dir.path().join("r.shares"));
    let (so, ro) = pair(
        &[&mq("shares")[..], &["--input", s, "--output", sf.to_str().unwrap()]].concat(),
        &[&mq("shares")[..], &["--input", r, "--output", rf.to_str().unwrap()]].concat(),
    );
    assert!(so.status.success() && ro.status.success(), "{}{}", text(&so.stderr), text(&ro.stderr));
    let ((sh, srows), (rh, rrows)) = (read_csv(&sf), read_csv(&rf));
    assert_eq!(
        (sh, rh),
        (vec!["row".into(), "share".into(), "id".into()], vec!["row".into(), "member".into(), "share".into()])
    );
    assert_eq!((srows.len(), rrows.len()), (150, 150));
    let mut got = std::collections::BTreeSet::new();
    for (a, b) in srows.iter().zip(&rrows) {
        let joint: Vec<u8> = unhex(&a[1]).iter().zip(unhex(&b[2])).map(|(x, y)| x ^ y).collect();
        let len = joint[0] as usize;
        assert_eq!(b[1] == "1", len > 0, "the member column says which rows hold an item");
        if len > 0 {
            let item = String::from_utf8(joint[1..1 + len].to_vec()).unwrap();
            assert_eq!(item, a[2], "the sender's file names its own key behind the row");
            got.insert(item);
        }
    }
    assert_eq!(got, common);

    // private-id: equal keys get equal IDs; both write the same union list.
    let (so_, ro_, su, ru) =
        (dir.path().join("s.ids"), dir.path().join("r.ids"), dir.path().join("s.union"), dir.path().join("r.union"));
    let (so, ro) = pair(
        &[
            &mq("private-id")[..],
            &["--input", s, "--output", so_.to_str().unwrap(), "--union-ids", su.to_str().unwrap()],
        ]
        .concat(),
        &[
            &mq("private-id")[..],
            &["--input", r, "--output", ro_.to_str().unwrap(), "--union-ids", ru.to_str().unwrap()],
        ]
        .concat(),
    );
    assert!(so.status.success() && ro.status.success(), "{}{}", text(&so.stderr), text(&ro.stderr));
    assert_eq!(std::fs::read_to_string(&su).unwrap(), std::fs::read_to_string(&ru).unwrap());
    let union = read_csv(&su).1;
    assert_eq!(union.len(), 220);
    let ids = |p: &Path| -> std::collections::HashMap<String, String> {
        let (h, rows) = read_csv(p);
        assert_eq!(h.last().unwrap(), "private_id");
        rows.into_iter().map(|r| (r[0].clone(), r.last().unwrap().clone())).collect()
    };
    let (sid, rid) = (ids(&so_), ids(&ro_));
    for k in &common {
        assert_eq!(sid[k], rid[k], "{k}");
    }
    assert!(rid.iter().filter(|(k, _)| !common.contains(*k)).all(|(_, id)| !sid.values().any(|v| v == id)));

    // A sum sender without values, or with a value above the bound, stops with exit 2.
    let o = bin()
        .args(["sender", "--listen", "127.0.0.1:1", "--protocol", "mqrpmt", "--op", "sum", "--input", s])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--value COLUMN"), "{}", text(&o.stderr));
    let args = ["sender", "--listen", "127.0.0.1:1", "--protocol", "mqrpmt", "--op", "sum", "--input", s];
    let o = bin().args(args).args(["--value", "amount", "--value-bound", "1000"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("above --value-bound 1000"), "{}", text(&o.stderr));
}

/// `--rpmt poprf` alone (its last move follows) on both sides, as two processes; with an
/// explicit Bloom filter it stops with exit 2 before waiting for a peer.
#[test]
fn mqrpmt_poprf_over_tcp() {
    let dir = tempfile::tempdir().unwrap();
    let s: String = std::iter::once("id\n".to_string()).chain((0..150).map(|i| format!("k{i}\n"))).collect();
    let r: String = std::iter::once("id\n".to_string()).chain((100..220).map(|i| format!("k{i}\n"))).collect();
    let (s, r) = (write(dir.path(), "s.csv", &s), write(dir.path(), "r.csv", &r));
    let (s, r) = (s.to_str().unwrap(), r.to_str().unwrap());
    let mq = |op: &'static str| ["--protocol", "mqrpmt", "--rpmt", "poprf", "--op", op];
    let (so, ro) =
        pair(&[&mq("cardinality")[..], &["--input", s]].concat(), &[&mq("cardinality")[..], &["--input", r]].concat());
    assert!(so.status.success() && ro.status.success(), "{}{}", text(&so.stderr), text(&ro.stderr));
    assert_eq!(text(&ro.stdout).trim(), "50");
    let out = dir.path().join("union.csv");
    let (so, ro) = pair(
        &[&mq("union")[..], &["--input", s]].concat(),
        &[
            &mq("union")[..],
            &["--input", r, "--output", out.to_str().unwrap(), "--report", dir.path().join("r.json").to_str().unwrap()],
        ]
        .concat(),
    );
    assert!(so.status.success() && ro.status.success(), "{}{}", text(&so.stderr), text(&ro.stderr));
    let got: std::collections::BTreeSet<String> = read_csv(&out).1.into_iter().map(|r| r[0].clone()).collect();
    assert_eq!(got, (0..220).map(|i| format!("k{i}")).collect());
    let report = std::fs::read_to_string(dir.path().join("r.json")).unwrap();
    assert!(report.contains("rpmt=poprf;last_move=shuffle"), "{report}");

    let args = ["sender", "--listen", "127.0.0.1:1", "--protocol", "mqrpmt", "--rpmt", "poprf", "--input", s];
    let o = bin().args(args).args(["--last-move", "bloom"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("poprf construction has no Bloom-filter last move"), "{}", text(&o.stderr));
}

/// Any sender can serve many sessions (here ecdh, with a client that hangs up before its
/// hello between two good ones: refused, not a failed session); SIGTERM stops it
/// accepting and it exits 0 once the running sessions end.
/// Runs receiver `k` on `input` against the sender at `addr`, asserts it succeeded and
/// returns its output file (in `dir`).
fn receive_from(dir: &Path, input: &Path, addr: &str, k: usize) -> std::path::PathBuf {
    let out = dir.join(format!("out{k}.csv"));
    let o = bin().args(["receiver", "--input", s(input), "--connect", addr, "--output", s(&out)]).output().unwrap();
    assert!(o.status.success(), "receiver {k}: {}", text(&o.stderr));
    out
}

#[test]
fn a_sender_serves_many_sessions_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let s = write(dir.path(), "s.csv", "id\na\nb\nc\nd\n");
    let r = write(dir.path(), "r.csv", "id\nb\nd\nx\n");
    let addr = free_port();
    let sender = spawn(&["sender", "--input", s.to_str().unwrap(), "--listen", &addr, "--sessions", "0"]);
    let receive = |k: usize| {
        let out = receive_from(dir.path(), &r, &addr, k);
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "id\nb\nd\n");
    };
    receive(0);
    drop(std::net::TcpStream::connect(&addr).unwrap()); // a client that hangs up at once
    receive(1);
    let kill = Command::new("kill").args(["-TERM", &sender.id().to_string()]).status().unwrap();
    assert!(kill.success());
    let so = sender.wait_with_output().unwrap();
    let log = text(&so.stderr);
    assert!(so.status.success(), "{log}");
    assert_eq!(log.matches("): answered 3 items in").count(), 2, "{log}");
    assert!(log.contains("stopping: no new sessions"), "{log}");
    assert!(log.contains("0 failed") && log.contains("1 connections refused before their hello"), "{log}");
}

/// A two-party run with reports from both sides, rendered as one page.
#[test]
fn report_page_shows_both_parties_and_escapes_what_it_shows() {
    let dir = tempfile::tempdir().unwrap();
    let s = write(dir.path(), "s.csv", "id\na\nb\nc\nd\n");
    let r = write(dir.path(), "r.csv", "id\nb\nc\ne\n");
    let (sj, rj) = (dir.path().join("s.json"), dir.path().join("r.json"));
    let (so, ro) = pair(
        &["--input", s.to_str().unwrap(), "--report", sj.to_str().unwrap(), "--quiet"],
        &["--input", r.to_str().unwrap(), "--report", rj.to_str().unwrap(), "--report-results", "--quiet"],
    );
    assert!(so.status.success() && ro.status.success(), "{} {}", text(&so.stderr), text(&ro.stderr));
    assert_eq!(text(&ro.stderr), "", "--quiet prints nothing on success");
    let html = dir.path().join("run.html");
    let page = |run: &Path, peer: Option<&Path>| {
        let mut args = vec!["report", run.to_str().unwrap(), "--html", html.to_str().unwrap()];
        if let Some(p) = peer {
            args.extend(["--peer", p.to_str().unwrap()]);
        }
        let out = bin().args(&args).output().unwrap();
        (out.status.code(), text(&out.stderr), std::fs::read_to_string(&html).unwrap_or_default())
    };
    let (code, err, h) = page(&rj, Some(&sj));
    assert_eq!(code, Some(0), "{err}");
    for want in [
        "setwise ecdh intersection",
        "Timeline",
        "Phases of the receiver",
        "Phases of the sender",
        "blind and send own items",
        "re-blind and send",
        "3 items",
        "4 items",
        "intersection size</td><td class=\"n\">2<",
        "Both parties learn how many items the other holds",
        "<svg",
    ] {
        assert!(h.contains(want), "page lacks {want:?}");
    }
    assert!(!h.contains("http://") && !h.contains("https://") && !h.contains("<script"), "self-contained, no script");

    // Strings in a report are the peer's words: all escaped.
    let mut json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&sj).unwrap()).unwrap();
    json["phases"][0]["name"] = "<script>alert(1)</script>".into();
    json["details"] = serde_json::json!({"<b>k": "\"><img src=x onerror=alert(2)>"});
    json["peer_identity"] = "O'Brien & <Co>".into();
    let hostile = write(dir.path(), "hostile.json", &json.to_string());
    let (code, err, h) = page(&hostile, None);
    assert_eq!(code, Some(0), "{err}");
    assert!(!h.contains("<script") && !h.contains("<img") && !h.contains("<b>"), "unescaped markup");
    assert!(h.contains("&lt;script&gt;alert(1)&lt;/script&gt;") && h.contains("O&#39;Brien &amp; &lt;Co&gt;"));

    // Damaged or mismatched reports: a clear error, exit 2, no page.
    std::fs::remove_file(&html).unwrap();
    let full = std::fs::read_to_string(&rj).unwrap();
    let cut = write(dir.path(), "cut.json", &full[..full.len() / 2]);
    let (code, err, _) = page(&cut, None);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("cut.json: not a setwise run report") && !err.contains("panicked"), "{err}");
    let negative = write(dir.path(), "neg.json", &full.replacen("\"total_ms\":", "\"total_ms\": -1, \"x\":", 1));
    let (code, err, _) = page(&negative, None);
    assert_eq!(code, Some(2), "{err}");
    let (code, err, _) = page(&rj, Some(&rj));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("not of the same run"), "{err}");
    assert!(!html.exists());
}

/// `RUST_LOG` turns on structured lines for each phase and finished transfer; without
/// it a run prints only its summary.
#[test]
fn rust_log_gives_structured_lines_and_nothing_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = write(dir.path(), "s.txt", "a\nb\nc\n");
    let r = write(dir.path(), "r.txt", "b\nc\nd\n");
    let addr = free_port();
    let sender = bin()
        .args(["sender", "--listen", &addr, "--input", s.to_str().unwrap()])
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ro = bin()
        .args(["receiver", "--connect", &addr, "--input", r.to_str().unwrap()])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let so = sender.wait_with_output().unwrap();
    assert!(so.status.success() && ro.status.success());
    let logged = text(&so.stderr);
    // The ecdh sender's "blind own items" is metered: its 3 items computed.
    let wants = [
        "phase starts",
        "role=sender",
        "phase=\"hello\"",
        "transfer done",
        "records=3",
        "run=1",
        "computation done",
        "items=3",
    ];
    for want in wants {
        assert!(logged.contains(want), "{want:?} not in {logged}");
    }
    assert!(!logged.contains('\u{1b}'), "no colours off a terminal");
    let quiet = text(&ro.stderr);
    assert!(!quiet.contains("phase starts") && quiet.starts_with("receiver: intersection size 2"), "{quiet}");
}

/// The man pages in docs/man are what `setwise man` writes from the CLI's definition
/// now: a flag added, renamed or re-described without regenerating them fails here.
#[test]
fn the_man_pages_in_docs_are_the_clis_own() {
    let dir = tempfile::tempdir().unwrap();
    let o = bin().args(["man", dir.path().to_str().unwrap()]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/man");
    let names = |d: &Path| {
        let mut v: Vec<String> =
            std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    };
    let stale = "docs/man is stale: run `setwise man docs/man` and commit the pages";
    assert_eq!(names(dir.path()), names(&docs), "{stale}");
    for name in names(dir.path()) {
        let (now, kept) = (std::fs::read(dir.path().join(&name)).unwrap(), std::fs::read(docs.join(&name)).unwrap());
        assert!(now == kept, "{name}: {stale}");
    }
    let stage_run = std::fs::read_to_string(docs.join("setwise-stage-run.1")).unwrap();
    assert!(stage_run.contains("sum\\-to") && stage_run.contains(".TH setwise-stage-run 1"), "{stage_run}");
}

/// `setwise completions SHELL` prints a script for each shell that knows the
/// subcommands and their flags; an unknown shell is refused naming the ones there are.
#[test]
fn completions_are_printed_for_each_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let o = bin().args(["completions", shell]).output().unwrap();
        let script = text(&o.stdout);
        assert!(o.status.success() && script.contains("receiver") && script.contains("sum-to"), "{shell}");
    }
    let o = bin().args(["completions", "tcsh"]).output().unwrap();
    assert!(!o.status.success() && text(&o.stderr).contains("bash"), "{}", text(&o.stderr));
}

/// GETs `path` from `addr` over HTTP/1.0; the status and the body.
fn http_get(addr: &str, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut s = loop {
        match std::net::TcpStream::connect(addr) {
            Ok(s) => break s,
            // The endpoint may not listen yet.
            Err(_) if std::time::Instant::now() < deadline => std::thread::sleep(std::time::Duration::from_millis(50)),
            Err(e) => panic!("{addr}: {e}"),
        }
    };
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    let status = reply.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = reply.split_once("\r\n\r\n").map_or(String::new(), |(_, b)| b.to_string());
    (status, body)
}

/// A serving sender's --metrics endpoint, scraped during the run: the completed
/// sessions, the refused connection and why, the traffic and the items the receivers
/// announced are counted; /health answers.
#[test]
fn a_serving_sender_counts_its_sessions_in_its_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let s = write(dir.path(), "s.csv", "id\na\nb\nc\nd\n");
    let r = write(dir.path(), "r.csv", "id\nb\nd\nx\n");
    let (addr, metrics) = (free_port(), free_port());
    let sender =
        spawn(&["sender", "--input", s.to_str().unwrap(), "--listen", &addr, "--sessions", "0", "--metrics", &metrics]);
    assert_eq!(http_get(&metrics, "/health"), (200, "ok\n".to_string()));
    let before = http_get(&metrics, "/metrics").1;
    assert!(before.contains("setwise_sessions_total{result=\"completed\"} 0"), "{before}");
    for k in 0..2 {
        receive_from(dir.path(), &r, &addr, k);
    }
    drop(std::net::TcpStream::connect(&addr).unwrap()); // hangs up before its hello
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let body = loop {
        let (status, body) = http_get(&metrics, "/metrics");
        assert_eq!(status, 200);
        let settled = ["reason=\"closed\"} 1", "result=\"completed\"} 2", "setwise_sessions_running 0"];
        if settled.iter().all(|l| body.contains(l)) || std::time::Instant::now() > deadline {
            break body;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    for line in [
        "setwise_info{version=",
        "role=\"sender\",protocol=\"ecdh\"",
        "setwise_sessions_total{result=\"completed\"} 2",
        "setwise_sessions_total{result=\"failed\"} 0",
        "setwise_sessions_running 0",
        "setwise_connections_refused_total{reason=\"closed\"} 1",
        "setwise_session_duration_seconds_count 2",
        "setwise_peer_items_total 6",
    ] {
        assert!(body.contains(line), "{line} in:\n{body}");
    }
    let sent: u64 = body.lines().find_map(|l| l.strip_prefix("setwise_sent_bytes_total ")).unwrap().parse().unwrap();
    assert!(sent > 0, "{body}");
    assert_eq!(http_get(&metrics, "/nothing").0, 404);
    assert_eq!(http_get(&metrics, "/metrics?x=1").0, 200);
    assert!(Command::new("kill").args(["-TERM", &sender.id().to_string()]).status().unwrap().success());
    let so = sender.wait_with_output().unwrap();
    assert!(so.status.success(), "{}", text(&so.stderr));
}
