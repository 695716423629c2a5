//! Two-party runs from Python: one session over TCP/TLS ([`run`]) or many on a listener
//! ([`serve`]), each through the library's one entry point (`setwise::run`) on a worker
//! thread ([`crate::worker`]). The typed Python layer passes every option in one dict.

use crate::authorized::{PyCredentials, PyJudge};
use crate::db::PyDb;
use crate::errors::{input_error, net_to_py, to_py};
use crate::keys::{Keys, Store};
use crate::worker::{Cancel, on_worker};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use setwise::net::{Admission, NetError, ServeConfig, TcpChannel, TcpConfig, TlsOptions, accept_one};
use setwise::protocols::Named;
use setwise::protocols::authorized::Credentials;
use setwise::protocols::spec::Takes;
use setwise::protocols::unbalanced::{SenderDb, decode_label};
use setwise::session::{Input, Job, served_line};
use setwise::{Operation, Outcome, Protocol, Report, Role, Security, SumTo};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// Every option of a run or a server, as the Python layer passes them (all keys given).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct Options {
    protocol: String,
    op: String,
    connect: Option<String>,
    listen: Option<String>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    tls_ca: Option<PathBuf>,
    tls_server_name: Option<String>,
    peer_name: Option<String>,
    insecure_no_tls: bool,
    reveal: String,
    /// `mqrpmt`: the membership test's construction, and its last move (`None`: the
    /// construction's default).
    rpmt: Option<String>,
    last_move: Option<String>,
    /// The adversary to withstand (`semi-honest` or `malicious`; both sides agree).
    security: String,
    /// `sum`: who learns the sum (`sender` or `receiver`; both sides agree).
    sum_to: String,
    connect_timeout: f64,
    timeout: f64,
    /// The party's keys (every role but the unbalanced sender and the judge).
    keys: Option<Py<Keys>>,
    /// `unbalanced` sender: its database.
    db: Option<Py<PyDb>>,
    /// `authorize`, judge.
    judge: Option<Py<PyJudge>>,
    /// `sum` sender: one value per input row, and the bound of any item's total.
    values: Option<Vec<u64>>,
    value_bound: u64,
    /// `unbalanced` receiver: the sender's parameter fingerprint to insist on.
    fingerprint: Option<String>,
    /// `authorized`/`partial` receiver: its credentials.
    credentials: Option<Py<PyCredentials>>,
    /// `authorized`/`partial` sender: the judge's public key (hex).
    judge_key: Option<String>,
    /// `authorized`/`partial` sender, and a client asking the judge: the client's ID.
    client_id: Option<String>,
    /// The most items a peer may announce (`None`: the library's limit).
    max_peer_items: Option<u64>,
    /// Serving: sessions to complete (0: until interrupted), at once, each one's limit.
    sessions: usize,
    max_concurrent: usize,
    session_timeout: f64,
    /// Serving: seconds running sessions get after an interrupt.
    grace: f64,
    /// Listening: seconds a connection may take to complete TLS and send its hello, and
    /// how many connections without a hello are kept, in all and per address.
    hello_timeout: f64,
    max_pending: usize,
    max_pending_per_address: usize,
}

fn secs(what: &str, s: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(s).map_err(|_| input_error(format!("{what}: {s} is not a number of seconds")))
}

pub(crate) fn parse<T: std::str::FromStr<Err = setwise::error::UnknownName>>(s: &str) -> PyResult<T> {
    s.parse().map_err(|e: setwise::error::UnknownName| input_error(e.to_string()))
}

impl Options {
    fn tls(&self) -> TlsOptions {
        TlsOptions {
            cert: self.tls_cert.clone(),
            key: self.tls_key.clone(),
            ca: self.tls_ca.clone(),
            server_name: self.tls_server_name.clone(),
            peer_name: self.peer_name.clone(),
            insecure_no_tls: self.insecure_no_tls,
        }
    }

