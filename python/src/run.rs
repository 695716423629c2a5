//! One two-party run over TCP/TLS from Python: the connection and the protocol run on a
//! worker thread while the calling thread waits without the GIL and checks for Ctrl-C
//! every 100 ms; an interrupt shuts the socket down so the worker ends at once.

use crate::errors::{input_error, net_to_py, to_py};
use crate::keys::Keys;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use setwise::net::{NetError, TcpChannel, TcpConfig, TlsOptions};
use setwise::protocols::mqrpmt::{LastMove, MqrpmtParams};
use setwise::session::{Input, Job, ProtocolParams};
use setwise::{Operation, Outcome, Protocol, Role};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Where the peer is, how long to wait, and the TLS settings.
pub struct Peer {
    connect: Option<String>,
    listen: Option<String>,
    tls: TlsOptions,
    connect_timeout: Duration,
    timeout: Duration,
}

/// What the worker shares with the waiting thread to cancel it.
#[derive(Default)]
struct Cancel {
    stop: AtomicBool,
    socket: Mutex<Option<TcpStream>>,
}

impl Cancel {
    fn cancel(&self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(s) = self.socket.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

/// Accepts one connection on `addr`, polling `cancel` so an interrupt ends the wait.
fn accept(addr: &str, config: TcpConfig, cancel: &Cancel) -> Result<TcpChannel, NetError> {
    let listener = TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false)?;
                return TcpChannel::from_stream(stream, config);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if cancel.stop.load(Ordering::SeqCst) {
                    return Err(std::io::Error::new(std::io::ErrorKind::Interrupted, "interrupted").into());
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

fn open(peer: &Peer, cancel: &Cancel) -> PyResult<TcpChannel> {
    let (addr, listening) = match (&peer.listen, &peer.connect) {
        (Some(a), None) => (a.as_str(), true),
        (None, Some(a)) => (a.as_str(), false),
        _ => return Err(input_error("give exactly one of connect=\"host:port\" or listen=\"host:port\"")),
    };
    let tls = peer.tls.resolve(addr, listening).map_err(|e| input_error(e.to_string()))?;
    let config =
        TcpConfig { io_timeout: Some(peer.timeout), connect_timeout: peer.connect_timeout, tls, ..Default::default() };
    let ch = if listening {
        accept(addr, config, cancel).map_err(|e| net_to_py("listening", e))?
    } else {
        TcpChannel::connect(addr, config).map_err(|e| net_to_py("connecting", e))?
    };
    *cancel.socket.lock().unwrap_or_else(|e| e.into_inner()) = ch.shutdown_handle().ok();
    Ok(ch)
}

/// The job's options from Python.
pub struct JobOptions {
    protocol: Protocol,
    operation: Operation,
    reveal: setwise::protocols::Reveal,
    last_move: LastMove,
}

impl JobOptions {
    fn job(&self, key_columns: usize) -> Job {
        let job = Job::new(self.protocol, self.operation).with_key_columns(key_columns).with_reveal(self.reveal);
        match self.protocol {
            Protocol::Mqrpmt => job
                .with_params(ProtocolParams::Mqrpmt(MqrpmtParams { last_move: self.last_move, ..Default::default() })),
            _ => job,
        }
    }
}

fn parse<T: std::str::FromStr<Err = String>>(s: &str) -> PyResult<T> {
    s.parse().map_err(input_error)
}

/// Per-item values for `sum` from per-row values: rows of one item add up, and no
/// item's total may exceed `bound`.
fn item_values(keys: &Keys, row_values: &[u64], bound: u64) -> PyResult<Vec<u64>> {
    let store = &keys.store;
    let rows = store.row_items();
    if row_values.len() != rows.len() {
        return Err(input_error(format!("values: {} values for {} rows", row_values.len(), rows.len())));
    }
    let mut sums = vec![0u128; store.len()];
    for (item, &v) in rows.zip(row_values) {
        if let Some(i) = item {
            sums[i] += u128::from(v);
        }
    }
    sums.iter()
        .enumerate()
        .map(|(i, &v)| {
            u64::try_from(v).ok().filter(|&v| v <= bound).ok_or_else(|| {
                input_error(format!(
                    "item {} has the value {v}, above value_bound {bound}",
                    String::from_utf8_lossy(store.item(i).unwrap_or_default())
                ))
            })
        })
        .collect()
}

/// Runs one role; returns the outcome as a dict and the report as JSON.
#[pyfunction]
#[pyo3(signature = (
    role, keys, protocol="ecdh", op="intersection", *, connect=None, listen=None,
    tls_cert=None, tls_key=None, tls_ca=None, tls_server_name=None, peer_name=None,
    insecure_no_tls=false, reveal="receiver", last_move="bloom", values=None,
    value_bound=u32::MAX as u64, connect_timeout=30.0, timeout=600.0
))]
#[allow(clippy::too_many_arguments)]
pub fn run(
    py: Python<'_>,
    role: &str,
    keys: &Keys,
    protocol: &str,
    op: &str,
    connect: Option<String>,
    listen: Option<String>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    tls_ca: Option<PathBuf>,
    tls_server_name: Option<String>,
    peer_name: Option<String>,
    insecure_no_tls: bool,
    reveal: &str,
    last_move: &str,
    values: Option<Vec<u64>>,
    value_bound: u64,
    connect_timeout: f64,
    timeout: f64,
) -> PyResult<(Py<PyAny>, String)> {
    let role = match role {
        "sender" => Role::Sender,
        "receiver" => Role::Receiver,
        other => return Err(input_error(format!("role must be sender or receiver, not {other:?}"))),
    };
    let secs = |what: &str, s: f64| {
        Duration::try_from_secs_f64(s).map_err(|_| input_error(format!("{what}: {s} is not a number of seconds")))
    };
    let peer = Peer {
        connect,
        listen,
        tls: TlsOptions {
            cert: tls_cert,
            key: tls_key,
            ca: tls_ca,
            server_name: tls_server_name,
            peer_name,
            insecure_no_tls,
        },
        connect_timeout: secs("connect_timeout", connect_timeout)?,
        timeout: secs("timeout", timeout)?,
    };
    let options = JobOptions {
        protocol: parse(protocol)?,
        operation: parse(op)?,
        reveal: parse(reveal)?,
        last_move: parse(last_move)?,
    };
    let job = options.job(keys.key_columns);
    job.validate(role).map_err(to_py)?;
    let sum_values = match (job.operation, role, values) {
        (Operation::Sum, Role::Sender, Some(v)) => Some((item_values(keys, &v, value_bound)?, value_bound)),
        (Operation::Sum, Role::Sender, None) => {
            return Err(input_error("op=\"sum\": the sender holds the values; give values=[...] (one per row)"));
        }
        (_, _, Some(_)) => return Err(input_error("values= is for the sender of op=\"sum\"")),
        _ => None,
    };
    let store = keys.store.clone();
    let cancel = Arc::new(Cancel::default());
    let (tx, rx) = channel();
    // Waiting happens without the GIL, from whichever thread holds the lock.
    let rx = Mutex::new(rx);
    let worker_cancel = cancel.clone();
    std::thread::spawn(move || {
        let result = (|| {
            let mut ch = open(&peer, &worker_cancel)?;
            let items = store.items();
            let input = match &sum_values {
                Some((values, bound)) => Input::Values { items: &items, values, bound: *bound },
                None => Input::Items(&items),
            };
            setwise::run(&mut ch, &job, role, input).map_err(to_py)
        })();
        let _ = tx.send(result);
    });
    let result = loop {
        match py.detach(|| rx.lock().unwrap_or_else(|e| e.into_inner()).recv_timeout(Duration::from_millis(100))) {
            Ok(r) => break r,
            Err(RecvTimeoutError::Timeout) => {
                if let Err(interrupt) = py.check_signals() {
                    cancel.cancel();
                    // Give the worker a moment to see the closed socket and end.
                    let until = Instant::now() + Duration::from_secs(2);
                    let _ = py.detach(|| {
                        rx.lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .recv_timeout(until.saturating_duration_since(Instant::now()))
                    });
                    return Err(interrupt);
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(crate::errors::Error::new_err("the run's thread ended without a result"));
            }
        }
    };
    let (outcome, report) = result?;
    Ok((outcome_to_py(py, outcome)?, report.to_json()))
}

/// The outcome as a dict with a `kind` and its fields.
fn outcome_to_py(py: Python<'_>, outcome: Outcome) -> PyResult<Py<PyAny>> {
    let d = PyDict::new(py);
    match outcome {
        Outcome::Nothing => d.set_item("kind", "nothing")?,
        Outcome::Intersection(items) => {
            d.set_item("kind", "intersection")?;
            d.set_item("items", items)?;
        }
        Outcome::Cardinality(c) => {
            d.set_item("kind", "cardinality")?;
            d.set_item("cardinality", c)?;
        }
        Outcome::CardinalitySum { cardinality, sum } => {
            d.set_item("kind", "sum")?;
            d.set_item("cardinality", cardinality)?;
            d.set_item("sum", sum)?;
        }
        Outcome::Union(extra) => {
            d.set_item("kind", "union")?;
            d.set_item("extra", PyList::new(py, extra.iter().map(|e| PyBytes::new(py, e)))?)?;
        }
        Outcome::Shares(s) => {
            d.set_item("kind", "shares")?;
            let shares = PyList::new(py, (0..s.rows()).map(|i| PyBytes::new(py, s.share(i))))?;
            d.set_item("shares", shares)?;
            d.set_item("members", s.members)?;
            d.set_item("items", s.items)?;
        }
        Outcome::PrivateIds { own, union } => {
            d.set_item("kind", "private_id")?;
            d.set_item("own", PyList::new(py, own.iter().map(|id| PyBytes::new(py, id)))?)?;
            d.set_item("union", PyList::new(py, union.iter().map(|id| PyBytes::new(py, id)))?)?;
        }
        other => return Err(crate::errors::Error::new_err(format!("an outcome Python does not read yet: {other:?}"))),
    }
    Ok(d.into_any().unbind())
}
