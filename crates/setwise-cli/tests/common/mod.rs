//! Helpers shared by the CLI's test crates (each uses its own subset).
#![allow(dead_code)]

pub mod s3;

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The `setwise` binary under test, without the variables of the tester's own setup
/// (a configuration file, TLS paths) that would change what a test runs.
pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_setwise"));
    for v in ["CONFIG", "TLS_CERT", "TLS_KEY", "TLS_CA", "TLS_SERVER_NAME", "PEER_NAME"] {
        c.env_remove(format!("SETWISE_{v}"));
    }
    c
}

/// A loopback address with a port free a moment ago.
pub fn free_port() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

/// Process output as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A path as a command-line argument.
pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Writes `content` to `dir/name`.
pub fn write(dir: &Path, name: &str, content: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    p
}

/// Starts the binary with `args`, its output captured.
pub fn spawn(args: &[&str]) -> Child {
    bin().args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

/// A one-column CSV (`id`) of `item{i}` for each i in `range`, at `dir/name`.
pub fn items(dir: &Path, name: &str, range: std::ops::Range<usize>) -> PathBuf {
    let p = dir.join(name);
    let body: String = std::iter::once("id\n".to_string()).chain(range.map(|i| format!("item{i}\n"))).collect();
    std::fs::write(&p, body).unwrap();
    p
}

/// The rows of a CSV after its header.
pub fn rows(path: &Path) -> BTreeSet<String> {
    std::fs::read_to_string(path).unwrap().lines().skip(1).map(str::to_string).collect()
}

/// The rows an intersection of [`items`] files over `sender` and `receiver` gives.
pub fn expected(sender: std::ops::Range<usize>, receiver: std::ops::Range<usize>) -> BTreeSet<String> {
    receiver.filter(|i| sender.contains(i)).map(|i| format!("item{i}")).collect()
}
