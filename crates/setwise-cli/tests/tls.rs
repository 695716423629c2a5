//! TLS 1.3 and mutual TLS between two `setwise` processes, with certificates made by
//! `setwise tls init`: every protocol over mTLS (both parties learning the result where
//! the protocol allows it), and each way a connection should fail
//! (clearly, exit 3) while a listening sender keeps serving.

mod common;

use common::{bin, expected, free_port, items, rows, s, text};

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

/// A directory with a test CA and certificates for alice, bob and (expired) old, and a
/// second CA with mallory.
struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let init = |sub: &str, names: &str, extra: &[&str]| {
            let o =
                bin().args(["tls", "init", s(&dir.path().join(sub)), "--names", names]).args(extra).output().unwrap();
            assert!(o.status.success(), "{}", text(&o.stderr));
        };
        init("pki", "alice,bob", &[]);
        init("pki", "old", &["--not-after", "2021-01-01"]);
        init("other", "mallory", &[]);
        Self { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// `--tls-cert/--tls-key` of `name` (in `pki` or `other`), and the pki CA.
    fn flags(&self, name: &str) -> Vec<String> {
        let sub = if name == "mallory" { "other" } else { "pki" };
        vec![
            "--tls-cert".into(),
            s(&self.path(&format!("{sub}/{name}.pem"))).into(),
            "--tls-key".into(),
            s(&self.path(&format!("{sub}/{name}.key"))).into(),
            "--tls-ca".into(),
            s(&self.path("pki/ca.pem")).into(),
        ]
    }
}

