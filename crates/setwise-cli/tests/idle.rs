//! Listeners keep answering real peers while dozens of connections that never complete
//! a session are open: idle ones, ones that send one byte, ones that send garbage. Real
//! peers run with a 20 s frame timeout, so a server held by the idle connections (as
//! before the admission limits: a slot was taken at accept, and TLS and the hello each
//! had the 600 s frame timeout) fails them.

mod common;

use common::{bin, expected, free_port, items, rows, s, text};

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

/// A server process, killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a server logging to `log`.
fn serve(args: &[&str], log: &Path) -> Server {
    let log = std::fs::File::create(log).unwrap();
    Server(bin().args(args).stdout(Stdio::null()).stderr(log).spawn().unwrap())
}

/// The server's log so far, for a failure's message.
fn log_of(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Waits until `addr` accepts connections (the server is up).
fn wait_listening(addr: &str) {
    let start = Instant::now();
    while TcpStream::connect(addr).is_err() {
        assert!(start.elapsed() < Duration::from_secs(20), "{addr} never listened");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// 40 idle connections, 20 that send one byte, 12 that send garbage (some of it shaped
/// like a frame announcing 60 MB, some like a TLS record), all left open.
fn pests(addr: &str) -> Vec<TcpStream> {
    let mut open = Vec::new();
    for i in 0..72 {
        let Ok(mut c) = TcpStream::connect(addr) else { continue };
        let _ = match i {
            0..40 => Ok(()),
            40..60 => c.write_all(&[0x16]),
            60..64 => c.write_all(&(60u32 << 20).to_le_bytes()),
            64..68 => c.write_all(&[0x16, 3, 1, 0x40, 0]),
            _ => c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
        };
        open.push(c);
    }
    open
}

/// Runs `setwise receiver` against `addr` with a 20 s frame timeout.
fn receive(addr: &str, input: &Path, out: &Path, extra: &[String]) -> Output {
    bin()
        .args(["receiver", "--protocol", "ecdh", "--connect", addr, "--input", s(input), "--output", s(out)])
        .args(["--timeout", "20", "-q"])
        .args(extra)
        .output()
        .unwrap()
}

/// A throwaway CA with certificates for alice (the server) and bob (the receivers).
fn pki(dir: &Path) -> (Vec<String>, Vec<String>) {
    let o = bin().args(["tls", "init", s(&dir.join("pki")), "--names", "alice,bob"]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let flags = |name: &str| -> Vec<String> {
        ["--tls-cert", &format!("{name}.pem"), "--tls-key", &format!("{name}.key"), "--tls-ca", "ca.pem"]
            .iter()
            .enumerate()
            .map(|(i, f)| if i % 2 == 1 { s(&dir.join("pki").join(f)).to_string() } else { f.to_string() })
            .collect()
    };
    let mut bob = flags("bob");
    bob.extend(["--tls-server-name".into(), "alice".into()]);
    (flags("alice"), bob)
}

fn a_serving_sender_answers_beside_pests(tls: bool) {
    let dir = tempfile::tempdir().unwrap();
    let (alice, bob) = if tls { pki(dir.path()) } else { (Vec::new(), Vec::new()) };
    let x = items(dir.path(), "x.csv", 0..300);
    let addr = free_port();
    let mut args = vec!["sender", "--protocol", "ecdh", "--listen", &addr, "--input", s(&x), "--sessions", "0"];
    args.extend(["--max-concurrent", "2"]);
    args.extend(alice.iter().map(String::as_str));
    let log = dir.path().join("server.log");
    let _server = serve(&args, &log);
    wait_listening(&addr);
    let _pests = pests(&addr);
    std::thread::scope(|sc| {
        let runs: Vec<_> = (0..3)
            .map(|k| {
                let (dir, addr, bob, log) = (dir.path(), &addr, &bob, &log);
                sc.spawn(move || {
                    let y = items(dir, &format!("y{k}.csv"), 100 * k..100 * k + 250);
                    let out = dir.join(format!("out{k}.csv"));
                    let o = receive(addr, &y, &out, bob);
                    assert!(o.status.success(), "receiver {k}: {}\nserver: {}", text(&o.stderr), log_of(log));
                    assert_eq!(rows(&out), expected(0..300, 100 * k..100 * k + 250));
                })
            })
            .collect();
        runs.into_iter().for_each(|r| r.join().unwrap());
    });
}

#[test]
fn a_serving_sender_answers_receivers_beside_idle_and_garbage_connections() {
    a_serving_sender_answers_beside_pests(false);
}

#[test]
fn a_serving_sender_over_mutual_tls_answers_receivers_beside_idle_and_garbage_connections() {
    a_serving_sender_answers_beside_pests(true);
}

#[test]
fn a_one_session_listener_is_not_taken_by_the_first_connection() {
    let dir = tempfile::tempdir().unwrap();
    let (alice, bob) = pki(dir.path());
    let x = items(dir.path(), "x.csv", 0..50);
    let y = items(dir.path(), "y.csv", 25..80);
    let addr = free_port();
    let mut args = vec!["sender", "--protocol", "ecdh", "--listen", &addr, "--input", s(&x), "-q"];
    args.extend(alice.iter().map(String::as_str));
    let server = bin().args(&args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    wait_listening(&addr);
    let _pests = pests(&addr);
    let out = dir.path().join("out.csv");
    let o = receive(&addr, &y, &out, &bob);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(rows(&out), expected(0..50, 25..80));
    let so = server.wait_with_output_timeout();
    assert!(so.status.success(), "the listener ends with the real session: {}", text(&so.stderr));
}

#[test]
fn the_judge_answers_beside_idle_and_garbage_connections() {
    let dir = tempfile::tempdir().unwrap();
    let p = |f: &str| dir.path().join(f).to_str().unwrap().to_string();
    std::fs::write(p("allow.csv"), "item\nitem1\nitem2\nitem3\n").unwrap();
    let x = items(dir.path(), "x.csv", 0..5);
    let addr = free_port();
    let log = dir.path().join("judge.log");
    let _judge = serve(
        &[
            "judge",
            "--listen",
            &addr,
            "--allow",
            &p("allow.csv"),
            "--public-key",
            &p("judge.pub"),
            "--secret-key",
            &p("judge.key"),
            "--sessions",
            "0",
            "--max-concurrent",
            "1",
        ],
        &log,
    );
    wait_listening(&addr);
    let _pests = pests(&addr);
    let o = bin()
        .args(["authorize", "--connect", &addr, "--input", s(&x), "--client-id", "alice"])
        .args(["--credentials", &p("creds.bin"), "--timeout", "20"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}\njudge: {}", text(&o.stderr), log_of(&log));
    assert!(Path::new(&p("creds.bin")).exists());
}

/// `wait_with_output`, but a server that does not end within 60 s is killed and fails
/// the test.
trait WaitTimeout {
    fn wait_with_output_timeout(self) -> Output;
}

impl WaitTimeout for Child {
    fn wait_with_output_timeout(mut self) -> Output {
        let start = Instant::now();
        while self.try_wait().unwrap().is_none() {
            if start.elapsed() > Duration::from_secs(60) {
                let _ = self.kill();
                panic!("the server did not end");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.wait_with_output().unwrap()
    }
}