    /// The address and whether this side listens on it.
    fn address(&self) -> PyResult<(&str, bool)> {
        match (&self.listen, &self.connect) {
            (Some(a), None) => Ok((a, true)),
            (None, Some(a)) => Ok((a, false)),
            _ => Err(input_error("give exactly one of connect=\"host:port\" or listen=\"host:port\"")),
        }
    }

    /// How a listener admits connections (a well-formed hello in time, pending ones capped).
    fn admission(&self) -> PyResult<Admission> {
        Ok(Admission {
            max_pending: self.max_pending.max(1),
            max_pending_per_source: self.max_pending_per_address.max(1),
            ..setwise::session::admission(secs("hello_timeout", self.hello_timeout)?)
        })
    }

    fn tcp(&self) -> PyResult<TcpConfig> {
        let (addr, listening) = self.address()?;
        let tls = self.tls().resolve(addr, listening).map_err(|e| input_error(e.to_string()))?;
        Ok(TcpConfig {
            io_timeout: Some(secs("timeout", self.timeout)?),
            connect_timeout: secs("connect_timeout", self.connect_timeout)?,
            tls,
            ..Default::default()
        })
    }
}

/// What a party brings to a session: shared with the worker and, when serving, with
/// every session thread.
enum Held {
    Items(Arc<Store>),
    Values { keys: Arc<Store>, values: Vec<u64>, bound: u64 },
    Database(Arc<RwLock<SenderDb>>),
    Credentials { keys: Arc<Store>, credentials: Arc<Credentials> },
    Judge(Arc<crate::authorized::JudgeState>),
}

impl Held {
    /// Runs one session of `job` as `role` on `ch`.
    fn run(&self, ch: &mut TcpChannel, job: &Job, role: Role) -> setwise::Result<(Outcome, Report)> {
        match self {
            Held::Items(keys) => setwise::run(ch, job, role, Input::Items(&keys.items())),
            Held::Values { keys, values, bound } => {
                setwise::run(ch, job, role, Input::Values { items: &keys.items(), values, bound: *bound })
            }
            Held::Database(db) => {
                let db = db.read().unwrap_or_else(|e| e.into_inner());
                let input: Input<'_> = Input::Database(&db);
                setwise::run(ch, job, role, input)
            }
            Held::Credentials { keys, credentials } => {
                setwise::run(ch, job, role, Input::Credentials { items: &keys.items(), credentials })
            }
            Held::Judge(j) => {
                let input: Input<'_> = Input::Judge { key: &j.key, policy: &j.policy, config: j.config };
                setwise::run(ch, job, role, input)
            }
        }
    }
}

/// Per-item values for `sum` from per-row values: rows of one item add up, and no
/// item's total may exceed `bound`.
fn item_values(store: &Store, row_values: &[u64], bound: u64) -> PyResult<Vec<u64>> {
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

fn need<'a, T>(what: Option<&'a T>, msg: &str) -> PyResult<&'a T> {
    what.ok_or_else(|| input_error(msg))
}

