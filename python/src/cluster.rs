//! Replayed staged runs on a cluster (`setwise.spark` for every staged protocol but
//! ecdh). The driver is the library's runner ([`StagedDriver`]): it checks the markers,
//! keeps the journal and the exchange key, and decides each bucket's round; the buckets
//! are in the executors, where a [`StagedWorker`] serves their rounds and meets the
//! driver through files in the party's workdir (`setwise::staged::work`). The Python
//! side only moves items into buckets and keeps the Spark job running.

use crate::errors::{NetworkError, PeerError, input_error, to_py};
use crate::keys::import_arrow;
use crate::staged::{parse_key, role, settings_for, values as values_of};
use arrow_array::{Array, ArrayRef, Int32Array, Int64Array};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyCFunction, PyTuple};
use setwise::Role;
use setwise::error::{Error, ErrorKind};
use setwise::io::hex;
use setwise::staged::store::Workdir;
use setwise::staged::work::{self, Done, Served, Task, Worker};
use setwise::staged::{Location, Plan, Remote, Runner, Settings, Step};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// A Python exception raised inside the cluster's calls, as a library error of the same
/// kind (a worker's refusal of the peer's part stays the peer's).
fn from_py(py: Python<'_>, e: PyErr) -> Error {
    let kind = if e.is_instance_of::<PeerError>(py) {
        ErrorKind::Peer
    } else if e.is_instance_of::<NetworkError>(py) {
        ErrorKind::Network
    } else {
        ErrorKind::Local
    };
    let message = if e.is_instance_of::<crate::errors::Error>(py) {
        e.value(py).to_string()
    } else {
        format!("the cluster: {}", e.value(py))
    };
    Error::Worker { kind, message }
}

/// The driver's side of the cluster: a Python object with `bucket_sizes(session)` and
/// `run(stage, session, attempt, ready)` (keeps executors serving until `ready()`).
struct PyRemote {
    obj: Py<PyAny>,
    workdir: Workdir,
    /// This driver's id, on every stage it posts: executors of an earlier driver of
    /// the party (killed, and restarted) stop when they see another.
    attempt: String,
}

impl Remote for PyRemote {
    fn bucket_sizes(&self, plan: &Plan) -> setwise::Result<Vec<u64>> {
        let session = plan.id();
        Python::attach(|py| {
            self.obj
                .call_method1(py, "bucket_sizes", (session,))
                .and_then(|v| v.extract::<Vec<u64>>(py))
                .map_err(|e| from_py(py, e))
        })
    }

    fn run(&self, plan: &Plan, stage: u8, tasks: &[Task]) -> setwise::Result<Vec<Done>> {
        work::post(&self.workdir, stage, tasks, &self.attempt)?;
        let session = plan.id();
        let (workdir, owned) = (self.workdir.clone(), tasks.to_vec());
        Python::attach(|py| {
            let ready = PyCFunction::new_closure(py, None, None, move |_: &Bound<'_, PyTuple>, _| -> PyResult<bool> {
                work::collect(&workdir, stage, &owned).map(|d| d.is_some()).map_err(to_py)
            })
            .map_err(|e| from_py(py, e))?;
            let args = (stage, session, self.attempt.clone(), ready);
            self.obj.call_method1(py, "run", args).map(drop).map_err(|e| from_py(py, e))
        })?;
        work::collect(&self.workdir, stage, tasks)?.ok_or_else(|| {
            Error::usage("stage", format!("stage {stage}: the executors stopped before every bucket was done"))
        })
    }
}

/// `sum`'s values as the executors get them: an `int64` array, one value in `0..=bound`
/// per item.
fn sum_values(array: &ArrayRef, items: usize, bound: u64) -> PyResult<Vec<u64>> {
    let a = array
        .as_any()
        .downcast_ref::<Int64Array>()
        .filter(|a| a.null_count() == 0 && a.len() == items)
        .ok_or_else(|| input_error("values: an int64 array without nulls, one per item"))?;
    a.values()
        .iter()
        .map(|&v| {
            u64::try_from(v)
                .ok()
                .filter(|&v| v <= bound)
                .ok_or_else(|| input_error(format!("value {v}: not in 0..={bound} (the value bound)")))
        })
        .collect()
}

