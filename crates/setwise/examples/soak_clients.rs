//! Clients for the soak test of an unbalanced sender (`scripts/soak-unbalanced.sh`):
//! honest receivers whose answers are checked against the plain set computation, mixed
//! with hostile ones: garbage, a truncated frame, a byte a second, silence, a
//! frame claiming 4 GiB, and crafted relinearisation keys.
//!
//! ```text
//! soak-clients ADDR SET_SIZE CONNECTIONS SEED [THREADS]
//! ```
//!
//! With `SOAK_TLS=DIR` (a `setwise tls init DIR --names alice,bob` directory) the honest
//! and crafted-key clients connect under mutual TLS as bob to a sender certified as alice.
//!
//! The sender's set must be `user%07d@example.org` for 0 ≤ i < SET_SIZE. Prints one
//! summary line (`honest N ok`, then each hostile kind's count, `hostile N`); exits 1 if
//! an honest receiver failed or got a wrong answer, or a crafted key was accepted.

use setwise::net::{
    Channel, Decorated, Decoration, NetError, TcpChannel, TcpConfig, TlsConfig, TlsOptions, write_frame,
};
use setwise::session::{self, Hello, Input, Job};
use setwise::{Operation, Outcome, Protocol, Role};
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Items per honest query: half members, half near misses.
const QUERY: usize = 16;
/// How long a hostile client waits at most for the server to cut it off.
const PATIENCE: Duration = Duration::from_secs(120);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Honest,
    Garbage,
    Truncated,
    Trickle,
    Silent,
    Oversized,
    CraftedKey,
}

/// One in three connections is honest; the rest cycle through the hostile kinds.
const MIX: [Kind; 9] = [
    Kind::Honest,
    Kind::Garbage,
    Kind::CraftedKey,
    Kind::Honest,
    Kind::Truncated,
    Kind::Trickle,
    Kind::Honest,
    Kind::Silent,
    Kind::Oversized,
];

/// A small xorshift generator: the clients' choices need to vary, not to be secret.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn item(i: u64) -> Vec<u8> {
    format!("user{i:07}@example.org").into_bytes()
}

fn job() -> Job {
    Job::new(Protocol::Unbalanced, Operation::Intersection)
}

/// The clients' TLS settings (`SOAK_TLS`), set once in `main`.
static TLS: OnceLock<Option<Arc<TlsConfig>>> = OnceLock::new();

fn config() -> TcpConfig {
    TcpConfig { io_timeout: Some(PATIENCE), tls: TLS.get().cloned().flatten(), ..TcpConfig::default() }
}

/// A hello frame (with its length prefix) as an honest receiver of `n` items sends it.
fn hello_frame(n: usize) -> Vec<u8> {
    let (protocol, operation) = job().hello_names();
    let hello = Hello::new(protocol, operation, job().hello_params(), Role::Receiver, n).encode();
    let mut framed = Vec::new();
    write_frame(&mut framed, &hello, usize::MAX).expect("a hello fits");
    framed
}

/// Waits until the server closes the connection (it answers an error with an abort).
fn wait_for_close(stream: &mut TcpStream) {
    stream.set_read_timeout(Some(PATIENCE)).ok();
    let mut sink = [0u8; 4096];
    while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
}

/// What an honest receiver's channel does to its relinearisation key frame: keeps its
/// payload and, when `replace` is set, sends that instead.
struct KeyFrame {
    replace: Option<Vec<u8>>,
    sent: Option<Vec<u8>>,
}

impl Decoration for KeyFrame {
    fn send<C: Channel + ?Sized>(&mut self, inner: &mut C, frame: &[u8]) -> Result<(), NetError> {
        // Only the first key frame (level 0's, or the evaluation level's when it is the
        // only one): a crafted key is refused there, before any later one is read.
        if frame.first() != Some(&setwise::protocols::unbalanced::messages::KEY) || self.sent.is_some() {
            return inner.send(frame);
        }
        self.sent = Some(frame[1..].to_vec());
        match &self.replace {
            Some(key) => inner.send(&[&frame[..1], &key[..]].concat()),
            None => inner.send(frame),
        }
    }
}

/// The query of an honest receiver: members and near misses, and the members' indices.
fn query(rng: &mut Rng, set_size: u64) -> (Vec<Vec<u8>>, BTreeSet<usize>) {
    let mut chosen = BTreeSet::new();
    while chosen.len() < QUERY {
        // Half from the set, half just above it (same form, not in the set).
        let i = if chosen.len() % 2 == 0 { rng.below(set_size) } else { set_size + rng.below(set_size) };
        chosen.insert(i);
    }
    let items: Vec<Vec<u8>> = chosen.iter().map(|&i| item(i)).collect();
    let members = chosen.iter().enumerate().filter(|&(_, &i)| i < set_size).map(|(k, _)| k).collect();
    (items, members)
}

