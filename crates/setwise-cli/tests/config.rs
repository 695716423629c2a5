//! `--config FILE` and `SETWISE_CONFIG`: a party's flags from a TOML file.

mod common;

use common::{bin, free_port, s, text, write};
use std::process::Stdio;

/// Sender and receiver run from one file (top-level keys for both, a table each); the
/// receiver finds it through SETWISE_CONFIG and overrides its output on the command line;
/// the key columns come as a list and `verbose` as a switch, and a global flag given before
/// the command's name beats the file's. The rows are the plain intersection's.
#[test]
fn parties_run_from_a_configuration_file_and_flags_override_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "s.csv", "email,name,plan\na@x,Ann,1\nb@x,Bob,2\nc@x,Cy,3\nb@x,Bo,4\n");
    write(d, "r.csv", "name,email\nBob,b@x\nZed,z@x\nCy,c@x\nCy,c@y\n");
    let addr = free_port();
    let config = write(
        d,
        "party.toml",
        &format!(
            "# one file for both parties of a test\nprotocol = \"vole\"\nkey = [\"email\", \"name\"]\nthreads = 1\n\n\
             [sender]\nlisten = \"{addr}\"\ninput = \"s.csv\"\n\n\
             [receiver]\nconnect = \"{addr}\"\ninput = \"r.csv\"\noutput = \"from-config.csv\"\nverbose = true\n"
        ),
    );
    let sender = bin()
        .current_dir(d)
        .args(["sender", "--config", s(&config)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let receiver = bin()
        .current_dir(d)
        .env("SETWISE_CONFIG", s(&config))
        .args(["--threads", "2", "receiver", "--output", "out.csv"])
        .output()
        .unwrap();
    let sender = sender.wait_with_output().unwrap();
    assert!(sender.status.success(), "sender: {}", text(&sender.stderr));
    assert!(receiver.status.success(), "receiver: {}", text(&receiver.stderr));
    // verbose from the file; --threads before the command beats the file's threads = 1.
    let said = text(&receiver.stderr);
    assert!(said.contains("vole intersection") && said.contains(", 2 threads"), "{said}");
    // (b@x, Bob) and (c@x, Cy) are on both sides; (b@x, Bo) and (c@y, Cy) are not.
    assert_eq!(std::fs::read_to_string(d.join("out.csv")).unwrap(), "name,email\nBob,b@x\nCy,c@x\n");
    assert!(!d.join("from-config.csv").exists(), "the flag overrides the file's output");
}

/// Every mistake in the file stops the command before it runs, exit 2, naming the file
/// and the key (or table) at fault.
#[test]
fn configuration_mistakes_name_the_key_and_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases: &[(&str, &str, &[&str])] = &[
        ("protocl = \"vole\"\n", "unknown key `protocl` at the top", &["sender"]),
        ("[sendr]\nlisten = \"127.0.0.1:1\"\n", "unknown table [sendr]", &["sender"]),
        (
            "[db]\nlisten = \"127.0.0.1:1\"\n",
            "unknown key `listen` in [db]: no command under `setwise db`",
            &["db", "build"],
        ),
        ("[receiver]\nreport-results = \"yes\"\n", "`report-results` is a switch", &["receiver"]),
        ("[sender]\nlisten = [\"a\", \"b\"]\n", "`listen` takes one value, not a list", &["sender"]),
        ("config = \"other.toml\"\n", "cannot name another", &["sender"]),
        ("protocol = \"vole\n", "TOML parse error", &["sender"]),
    ];
    for (i, (body, says, command)) in cases.iter().enumerate() {
        let name = format!("bad{i}.toml");
        let file = write(d, &name, body);
        let out = bin().current_dir(d).args(*command).args(["--config", s(&file)]).output().unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{body}: {err}");
        assert!(err.contains(says) && err.contains(&name), "{body}: {err}");
    }
    // A value clap refuses comes with a note naming the file it came from.
    let file = write(d, "value.toml", "protocol = \"nope\"\n");
    let out = bin()
        .current_dir(d)
        .args(["sender", "--input", "x.csv", "--listen", "127.0.0.1:1"])
        .env("SETWISE_CONFIG", s(&file))
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("invalid value 'nope'") && err.contains("value.toml"), "{err}");
    // A missing file is named too.
    let out = bin().args(["sender", "--config", "no-such.toml"]).output().unwrap();
    assert!(out.status.code() == Some(2) && text(&out.stderr).contains("no-such.toml"), "{}", text(&out.stderr));
}

/// The examples in docs/deployment.md are files setwise takes, for every command they
/// have a table or keys for.
#[test]
fn the_deployment_examples_are_valid_configuration_files() {
    let doc = include_str!("../../../docs/deployment.md");
    let blocks: Vec<&str> = doc.split("```toml\n").skip(1).map(|b| b.split("```").next().unwrap()).collect();
    assert!(blocks.len() >= 3, "the examples are in ```toml blocks");
    let dir = tempfile::tempdir().unwrap();
    for (i, block) in blocks.iter().enumerate() {
        let file = write(dir.path(), &format!("example{i}.toml"), block);
        for command in [&["sender"][..], &["receiver"], &["db", "build"]] {
            // --help after the file's flags: clap checks their values first.
            let out = bin().args(command).args(["--config", s(&file), "--help"]).output().unwrap();
            assert!(out.status.success(), "example {i}, {command:?}: {}", text(&out.stderr));
        }
    }
}

/// A flag's environment variable beats the file, and the file beats nothing: the TLS
/// certificate named in the error is the variable's, then the file's.
#[test]
fn environment_variables_override_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "s.csv", "email\na@x\n");
    let file = write(d, "tls.toml", "tls-cert = \"file-cert.pem\"\ntls-key = \"file-key.pem\"\n");
    let run = |env: Option<&str>| {
        let mut cmd = bin();
        cmd.current_dir(d).args(["sender", "--config", s(&file), "--input", "s.csv", "--listen", "127.0.0.1:0"]);
        if let Some(v) = env {
            cmd.env("SETWISE_TLS_CERT", v);
        }
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        text(&out.stderr)
    };
    assert!(run(Some("env-cert.pem")).contains("certificate file env-cert.pem"));
    assert!(run(None).contains("certificate file file-cert.pem"));
}

/// A flag given that excludes one of the file's (`-q` against `verbose = true`) drops the
/// file's instead of failing as a conflict; `--metrics` where nothing is served is refused.
#[test]
fn excluding_flags_drop_the_files_and_metrics_need_a_server() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let file = write(d, "v.toml", "verbose = true\n");
    let out = bin()
        .current_dir(d)
        .args(["sender", "--config", s(&file), "-q", "--input", "missing.csv", "--listen", "127.0.0.1:1"])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("missing.csv") && !err.contains("cannot be used with"), "{err}");
    let out = bin()
        .current_dir(d)
        .args(["sender", "--metrics", "9", "--input", "missing.csv", "--connect", "127.0.0.1:1"])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(out.status.code() == Some(2) && err.contains("--metrics is for a server"), "{err}");
}

/// Top-level keys reach a command two levels down (`db build`) when the file has no
/// table for it.
#[test]
fn top_level_keys_reach_nested_commands() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let file = write(d, "top.toml", "input = \"missing.csv\"\nkey = \"email\"\n");
    let out = bin().current_dir(d).args(["db", "build", "--config", s(&file), "--out", "db"]).output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("missing.csv"), "the file's input reached `db build`: {err}");
}