fn local(path: &str, what: &str) -> PyResult<PathBuf> {
    let p = path.strip_prefix("file://").or_else(|| path.strip_prefix("file:")).unwrap_or(path);
    if p.contains("://") || !p.starts_with('/') {
        return Err(input_error(format!(
            "{what} {path}: a staged run of this protocol on a cluster needs an absolute path on a filesystem \
             every executor mounts at the same place (the driver posts each bucket's rounds to the executors \
             there; the exchange may be s3://bucket/prefix)"
        )));
    }
    Ok(PathBuf::from(p))
}

/// The exchange of a replayed run on a cluster: `s3://bucket/prefix` (or `s3a://`),
/// which the driver and every executor reach themselves with the AWS variables in their
/// environment, or an absolute path every executor mounts.
fn exchange_at(spec: &str) -> PyResult<Location> {
    if spec.starts_with("s3://") || spec.starts_with("s3a://") {
        return Location::parse(spec).map_err(to_py);
    }
    Ok(Location::dir(&local(spec, "exchange")?))
}

/// Object `name` of the exchange `exchange` (a path or `s3://bucket/prefix`), at most
/// `limit` bytes, read as the workers read it; None if there is none. For tools and
/// tests that watch a run from outside it.
#[pyfunction]
pub fn staged_exchange_read<'py>(
    py: Python<'py>,
    exchange: &str,
    name: &str,
    limit: u64,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    crate::staged::read_object(py, &exchange_at(exchange)?, name, limit)
}

/// One party's replayed staged run driven from a cluster's driver: the library's runner,
/// its buckets in the executors (reached through `remote`, see [`PyRemote`]).
#[pyclass(module = "setwise._setwise", unsendable)]
pub struct StagedDriver {
    runner: Runner<'static, Vec<u8>>,
    /// Whether this party learns a result.
    learns: bool,
}

#[pymethods]
impl StagedDriver {
    /// Opens the party's side of the run (`size` distinct items whose fingerprint the
    /// caller computed the same way at every call). Refuses ecdh (its own Spark path),
    /// unknown settings, and a workdir (or a directory exchange) not on a shared
    /// filesystem.
    #[new]
    #[pyo3(signature = (run_id, protocol, operation, key_columns, buckets, bucket_key, role_name, exchange, workdir, exchange_key, size, fingerprint, remote, sum_to="sender"))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        run_id: &str,
        protocol: &str,
        operation: &str,
        key_columns: usize,
        buckets: &str,
        bucket_key: Option<&str>,
        role_name: &str,
        exchange: &str,
        workdir: &str,
        exchange_key: &[u8],
        size: u64,
        fingerprint: String,
        remote: Py<PyAny>,
        sum_to: &str,
    ) -> PyResult<Self> {
        let settings = settings_for(run_id, protocol, operation, key_columns, buckets, bucket_key, sum_to)?;
        let (ex, wd) = (exchange_at(exchange)?, local(workdir, "workdir")?);
        let key = parse_key(exchange_key)?;
        let who = role(role_name)?;
        let w = Workdir::create(&wd).map_err(to_py)?;
        let mut attempt = [0u8; 8];
        setwise::crypto::rng::fill_os(&mut attempt);
        let remote = Box::new(PyRemote { obj: remote, workdir: w, attempt: hex(&attempt) });
        let learns = who == Role::Receiver || settings.operation.sender_learns(settings.sum_to);
        let runner = Runner::open_remote(settings, who, &ex, &wd, (size, fingerprint), key, remote).map_err(to_py)?;
        Ok(Self { runner, learns })
    }

    /// Runs the next stage if it can: `("ran", n, "")`, `("waiting", n, marker path)`
    /// or `("finished", 0, "")`.
    fn step(&self) -> PyResult<(&'static str, u8, String)> {
        match self.runner.step(&mut |_| Ok(())).map_err(to_py)? {
            Step::Ran(n) => Ok(("ran", n, String::new())),
            Step::Waiting { stage, marker } => Ok(("waiting", stage, marker)),
            Step::Finished => Ok(("finished", 0, String::new())),
        }
    }

    /// Whether this party learns a result (the receiver; the sender of `sum` unless the
    /// sum goes to the receiver, and of `private-id`).
    #[getter]
    fn learns(&self) -> bool {
        self.learns
    }

    /// What stage `n` does (`round 3`, …).
    fn stage_label(&self, n: u8) -> String {
        self.runner.stage_label(n)
    }

    /// For a side that said `auto`: `(protocol, why)`, the protocol every bucket runs and
    /// why, once both hellos are in the exchange; else None.
    fn protocol_agreed(&self) -> PyResult<Option<(&'static str, &'static str)>> {
        Ok(self.runner.protocol_agreed().map_err(to_py)?.map(|(p, why)| (p.name(), why)))
    }

    /// The result size once the party finished (the cardinality, or the number of
    /// matched items or union rows), else None.
    fn result_size(&self) -> PyResult<Option<u64>> {
        Ok(self.runner.result().map_err(to_py)?.map(|r| r.size))
    }

    /// `sum`, the party that learns the sum (the value holder, or the receiver with
    /// `sum_to="receiver"`) once it finished: the sum over X ∩ Y, in decimal; else None.
    fn result_sum(&self) -> PyResult<Option<String>> {
        Ok(self.runner.result().map_err(to_py)?.and_then(|r| r.sum))
    }
}