#[test]
fn every_protocol_over_mutual_tls() {
    let pki = Pki::new();
    let dir = pki.path("");
    let (sr, rr) = (0..60, 40..90);
    let (sx, rx) = (items(&dir, "s.csv", sr.clone()), items(&dir, "r.csv", rr.clone()));
    let db = dir.join("s.db");
    let o = bin().args(["db", "build", "--input", s(&sx), "--out", s(&db)]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    for protocol in ["ecdh", "mqrpmt", "fhe", "compact", "unbalanced"] {
        let addr = free_port();
        let input: Vec<&str> = if protocol == "unbalanced" { vec!["--db", s(&db)] } else { vec!["--input", s(&sx)] };
        // Both learn where the protocol allows it: the sender writes its rows too.
        let sender_out = dir.join(format!("{protocol}-sender.csv"));
        let both: Vec<&str> =
            if protocol == "unbalanced" { vec![] } else { vec!["--reveal", "both", "--output", s(&sender_out)] };
        let sender = bin()
            .args(["sender", "--protocol", protocol, "--listen", &addr])
            .args(&input)
            .args(&both)
            .args(pki.flags("alice"))
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = dir.join(format!("{protocol}.csv"));
        let r = bin()
            .args(["receiver", "--protocol", protocol, "--connect", &addr, "--input", s(&rx), "--output", s(&out)])
            .args(if both.is_empty() { &[][..] } else { &["--reveal", "both"][..] })
            .args(pki.flags("bob"))
            .args(["--tls-server-name", "alice", "--peer-name", "alice", "-v"])
            .output()
            .unwrap();
        let so = sender.wait_with_output().unwrap();
        assert!(r.status.success(), "{protocol} receiver: {}", text(&r.stderr));
        assert!(so.status.success(), "{protocol} sender: {}", text(&so.stderr));
        assert_eq!(rows(&out), expected(sr.clone(), rr.clone()), "{protocol}");
        if !both.is_empty() {
            assert_eq!(rows(&sender_out), expected(sr.clone(), rr.clone()), "{protocol} sender");
        }
        assert!(text(&r.stderr).contains("peer (TLS certificate): alice"), "{protocol}: {}", text(&r.stderr));
    }
}

/// Runs a receiver with `flags` against `addr`; it must fail with exit 3 and say `want`.
fn refused(addr: &str, rx: &Path, flags: &[String], want: &str) {
    let o: Output = bin()
        .args(["receiver", "--protocol", "unbalanced", "--connect", addr, "--input", s(rx), "--connect-timeout", "10"])
        .args(flags)
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{want}: {err}");
    assert!(err.contains(want), "want {want:?}, got: {err}");
}

#[test]
fn bad_peers_fail_clearly_and_the_sender_keeps_serving() {
    let pki = Pki::new();
    let dir = pki.path("");
    let (sx, rx) = (items(&dir, "s.csv", 0..100), items(&dir, "r.csv", 90..110));
    let db = dir.join("s.db");
    let o = bin().args(["db", "build", "--input", s(&sx), "--out", s(&db)]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let addr = free_port();
    // Two completed sessions end the sender; the refused ones do not count.
    let sender = bin()
        .args(["sender", "--protocol", "unbalanced", "--db", s(&db), "--listen", &addr, "--sessions", "2"])
        .args(["--timeout", "10"])
        .args(pki.flags("alice"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let to_alice = |mut f: Vec<String>| {
        f.extend(["--tls-server-name".to_string(), "alice".to_string()]);
        f
    };
    let ca_only = vec!["--tls-ca".to_string(), s(&pki.path("pki/ca.pem")).to_string()];
    refused(&addr, &rx, &["--insecure-no-tls".to_string()], "this peer requires TLS");
    refused(&addr, &rx, &to_alice(ca_only.clone()), "does not accept this side's certificate, or requires one");
    refused(&addr, &rx, &to_alice(pki.flags("mallory")), "does not accept this side's certificate");
    refused(&addr, &rx, &to_alice(pki.flags("old")), "CertificateExpired");
    let mut wrong_name = to_alice(pki.flags("bob"));
    wrong_name.extend(["--peer-name".into(), "carol".into()]);
    refused(&addr, &rx, &wrong_name, "the peer's certificate is for alice, not for carol");
    refused(&addr, &rx, &pki.flags("bob"), "not issued for the name this side connected to");

    for k in 0..2 {
        let out = dir.join(format!("out{k}.csv"));
        let r = bin()
            .args(["receiver", "--protocol", "unbalanced", "--connect", &addr, "--input", s(&rx), "--output", s(&out)])
            .args(to_alice(pki.flags("bob")))
            .output()
            .unwrap();
        assert!(r.status.success(), "{}", text(&r.stderr));
        assert_eq!(rows(&out), expected(0..100, 90..110));
    }
    let so = sender.wait_with_output().unwrap();
    let log = text(&so.stderr);
    assert!(so.status.success(), "{log}");
    for want in [
        "the peer speaks plain TCP, not TLS",
        "the peer presented no certificate",
        "not signed by the CA this side trusts",
        "the peer's certificate has expired",
    ] {
        assert!(log.contains(want), "sender log lacks {want:?}: {log}");
    }
}

#[test]
fn a_tls_client_meets_a_plain_listener_and_both_say_so() {
    let pki = Pki::new();
    let dir = pki.path("");
    let (sx, rx) = (items(&dir, "s.csv", 0..10), items(&dir, "r.csv", 5..15));
    let addr = free_port();
    let log = dir.join("sender.log");
    let sender = bin()
        .args(["sender", "--listen", &addr, "--input", s(&sx)])
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let r = bin()
        .args(["receiver", "--connect", &addr, "--input", s(&rx), "--tls-server-name", "alice"])
        .args(pki.flags("bob"))
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(3));
    assert!(text(&r.stderr).contains("the peer speaks plain TCP, not TLS"), "{}", text(&r.stderr));
    // The listener says why it dropped that connection and waits on for a peer that
    // opens a session (an unauthenticated connection cannot end it).
    let start = std::time::Instant::now();
    while !std::fs::read_to_string(&log).unwrap().contains("the peer speaks TLS and this side does not") {
        assert!(start.elapsed() < std::time::Duration::from_secs(20), "{}", std::fs::read_to_string(&log).unwrap());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = dir.join("out.csv");
    let plain = bin().args(["receiver", "--connect", &addr, "--input", s(&rx), "--output", s(&out)]).output().unwrap();
    assert!(plain.status.success(), "{}", text(&plain.stderr));
    assert_eq!(rows(&out), expected(0..10, 5..15));
    let so = sender.wait_with_output().unwrap();
    assert!(so.status.success(), "{}", std::fs::read_to_string(&log).unwrap());
}

#[test]
fn incomplete_tls_flags_are_usage_errors() {
    let pki = Pki::new();
    let dir = pki.path("");
    let rx = items(&dir, "r.csv", 0..3);
    let ca = s(&pki.path("pki/ca.pem")).to_string();
    let listener =
        bin().args(["sender", "--listen", "127.0.0.1:1", "--input", s(&rx), "--tls-ca", &ca]).output().unwrap();
    assert_eq!(listener.status.code(), Some(2));
    assert!(
        text(&listener.stderr)
            .contains("listening with TLS needs a certificate and its key (--tls-cert and --tls-key)")
    );
    let cert = s(&pki.path("pki/bob.pem")).to_string();
    let key = s(&pki.path("pki/bob.key")).to_string();
    let client = bin()
        .args(["receiver", "--connect", "127.0.0.1:1", "--input", s(&rx), "--tls-cert", &cert, "--tls-key", &key])
        .output()
        .unwrap();
    assert_eq!(client.status.code(), Some(2));
    assert!(
        text(&client.stderr)
            .contains("connecting with TLS needs the CA that signed the listener's certificate (--tls-ca)")
    );
}

#[test]
fn plain_tcp_beyond_loopback_needs_an_explicit_flag() {
    let dir = tempfile::tempdir().unwrap();
    let rx = items(dir.path(), "r.csv", 0..3);
    let o = bin().args(["receiver", "--connect", "192.0.2.1:7000", "--input", s(&rx)]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--insecure-no-tls"), "{}", text(&o.stderr));
}

/// Authorised PSI under mutual TLS: the client ID is the certificate's identity. The
/// judge refuses to sign for another ID than the client's certificate names and signs
/// per client from a client column; the server refuses credentials presented by
/// another identity than they were issued to.
#[test]
fn authorised_psi_binds_client_ids_to_certificates() {
    let pki = Pki::new();
    let o = bin().args(["tls", "init", s(&pki.path("pki")), "--names", "judge,carol"]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let dir = pki.path("");
    let p = |n: &str| s(&dir.join(n)).to_string();
    // item0..item29 allowed to bob, item30..item39 to carol only.
    let allow: String = std::iter::once("client,item\n".to_string())
        .chain((0..40).map(|i| format!("{},item{i}\n", if i < 30 { "bob" } else { "carol" })))
        .collect();
    std::fs::write(dir.join("allow.csv"), allow).unwrap();
    let x = items(&dir, "x.csv", 20..40);
    let y = items(&dir, "y.csv", 0..100);
    let judge_addr = free_port();
    let judge = bin()
        .args(["judge", "--listen", &judge_addr, "--allow", &p("allow.csv"), "--key", "item"])
        .args(["--client-column", "client", "--public-key", &p("judge.pub"), "--secret-key", &p("judge.key")])
        .args(["--sessions", "1"])
        .args(pki.flags("judge"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let authorize = |id: &str, creds: &str| {
        bin()
            .args(["authorize", "--connect", &judge_addr, "--input", s(&x), "--client-id", id, "--credentials", creds])
            .args(pki.flags("bob"))
            .args(["--tls-server-name", "judge"])
            .output()
            .unwrap()
    };
    // bob's certificate, carol's ID: refused, and not counted as a session.
    let o = authorize("carol", &p("stolen.bin"));
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("certificate is for bob, but the session is for client ID carol"),
        "{}",
        text(&o.stderr)
    );
    assert!(!dir.join("stolen.bin").exists());
    // bob for bob: item20..item29 signed; item30.. are carol's.
    let o = authorize("bob", &p("bob.bin"));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("10 of 20 items signed"), "{}", text(&o.stderr));
    let jo = judge.wait_with_output().unwrap();
    assert!(jo.status.success(), "{}", text(&jo.stderr));

    let run = |client: &str| {
        let addr = free_port();
        let server = bin()
            .args(["sender", "--protocol", "authorized", "--listen", &addr, "--judge-key", &p("judge.pub")])
            .args(["--client-id", "bob", "--input", s(&y)])
            .args(pki.flags("alice"))
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = dir.join(format!("{client}.csv"));
        let r = bin()
            .args(["receiver", "--protocol", "authorized", "--connect", &addr, "--credentials", &p("bob.bin")])
            .args(["--input", s(&x), "--output", s(&out), "--tls-server-name", "alice"])
            .args(pki.flags(client))
            .output()
            .unwrap();
        (server.wait_with_output().unwrap(), r, out)
    };
    // carol presents bob's credentials: the server refuses.
    let (so, r, _) = run("carol");
    assert_eq!(r.status.code(), Some(3), "{}", text(&r.stderr));
    assert_eq!(so.status.code(), Some(3));
    assert!(
        text(&so.stderr).contains("certificate is for carol, but the session is for client ID bob"),
        "{}",
        text(&so.stderr)
    );
    let (so, r, out) = run("bob");
    assert!(r.status.success() && so.status.success(), "{} {}", text(&r.stderr), text(&so.stderr));
    assert_eq!(rows(&out), (20..30).map(|i| format!("item{i}")).collect());
}

/// A judge whose allow-list names clients needs mutual TLS: with only its own
/// certificate (or none), a client's ID would be whatever it states. Before, such a judge
/// signed carol's items for any anonymous client that said it was carol.
#[test]
fn a_judge_that_names_clients_refuses_to_start_without_mutual_tls() {
    let pki = Pki::new();
    let dir = pki.path("");
    std::fs::write(dir.join("allow.csv"), "client,item\ncarol,item1\n").unwrap();
    let p = |n: &str| s(&dir.join(n)).to_string();
    let (cert, key) = (p("pki/alice.pem"), p("pki/alice.key"));
    for tls in [vec!["--insecure-no-tls"], vec!["--tls-cert", &cert, "--tls-key", &key]] {
        let o = bin()
            .args(["judge", "--listen", &free_port(), "--allow", &p("allow.csv"), "--key", "item"])
            .args(["--client-column", "client", "--public-key", &p("judge.pub"), "--secret-key", &p("judge.key")])
            .args(tls)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
        assert!(text(&o.stderr).contains("--client-column needs mutual TLS"), "{}", text(&o.stderr));
    }
}