/// Runs one connection of `kind`; `Err` says what went wrong that should not have.
fn connection(kind: Kind, addr: &str, set_size: u64, rng: &mut Rng, keys: &[(&str, Vec<u8>)]) -> Result<(), String> {
    match kind {
        Kind::Honest => {
            let (items, members) = query(rng, set_size);
            let mut ch = TcpChannel::connect(addr, config()).map_err(|e| format!("connect: {e}"))?;
            let (outcome, _) = session::run(&mut ch, &job(), Role::Receiver, Input::Items(&items))
                .map_err(|e| format!("honest receiver failed: {e}"))?;
            match outcome {
                Outcome::Intersection(found) if found.iter().copied().collect::<BTreeSet<_>>() == members => Ok(()),
                other => Err(format!("honest receiver got {other:?}, expected the members {members:?}")),
            }
        }
        Kind::CraftedKey => {
            let (name, key) = &keys[rng.below(keys.len() as u64) as usize];
            let (items, _) = query(rng, set_size);
            let inner = TcpChannel::connect(addr, config()).map_err(|e| format!("connect: {e}"))?;
            let mut ch = Decorated::wrap(inner, KeyFrame { replace: Some(key.clone()), sent: None });
            let result = session::run(&mut ch, &job(), Role::Receiver, Input::Items(&items));
            match (ch.decoration.sent.is_some(), result) {
                (false, _) => Err("the sender's parameters need no relinearisation key; use others".into()),
                (true, Ok(_)) => Err(format!("the sender accepted a crafted key ({name})")),
                (true, Err(_)) => Ok(()),
            }
        }
        raw => {
            let mut s = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
            s.set_write_timeout(Some(PATIENCE)).ok();
            // Write errors are expected: the server may cut a hostile client off first.
            let _ = match raw {
                Kind::Garbage => {
                    let junk: Vec<u8> = (0..1 + rng.below(4096)).map(|_| rng.next() as u8).collect();
                    s.write_all(&junk)
                }
                Kind::Truncated => {
                    let mut bytes = hello_frame(QUERY);
                    bytes.truncate(bytes.len() / 2);
                    s.write_all(&bytes)
                }
                Kind::Oversized => s.write_all(&[&hello_frame(QUERY)[..], &u32::MAX.to_le_bytes()[..]].concat()),
                Kind::Trickle => trickle(&mut s),
                Kind::Silent => Ok(()),
                Kind::Honest | Kind::CraftedKey => unreachable!(),
            };
            if raw != Kind::Silent {
                s.shutdown(Shutdown::Write).ok();
            }
            wait_for_close(&mut s);
            Ok(())
        }
    }
}

/// A hello sent one byte a second, for as long as the server listens.
fn trickle(s: &mut TcpStream) -> std::io::Result<()> {
    let start = Instant::now();
    for b in hello_frame(QUERY).iter().cycle() {
        s.write_all(&[*b])?;
        if start.elapsed() > PATIENCE {
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 4 {
        eprintln!("usage: soak-clients ADDR SET_SIZE CONNECTIONS SEED [THREADS]");
        std::process::exit(2);
    }
    let addr = &args[0];
    let number = |i: usize| -> u64 { args[i].parse().unwrap_or_else(|_| panic!("argument {i} must be a number")) };
    let (set_size, connections, seed) = (number(1), number(2) as usize, number(3));
    let threads = args.get(4).map_or(8, |_| number(4) as usize);
    let tls = std::env::var_os("SOAK_TLS").filter(|d| !d.is_empty()).map(|dir| {
        let dir = std::path::PathBuf::from(dir);
        TlsOptions {
            cert: Some(dir.join("bob.pem")),
            key: Some(dir.join("bob.key")),
            ca: Some(dir.join("ca.pem")),
            server_name: Some("alice".into()),
            peer_name: None,
            insecure_no_tls: false,
        }
        .resolve(addr, false)
        .expect("the TLS files of SOAK_TLS")
        .expect("TLS settings")
    });
    TLS.set(tls).expect("set once");

    let keys = crafted_keys(addr);
    let next = AtomicUsize::new(0);
    // The session that learned the key was honest and checked.
    let counts = Mutex::new(std::collections::BTreeMap::from([(Kind::Honest, 1)]));
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for t in 0..threads {
            let (next, counts, failures, keys) = (&next, &counts, &failures, &keys);
            s.spawn(move || {
                let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (t as u64 + 1) | 1);
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    if k >= connections {
                        break;
                    }
                    let kind = MIX[(k + seed as usize) % MIX.len()];
                    if let Err(e) = connection(kind, addr, set_size, &mut rng, keys) {
                        failures.lock().unwrap().push(format!("{kind:?}: {e}"));
                    }
                    *counts.lock().unwrap().entry(kind).or_default() += 1;
                }
            });
        }
    });
    let counts = counts.into_inner().unwrap();
    let failures = failures.into_inner().unwrap();
    let honest = counts.get(&Kind::Honest).copied().unwrap_or(0);
    let hostile: usize = counts.iter().filter(|(k, _)| **k != Kind::Honest).map(|(_, n)| n).sum();
    let kinds: Vec<String> =
        counts.iter().filter(|(k, _)| **k != Kind::Honest).map(|(k, n)| format!("{k:?} {n}")).collect();
    let failed_honest = failures.iter().filter(|f| f.starts_with("Honest")).count();
    println!("honest {} ok, {}, hostile {hostile}", honest - failed_honest, kinds.join(", "));
    for f in &failures {
        eprintln!("soak-clients: {f}");
    }
    if !failures.is_empty() {
        std::process::exit(1);
    }
}

/// The crafted variants of a relinearisation key for the server's BFV parameters, taken
/// from one honest session (its answer checked) whose key frame is kept.
fn crafted_keys(addr: &str) -> Vec<(&'static str, Vec<u8>)> {
    let inner = TcpChannel::connect(addr, config()).expect("connect to the sender");
    let mut ch = Decorated::wrap(inner, KeyFrame { replace: None, sent: None });
    let (outcome, _) =
        session::run(&mut ch, &job(), Role::Receiver, Input::Items(&[item(0)])).expect("a first honest session");
    assert_eq!(outcome, Outcome::Intersection(vec![0]), "the first honest session's answer");
    let key = ch
        .decoration
        .sent
        .expect("the sender's parameters need a relinearisation key (UnbalancedParams::query_levels)");
    setwise::testing::crafted_relin_keys(&key)
}