/// An executor's worker for one party's side of a replayed run on a cluster. Pickles as
/// its settings and paths (nothing secret: the seed is read from the workdir), so Spark
/// ships it to the executors; the plan is rebuilt there from both hellos and checked to
/// be the driver's (`session`: the driver's [`Plan::id`](setwise::staged::Plan::id)).
#[pyclass(module = "setwise._setwise", frozen)]
pub struct StagedWorker {
    args: WorkerArgs,
    /// Opened at its first use in the executor (it reads the seed and the hellos).
    worker: Mutex<Option<Worker>>,
}

/// [`StagedWorker::new`]'s arguments: what it pickles as.
#[derive(Clone)]
struct WorkerArgs {
    run_id: String,
    protocol: String,
    operation: String,
    key_columns: usize,
    buckets: String,
    bucket_key: Option<String>,
    role_name: String,
    size: usize,
    exchange: String,
    workdir: String,
    session: String,
    attempt: String,
    sum_to: String,
}

impl WorkerArgs {
    /// The arguments in [`StagedWorker::new`]'s order, for `type(*args)` (PyO3 converts
    /// tuples of at most 12, hence two joined).
    fn to_tuple<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let a = self.clone();
        let run = (a.run_id, a.protocol, a.operation, a.key_columns, a.buckets, a.bucket_key).into_pyobject(py)?;
        let party = (a.role_name, a.size, a.exchange, a.workdir, a.session, a.attempt, a.sum_to).into_pyobject(py)?;
        PyTuple::new(py, run.iter().chain(party.iter()).collect::<Vec<_>>())
    }
}

impl StagedWorker {
    fn settings(&self) -> PyResult<Settings> {
        let a = &self.args;
        settings_for(
            &a.run_id,
            &a.protocol,
            &a.operation,
            a.key_columns,
            &a.buckets,
            a.bucket_key.as_deref(),
            &a.sum_to,
        )
    }

    fn workdir(&self) -> PyResult<Workdir> {
        Workdir::create(&local(&self.args.workdir, "workdir")?).map_err(to_py)
    }

    /// The worker, opened if it is not yet.
    fn worker(&self) -> PyResult<MutexGuard<'_, Option<Worker>>> {
        let mut guard = self.worker.lock().map_err(|_| input_error("a worker failed earlier in this process"))?;
        if guard.is_none() {
            let settings = self.settings()?;
            let a = &self.args;
            let ex = exchange_at(&a.exchange)?;
            let w = Worker::open(&settings, role(&a.role_name)?, a.size, &ex, &self.workdir()?, &a.session)
                .map_err(to_py)?;
            *guard = Some(w);
        }
        Ok(guard)
    }

    fn plan(&self) -> PyResult<Plan> {
        Ok(self.worker()?.as_ref().expect("opened").plan().clone())
    }
}