/// The job and what the party brings to it, from the options; checked before any
/// connection is made. What the party must bring is the protocol's to say
/// ([`Spec::takes`](setwise::protocols::Spec::takes)); its own options (`rpmt`,
/// `fingerprint`, `client_id`, …) reach it by name and it refuses those it does not take.
fn prepare(py: Python<'_>, role: Role, o: &Options) -> PyResult<(Job, Held)> {
    let protocol: Protocol = parse(&o.protocol)?;
    let operation: Operation = parse(&o.op)?;
    let reveal = parse(&o.reveal)?;
    let security: Security = parse(&o.security)?;
    let sum_to: SumTo = parse(&o.sum_to)?;
    let keys = o.keys.as_ref().map(|k| (k.get().store.clone(), k.get().key_columns));
    let with_keys = |msg: &str| need(keys.as_ref(), msg).cloned();
    let takes = protocol.spec().takes(operation, role);
    if o.values.is_some() && takes != Takes::Values {
        return Err(input_error(format!(
            "values= is for the sender of op=\"sum\", not the {role} of {protocol} {operation}"
        )));
    }
    let named = Named::none()
        .with("rpmt", o.rpmt.as_deref())
        .with("last_move", o.last_move.as_deref())
        .with("fingerprint", o.fingerprint.as_deref())
        .with("client_id", o.client_id.as_deref())
        .with("judge_key", o.judge_key.as_deref());
    let job = |kc: usize| Job::new(protocol, operation).with_key_columns(kc).with_options(&named).map_err(to_py);
    let (job, held) = match takes {
        Takes::Judge => {
            let judge = need(o.judge.as_ref(), "a judge serves with its Judge")?.get();
            let job = Job::judge().with_key_columns(judge.key_columns).with_options(&named).map_err(to_py)?;
            (job, Held::Judge(judge.state.clone()))
        }
        Takes::Database => {
            let db = need(o.db.as_ref(), "this sender serves a SenderDb (see SenderDb.build)")?;
            let db = db.get().db.clone();
            let kc = db.read().unwrap_or_else(|e| e.into_inner()).key_columns();
            (job(kc)?, Held::Database(db))
        }
        Takes::Credentials => {
            let (store, kc) = with_keys("the receiver needs its items")?;
            let c = need(o.credentials.as_ref(), "this receiver needs credentials= (see authorize)")?;
            let credentials = c.get().credentials.clone();
            // The credentials say whose they are and which judge signed them.
            let params = Job::authorized(protocol, &credentials.client_id, credentials.judge_pk).params;
            (job(kc)?.with_params(params), Held::Credentials { keys: store, credentials })
        }
        Takes::Values => {
            let (store, kc) = with_keys("the party needs its items")?;
            let v =
                need(o.values.as_ref(), "op=\"sum\": the sender holds the values; give values=[...] (one per row)")?;
            let values = py.detach(|| item_values(&store, v, o.value_bound))?;
            (job(kc)?, Held::Values { keys: store, values, bound: o.value_bound })
        }
        Takes::Items => {
            let (store, kc) = with_keys("the party needs its items")?;
            (job(kc)?, Held::Items(store))
        }
    };
    let job = match o.max_peer_items {
        Some(n) => job.with_max_peer_size(n),
        None => job,
    }
    .with_reveal(reveal)
    .with_security(security)
    .with_sum_to(sum_to);
    job.validate(role).map_err(to_py)?;
    Ok((job, held))
}

pub(crate) fn role_of(role: &str) -> PyResult<Role> {
    match role {
        "sender" => Ok(Role::Sender),
        "receiver" => Ok(Role::Receiver),
        "judge" => Ok(Role::Judge),
        other => Err(input_error(format!("role must be sender, receiver or judge, not {other:?}"))),
    }
}

/// Accepts connections on `addr` until one completes TLS and sends a hello in time (as
/// `admission` says; others are logged to `log` and dropped); an interrupt (`cancel`)
/// ends the wait.
fn accept(
    addr: &str,
    config: TcpConfig,
    admission: &Admission,
    cancel: &Cancel,
    log: impl Fn(&str) + Sync,
) -> Result<TcpChannel, NetError> {
    let listener = TcpListener::bind(addr)?;
    let stop = cancel.flag();
    accept_one(&listener, config, admission, Some(&stop), log)
}