#[pymethods]
impl StagedWorker {
    #[new]
    #[pyo3(signature = (run_id, protocol, operation, key_columns, buckets, bucket_key, role_name, size, exchange, workdir, session, attempt, sum_to="sender".to_string()))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        run_id: String,
        protocol: String,
        operation: String,
        key_columns: usize,
        buckets: String,
        bucket_key: Option<String>,
        role_name: String,
        size: usize,
        exchange: String,
        workdir: String,
        session: String,
        attempt: String,
        sum_to: String,
    ) -> PyResult<Self> {
        let args = WorkerArgs {
            run_id,
            protocol,
            operation,
            key_columns,
            buckets,
            bucket_key,
            role_name,
            size,
            exchange,
            workdir,
            session,
            attempt,
            sum_to,
        };
        let me = Self { args, worker: Mutex::new(None) };
        me.settings()?;
        Ok(me)
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        Ok((slf.get_type().into_any(), slf.get().args.to_tuple(slf.py())?))
    }

    /// The number of buckets B the run agreed.
    fn buckets(&self) -> PyResult<u32> {
        Ok(self.plan()?.buckets)
    }

    /// Each item's bucket, as little-endian `int32` values (bytes), for an Arrow array.
    fn bucket_of<'py>(&self, py: Python<'py>, items: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
        let array = import_arrow(items)?;
        let vals = values_of(array.as_ref())?;
        let plan = self.plan()?;
        let out: Vec<u8> = py.detach(|| vals.iter().flat_map(|v| (plan.bucket_of(v) as i32).to_le_bytes()).collect());
        Ok(PyBytes::new(py, &out))
    }

    /// Serves, as task `task` of `tasks`, the rounds of buckets `task`, `task + tasks`, …
    /// (those without items too), whose `items` (an Arrow binary or string array) it
    /// holds with each item's bucket in `parts` (an Arrow `int32` array; rows of bucket
    /// -1 are skipped), from stage
    /// `first` on, until they end (`"ended"`), no task comes for `linger` seconds
    /// (`"lingered"`), or a later driver of the party posts its own (`"superseded"`).
    /// With `values` (an Arrow `int64` array, one non-negative value per item) and
    /// `value_bound`, it is the value holder of `sum`. The task keeps alive only the
    /// roles that fit in `live_memory` bytes together (default [`task_budget`]); the
    /// others replay their rounds at each stage.
    #[pyo3(signature = (items, parts, task, tasks, linger, first, values=None, value_bound=None, live_memory=None))]
    #[allow(clippy::too_many_arguments)] // the items, the task's place, the timing, the values
    fn serve(
        &self,
        py: Python<'_>,
        items: &Bound<'_, PyAny>,
        parts: &Bound<'_, PyAny>,
        task: u32,
        tasks: u32,
        linger: f64,
        first: u8,
        values: Option<&Bound<'_, PyAny>>,
        value_bound: Option<u64>,
        live_memory: Option<u64>,
    ) -> PyResult<&'static str> {
        let (items, parts) = (import_arrow(items)?, import_arrow(parts)?);
        let vals = values_of(items.as_ref())?;
        let parts = parts
            .as_any()
            .downcast_ref::<Int32Array>()
            .filter(|p| p.null_count() == 0 && p.len() == vals.len())
            .ok_or_else(|| input_error("parts: an int32 array without nulls, one per item"))?;
        let amounts = match (values, value_bound) {
            (Some(v), Some(bound)) => Some((sum_values(&import_arrow(v)?, vals.len(), bound)?, bound)),
            (None, None) => None,
            _ => return Err(input_error("values and value_bound come together")),
        };
        let n = self.plan()?.buckets;
        if tasks == 0 || task >= tasks {
            return Err(input_error(format!("task {task} of {tasks}")));
        }
        // Each bucket's items with their positions, to sort the values with them.
        let mut buckets: BTreeMap<u32, Vec<(&[u8], usize)>> =
            (task..n).step_by(tasks as usize).map(|b| (b, Vec::new())).collect();
        for (i, (v, &p)) in vals.iter().zip(parts.values().iter()).enumerate() {
            if p == -1 {
                continue; // the row that makes a task without items run
            }
            let mine = u32::try_from(p).ok().and_then(|b| buckets.get_mut(&b));
            mine.ok_or_else(|| input_error(format!("an item of bucket {p} reached task {task} of {tasks}")))?
                .push((v, i));
        }
        let workdir = self.workdir()?;
        let linger = Duration::try_from_secs_f64(linger).map_err(|e| input_error(format!("linger: {e}")))?;
        let attempt = self.args.attempt.clone();
        let mut guard = self.worker()?;
        let worker = guard.as_mut().expect("opened");
        worker.limit_live(live_memory.unwrap_or_else(task_budget));
        let served = py.detach(|| {
            // A role replays only on the same items in the same order, which Spark's
            // shuffles do not keep.
            buckets.values_mut().for_each(|b| b.sort_unstable());
            let items: BTreeMap<u32, Vec<&[u8]>> =
                buckets.iter().map(|(&b, v)| (b, v.iter().map(|&(x, _)| x).collect())).collect();
            let sums: Option<BTreeMap<u32, Vec<u64>>> = amounts
                .as_ref()
                .map(|(a, _)| buckets.iter().map(|(&b, v)| (b, v.iter().map(|&(_, i)| a[i]).collect())).collect());
            let values = sums.as_ref().zip(amounts.as_ref().map(|&(_, bound)| bound));
            work::serve(&workdir, worker, &items, values, linger, &attempt, first)
        });
        match served.map_err(to_py)? {
            Served::Ended => Ok("ended"),
            Served::Lingered => Ok("lingered"),
            Served::Superseded => Ok("superseded"),
        }
    }
}

/// The bytes an executor task's live roles may hold unless the job says: this host's
/// available memory ÷ its cores (each core may run such a task), or, if less, half the
/// address space left under the Python worker's limit (`spark.executor.pyspark.memory`
/// sets `RLIMIT_AS`, which counts what threads and allocators reserve too); an eighth
/// left for the task's items and the process itself.
fn task_budget() -> u64 {
    use setwise::io::memory::{address_space_left, available_memory};
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let host = available_memory().map(|m| m as u64 / cores);
    let limited = address_space_left().map(|a| a as u64 / 2);
    let share = host.into_iter().chain(limited).min().unwrap_or(u64::MAX);
    share - share / 8
}

/// A bucket's private IDs on a cluster: its own items, each one's ID (in the same
/// order) and the IDs of the bucket's part of the union, as bytes.
#[pyfunction]
#[allow(clippy::type_complexity)] // three lists of bytes, as the Python side takes them
pub fn staged_read_ids<'py>(
    py: Python<'py>,
    workdir: &str,
    bucket: u32,
) -> PyResult<(Vec<Bound<'py, PyBytes>>, Vec<Bound<'py, PyBytes>>, Vec<Bound<'py, PyBytes>>)> {
    let w = Workdir::create(Path::new(&local(workdir, "workdir")?)).map_err(to_py)?;
    let (items, ids) = work::read_bucket_ids(&w, bucket).map_err(to_py)?;
    let bytes = |v: &[[u8; 32]]| v.iter().map(|i| PyBytes::new(py, i)).collect();
    Ok((items.iter().map(|i| PyBytes::new(py, i)).collect(), bytes(&ids.own), bytes(&ids.union)))
}

/// The rows bucket `bucket` kept on a cluster (intersection: the own items it matched;
/// union: the peer's items outside the own set), as bytes.
#[pyfunction]
pub fn staged_read_rows<'py>(py: Python<'py>, workdir: &str, bucket: u32) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    let w = Workdir::create(Path::new(&local(workdir, "workdir")?)).map_err(to_py)?;
    let items = work::read_rows(&w, bucket).map_err(to_py)?;
    Ok(items.iter().map(|i| PyBytes::new(py, i)).collect())
}