/// Runs one session as `role`; returns the outcome as a dict and the report as JSON.
#[pyfunction]
pub fn run(py: Python<'_>, role: &str, options: Options) -> PyResult<(Py<PyAny>, String)> {
    let role = role_of(role)?;
    let (job, held) = prepare(py, role, &options)?;
    let config = options.tcp()?;
    let admission = options.admission()?;
    let (addr, listening) = options.address()?;
    let addr = addr.to_string();
    let (outcome, report) = on_worker(py, None, Duration::from_secs(2), move |cancel, log| {
        let mut ch = if listening {
            let line = |l: &str| {
                let _ = log.send(l.to_string());
            };
            accept(&addr, config, &admission, cancel, line).map_err(|e| net_to_py("listening", e))?
        } else {
            TcpChannel::connect(&addr, config).map_err(|e| net_to_py("connecting", e))?
        };
        if let Ok(s) = ch.shutdown_handle() {
            cancel.watch(s);
        }
        held.run(&mut ch, &job, role).map_err(to_py)
    })?;
    Ok((outcome_to_py(py, outcome)?, report.to_json()))
}

/// Serves `options.sessions` sessions (0: until interrupted) as `role` on
/// `options.listen`, each on its own thread; `log` gets one line per session. Returns
/// (completed, failed, panicked).
#[pyfunction]
#[pyo3(signature = (role, options, log=None))]
pub fn serve(
    py: Python<'_>,
    role: &str,
    options: Options,
    log: Option<Bound<'_, PyAny>>,
) -> PyResult<(usize, usize, usize, usize)> {
    let role = role_of(role)?;
    if options.connect.is_some() || options.listen.is_none() {
        return Err(input_error("a server listens: give listen=\"host:port\""));
    }
    let (job, held) = prepare(py, role, &options)?;
    if options.sessions != 1 && matches!(job.operation, Operation::Shares | Operation::PrivateId) {
        return Err(input_error("shares and private-id results are per session: serve them one session at a time"));
    }
    let mut config = ServeConfig {
        tcp: options.tcp()?,
        admission: options.admission()?,
        max_concurrent: options.max_concurrent.max(1),
        sessions: options.sessions,
        stop: None,
        events: None,
    };
    config.tcp.session_timeout = Some(secs("session_timeout", options.session_timeout)?);
    let addr = options.listen.clone().unwrap_or_default();
    let listener = TcpListener::bind(&addr).map_err(|e| net_to_py("listening", e.into()))?;
    let grace = secs("grace", options.grace)?;
    let stats = on_worker(py, log.as_ref(), grace, move |cancel, log| {
        config.stop = Some(cancel.flag());
        let handle = |ch: &mut TcpChannel| held.run(ch, &job, role).map(|(o, r)| served_line(&o, &r));
        let line = |l: &str| {
            let _ = log.send(l.to_string());
        };
        setwise::net::serve(&listener, config, handle, line).map_err(|e| net_to_py("listening", e.into()))
    })?;
    Ok((stats.completed, stats.failed, stats.panicked, stats.refused))
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
        Outcome::Labelled { columns, rows } => {
            d.set_item("kind", "labelled")?;
            let n = columns.len();
            // As the CLI writes them: a label that does not split into the columns
            // (possible only for a false match, ≤ 2^-40 per query) gives empty fields.
            let labels: Vec<Vec<String>> = rows
                .iter()
                .map(|(_, label)| decode_label(label, n).unwrap_or_else(|| vec![String::new(); n]))
                .collect();
            d.set_item("items", rows.iter().map(|(i, _)| *i).collect::<Vec<_>>())?;
            d.set_item("columns", columns)?;
            d.set_item("labels", labels)?;
        }
        Outcome::Credentials { credentials, refused } => {
            d.set_item("kind", "credentials")?;
            d.set_item("credentials", PyCredentials { credentials: Arc::from(credentials) })?;
            d.set_item("refused", refused)?;
        }
        Outcome::Judged(o) => {
            d.set_item("kind", "judged")?;
            d.set_item("client_id", o.client_id)?;
            d.set_item("signed", o.signed)?;
            d.set_item("refused", o.refused)?;
        }
        other => return Err(crate::errors::Error::new_err(format!("an outcome Python does not read yet: {other:?}"))),
    }
    Ok(d.into_any().unbind())
}
