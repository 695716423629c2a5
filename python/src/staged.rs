//! Staged ecdh runs one bucket at a time (`setwise::staged`), for the Spark driver in
//! `setwise/spark.py`: the hello and the plan, items into buckets, each stage's step on
//! one bucket, and the checks of a peer's part against its marker. Parts travel as
//! lists of the protocol's stream frames (one per Parquet row, in chunk order); their
//! bytes, digests and markers are those of `setwise stage` (the frames, each after its
//! `u32` length), so the crypto and the formats stay in Rust. Markers and abort notes are
//! sealed and checked here under the operators' exchange key (`setwise::staged::auth`),
//! and the driver's small files on a local path are read and written here, without
//! following links (`setwise::staged::store`).

use crate::errors::{input_error, to_py};
use crate::keys::import_arrow;
use arrow_array::{Array, BinaryArray, LargeBinaryArray, LargeStringArray, StringArray};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use setwise::crypto::dst::SessionId;
use setwise::crypto::ristretto::Encoded;
use setwise::error::{Deviation, Error};
use setwise::io::hex;
use setwise::protocols::ecdh::messages::{DOUBLE_BLINDED, RECEIVER_BLINDED, SENDER_BLINDED};
use setwise::session::Hello;
use setwise::staged::ExchangeKey;
use setwise::staged::Location;
use setwise::staged::message::{decode_part, frames, max_part_bytes, part_digest};
use setwise::staged::runner::stage_name;
use setwise::staged::store::AbortNote;
use setwise::staged::store::{MAX_MARKER_BYTES, Marker, shown};
use setwise::staged::{BucketKey, Buckets, Plan, RunSeed, Settings, ecdh};
use setwise::wire::stream::Stream;
use setwise::{Operation, Protocol, Role, SumTo};

/// What a part's marker entry says of it: (items, bytes, digest in hex).
type Info = (u64, u64, String);

pub fn role(name: &str) -> PyResult<Role> {
    match name {
        "sender" => Ok(Role::Sender),
        "receiver" => Ok(Role::Receiver),
        other => Err(input_error(format!("role '{other}': sender or receiver"))),
    }
}

fn seed(bytes: &[u8]) -> PyResult<RunSeed> {
    let b: [u8; 32] = bytes.try_into().map_err(|_| input_error("a run seed has 32 bytes"))?;
    Ok(RunSeed::from_bytes(b))
}

fn settings(
    run_id: &str,
    operation: &str,
    key_columns: usize,
    buckets: &str,
    bucket_key: Option<&str>,
) -> PyResult<Settings> {
    // The Spark path of the protocol that stages by steps of its own (ecdh).
    let own = setwise::protocols::registry::ALL.iter().find(|s| s.own_stages).map_or("", |s| s.name);
    settings_for(run_id, own, operation, key_columns, buckets, bucket_key, "sender")
}

/// A staged run's settings from their names; refused as `Settings::validate` refuses
/// them (a protocol or operation that cannot be staged, naming those that can).
pub fn settings_for(
    run_id: &str,
    protocol: &str,
    operation: &str,
    key_columns: usize,
    buckets: &str,
    bucket_key: Option<&str>,
    sum_to: &str,
) -> PyResult<Settings> {
    let protocol: Protocol = protocol.parse().map_err(|e: setwise::error::UnknownName| input_error(e.to_string()))?;
    let operation: Operation =
        operation.parse().map_err(|e: setwise::error::UnknownName| input_error(e.to_string()))?;
    let buckets: Buckets = buckets.parse().map_err(|e: setwise::error::UnknownName| input_error(e.to_string()))?;
    let bucket_key = bucket_key.map(BucketKey::from_hex).transpose().map_err(to_py)?;
    let sum_to: SumTo = sum_to.parse().map_err(|e: setwise::error::UnknownName| input_error(e.to_string()))?;
    let s = Settings { key_columns, buckets, bucket_key, sum_to, ..Settings::new(run_id, protocol, operation) };
    s.validate().map_err(to_py)?;
    Ok(s)
}

/// The byte values of an Arrow binary or string array (nulls are refused).
pub fn values(array: &dyn Array) -> PyResult<Vec<&[u8]>> {
    if array.null_count() > 0 {
        return Err(input_error("items must not be null"));
    }
    let any = array.as_any();
    if let Some(a) = any.downcast_ref::<BinaryArray>() {
        Ok(a.iter().map(|v| v.unwrap_or_default()).collect())
    } else if let Some(a) = any.downcast_ref::<LargeBinaryArray>() {
        Ok(a.iter().map(|v| v.unwrap_or_default()).collect())
    } else if let Some(a) = any.downcast_ref::<StringArray>() {
        Ok(a.iter().map(|v| v.unwrap_or_default().as_bytes()).collect())
    } else if let Some(a) = any.downcast_ref::<LargeStringArray>() {
        Ok(a.iter().map(|v| v.unwrap_or_default().as_bytes()).collect())
    } else {
        Err(input_error(format!("items must be an Arrow binary or string array, not {}", array.data_type())))
    }
}

/// A stage error as the CLI words it: `stage N (role: name), what: why`.
fn stage_error(stage: u8, role: Role, what: String, e: Error) -> PyErr {
    let head = format!("stage {stage} ({role}: {})", stage_name(stage));
    let at = if what.is_empty() { head } else { format!("{head}, {what}") };
    to_py(Error::Stage { at, source: Box::new(e) })
}

fn frames_py<'py>(py: Python<'py>, stream: Stream<32>, values: &[Encoded]) -> Vec<Bound<'py, PyBytes>> {
    frames(stream, values).iter().map(|f| PyBytes::new(py, f)).collect()
}

/// This party's hello frame (stage 0) for `set_size` distinct items; its nonce comes from
/// `seed`, so the hello is the same bytes on every re-run.
#[pyfunction]
#[pyo3(signature = (run_id, operation, key_columns, buckets, bucket_key, role_name, set_size, run_seed))]
#[allow(clippy::too_many_arguments)]
pub fn staged_hello<'py>(
    py: Python<'py>,
    run_id: &str,
    operation: &str,
    key_columns: usize,
    buckets: &str,
    bucket_key: Option<&str>,
    role_name: &str,
    set_size: usize,
    run_seed: &[u8],
) -> PyResult<Bound<'py, PyBytes>> {
    let s = settings(run_id, operation, key_columns, buckets, bucket_key)?;
    Ok(PyBytes::new(py, &s.hello(role(role_name)?, set_size, &seed(run_seed)?).encode()))
}

/// A fresh 32-byte run seed from the OS CSPRNG (to keep in the party's workdir, 0600).
#[pyfunction]
pub fn staged_new_seed(py: Python<'_>) -> Bound<'_, PyBytes> {
    PyBytes::new(py, &RunSeed::generate().to_bytes()[..])
}

/// A fingerprint of a batch of distinct items: the item count and the sum mod 2^256 of
/// each item's BLAKE3 hash (little-endian), so batches combine in any order
/// ([`staged_fingerprint_combine`]).
#[pyfunction]
pub fn staged_fingerprint<'py>(py: Python<'py>, items: &Bound<'py, PyAny>) -> PyResult<(u64, Bound<'py, PyBytes>)> {
    let array = import_arrow(items)?;
    let vals = values(array.as_ref())?;
    let mut sum = [0u64; 4];
    for v in &vals {
        add(&mut sum, blake3::derive_key("setwise/staged/v1/spark-input-item", v));
    }
    Ok((vals.len() as u64, PyBytes::new(py, &limbs_bytes(&sum))))
}

fn add(sum: &mut [u64; 4], h: [u8; 32]) {
    let mut carry = 0u128;
    for (i, limb) in sum.iter_mut().enumerate() {
        let x = u64::from_le_bytes(h[8 * i..8 * i + 8].try_into().expect("8 bytes"));
        let t = *limb as u128 + x as u128 + carry;
        *limb = t as u64;
        carry = t >> 64;
    }
}

fn limbs_bytes(sum: &[u64; 4]) -> Vec<u8> {
    sum.iter().flat_map(|l| l.to_le_bytes()).collect()
}

/// The input fingerprint (hex) from the batches' ([`staged_fingerprint`]) counts and sums.
#[pyfunction]
pub fn staged_fingerprint_combine(key_columns: usize, batches: Vec<(u64, Vec<u8>)>) -> PyResult<String> {
    let mut sum = [0u64; 4];
    let mut n = 0u64;
    for (count, s) in batches {
        let s: [u8; 32] = s.as_slice().try_into().map_err(|_| input_error("a fingerprint sum has 32 bytes"))?;
        add(&mut sum, s);
        n += count;
    }
    let mut h = blake3::Hasher::new_derive_key("setwise/staged/v1/spark-input");
    h.update(&(key_columns as u64).to_le_bytes()).update(&n.to_le_bytes()).update(&limbs_bytes(&sum));
    Ok(h.finalize().to_hex().to_string())
}

pub fn parse_key(bytes: &[u8]) -> PyResult<ExchangeKey> {
    ExchangeKey::parse(bytes).map_err(to_py)
}

/// Checks a marker's bytes (`stage`, written by `role_name`, read from `path`): its MAC
/// under `exchange_key` for run `run_id`, that stage and that role, then its fields.
/// Returns it as normalised JSON and the digest of what its messages are (for the
/// journal).
#[pyfunction]
pub fn staged_read_marker(
    data: &[u8],
    stage: u8,
    role_name: &str,
    path: &str,
    run_id: &str,
    exchange_key: &[u8],
) -> PyResult<(String, String)> {
    let who = role(role_name)?;
    let key = parse_key(exchange_key)?;
    if data.len() as u64 > MAX_MARKER_BYTES {
        let why = format!("{path}: {} bytes, too large for a marker", data.len());
        return Err(to_py(Deviation::StagedMessage { why }.into()));
    }
    let m = Marker::open(data, stage, who, path, &key, run_id).map_err(to_py)?;
    let json = serde_json::to_string(&m).map_err(|e| input_error(e.to_string()))?;
    Ok((json, m.content_digest()))
}

/// This party's marker (JSON with every field but `mac`) sealed under `exchange_key` for
/// run `run_id`: the JSON to write.
#[pyfunction]
pub fn staged_seal_marker(json: &str, run_id: &str, exchange_key: &[u8]) -> PyResult<String> {
    let mut m: Marker = serde_json::from_str(json).map_err(|e| input_error(format!("a marker to seal: {e}")))?;
    m.seal(&parse_key(exchange_key)?, run_id).map_err(to_py)?;
    serde_json::to_string_pretty(&m).map_err(|e| input_error(e.to_string()))
}

/// This party's abort note (`abort-<role>.json`) saying `error`, sealed under
/// `exchange_key` for run `run_id`.
#[pyfunction]
pub fn staged_abort_note<'py>(
    py: Python<'py>,
    run_id: &str,
    role_name: &str,
    error: &str,
    exchange_key: &[u8],
) -> PyResult<Bound<'py, PyBytes>> {
    let note = AbortNote::sealed(&parse_key(exchange_key)?, run_id, role(role_name)?, error);
    Ok(PyBytes::new(py, &serde_json::to_vec(&note).map_err(|e| input_error(e.to_string()))?))
}

/// The reason in `role_name`'s abort note `data` (read from `path`), checked under
/// `exchange_key` for run `run_id`, as it may be shown (escaped, bounded).
#[pyfunction]
pub fn staged_read_abort(
    data: &[u8],
    role_name: &str,
    path: &str,
    run_id: &str,
    exchange_key: &[u8],
) -> PyResult<String> {
    let key = parse_key(exchange_key)?;
    AbortNote::open(data, role(role_name)?, path, &key, run_id).map_err(to_py)
}

/// A new exchange key: 64 hexadecimal digits (what `setwise stage keygen` writes).
#[pyfunction]
pub fn staged_new_exchange_key() -> String {
    ExchangeKey::generate().to_hex().to_string()
}

/// The public fingerprint of an exchange key (64 hexadecimal digits or 32 raw bytes);
/// refuses a malformed key, saying how to make one.
#[pyfunction]
pub fn staged_exchange_key_fingerprint(exchange_key: &[u8]) -> PyResult<String> {
    Ok(parse_key(exchange_key)?.fingerprint())
}

/// Peer text as it may be shown: control and format characters escaped, bounded.
#[pyfunction]
pub fn staged_shown(text: &str) -> String {
    shown(text)
}

/// Reads the small file `path` on a local filesystem below `root` (the exchange or the
/// workdir) as `setwise stage` does: a regular file, not a link, reached through no link
/// below `root`, at most `limit` bytes; None if absent.
#[pyfunction]
pub fn staged_read_local<'py>(
    py: Python<'py>,
    root: &str,
    path: &str,
    limit: u64,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    let (at, name) = below(root, path)?;
    read_object(py, &at, &name, limit)
}

/// Object `name` at `at`, at most `limit` bytes, read without the GIL; None if absent.
pub(crate) fn read_object<'py>(
    py: Python<'py>,
    at: &Location,
    name: &str,
    limit: u64,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    let got = py.detach(|| at.get(name, limit)).map_err(to_py)?;
    Ok(got.map(|b| PyBytes::new(py, &b)))
}

/// Writes the small file `path` on a local filesystem below `root` as `setwise stage`
/// does: whole or not at all, refusing a path that is or passes through a link below
/// `root`.
#[pyfunction]
pub fn staged_write_local(py: Python<'_>, root: &str, path: &str, data: &[u8]) -> PyResult<()> {
    let (at, name) = below(root, path)?;
    py.detach(|| at.put_replace(&name, data)).map_err(to_py)
}

/// The directory `root` and the name of `path` in it (`/`-separated).
fn below(root: &str, path: &str) -> PyResult<(Location, String)> {
    let rel = std::path::Path::new(path)
        .strip_prefix(root)
        .map_err(|_| input_error(format!("{path} is not below {root}")))?;
    let parts: Option<Vec<&str>> = rel.components().map(|c| c.as_os_str().to_str()).collect();
    let name = parts.map(|p| p.join("/")).ok_or_else(|| input_error(format!("{path}: not a UTF-8 path")))?;
    Ok((Location::dir(std::path::Path::new(root)), name))
}

/// What both parties agreed for a staged ecdh run, computed from this side's settings
/// and both hellos, plus each stage's step on one bucket. Pickles (as its settings and
/// the two hellos, nothing secret) so Spark tasks can use it.
#[pyclass(module = "setwise._setwise", frozen)]
pub struct StagedPlan {
    plan: Plan,
    args: (String, String, usize, String, Option<String>, Vec<u8>, Vec<u8>),
}

impl StagedPlan {
    fn stream(&self, stage: u8) -> Stream<32> {
        match (stage, self.plan.role) {
            (1, Role::Receiver) => RECEIVER_BLINDED,
            (1, _) => SENDER_BLINDED,
            _ => DOUBLE_BLINDED,
        }
    }

    fn check_bucket(&self, bucket: u32) -> PyResult<()> {
        if bucket >= self.plan.buckets {
            return Err(input_error(format!("bucket {bucket} of {}", self.plan.buckets)));
        }
        Ok(())
    }

    /// The peer's part `part` of `stage` from its frames, checked against the marker's
    /// entry: length, digest, frames, count.
    fn read(&self, stage: u8, part: u32, chunks: &[Vec<u8>], info: &Info) -> Result<Vec<Encoded>, Error> {
        let peer = if self.plan.role == Role::Sender { Role::Receiver } else { Role::Sender };
        let bad = |why: String| -> Error { Deviation::StagedMessage { why }.into() };
        let (items, nbytes, digest) = info;
        if *nbytes > max_part_bytes(*items) {
            return Err(bad(format!("{nbytes} bytes cannot hold {items} points")));
        }
        let total: u64 = chunks.iter().map(|c| 4 + c.len() as u64).sum();
        if total != *nbytes {
            return Err(bad(format!("{total} bytes, the marker says {nbytes} (damaged, truncated or missing rows)")));
        }
        let mut bytes = Vec::with_capacity(total as usize);
        for c in chunks {
            bytes.extend_from_slice(&(c.len() as u32).to_le_bytes());
            bytes.extend_from_slice(c);
        }
        if hex(&part_digest(self.plan.session, stage, peer, part, &bytes)) != *digest {
            return Err(bad("digest mismatch (damaged or replaced)".into()));
        }
        let stream = match (stage, peer) {
            (1, Role::Receiver) => RECEIVER_BLINDED,
            (1, _) => SENDER_BLINDED,
            _ => DOUBLE_BLINDED,
        };
        let n = usize::try_from(*items).map_err(|_| Error::usage("part", "part too large for this machine"))?;
        Ok(decode_part(stream, &bytes, n)?)
    }
}

#[pymethods]
impl StagedPlan {
    /// Settles the plan from this side's settings and both hello frames (`ours` made by
    /// `staged_hello` with the same settings). Refuses, naming the field and both values,
    /// when the hellos disagree.
    #[new]
    #[pyo3(signature = (run_id, operation, key_columns, buckets, bucket_key, ours, theirs))]
    fn new(
        run_id: String,
        operation: String,
        key_columns: usize,
        buckets: String,
        bucket_key: Option<String>,
        ours: Vec<u8>,
        theirs: Vec<u8>,
    ) -> PyResult<Self> {
        let s = settings(&run_id, &operation, key_columns, &buckets, bucket_key.as_deref())?;
        let (a, b) = (Hello::decode(&ours).map_err(to_py)?, Hello::decode(&theirs).map_err(to_py)?);
        let plan = Plan::agree(&s, &a, &b).map_err(to_py)?;
        Ok(Self { plan, args: (run_id, operation, key_columns, buckets, bucket_key, ours, theirs) })
    }

    #[allow(clippy::type_complexity)]
    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, (String, String, usize, String, Option<String>, Vec<u8>, Vec<u8>))> {
        Ok((slf.get_type().into_any(), slf.get().args.clone()))
    }

    /// The number of buckets B.
    #[getter]
    fn buckets(&self) -> u32 {
        self.plan.buckets
    }

    /// The session id, hexadecimal (as the markers record it).
    #[getter]
    fn session(&self) -> String {
        hex(&self.plan.session.0)
    }

    /// The sender's announced number of distinct items.
    #[getter]
    fn sender_size(&self) -> u64 {
        self.plan.sender_size
    }

    /// The receiver's announced number of distinct items.
    #[getter]
    fn receiver_size(&self) -> u64 {
        self.plan.receiver_size
    }

    /// Each item's bucket, as little-endian `int32` values (bytes), for an Arrow array.
    fn bucket_of<'py>(&self, py: Python<'py>, items: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
        let array = import_arrow(items)?;
        let vals = values(array.as_ref())?;
        let out: Vec<u8> =
            py.detach(|| vals.iter().flat_map(|v| (self.plan.bucket_of(v) as i32).to_le_bytes()).collect());
        Ok(PyBytes::new(py, &out))
    }

    /// Stage 1 on bucket `bucket`'s items (an Arrow array, in the order the message is to
    /// have): the receiver's b·H(y) in that order, or the sender's a_i·H(x) sorted; the
    /// message as frames.
    fn blind<'py>(
        &self,
        py: Python<'py>,
        run_seed: &[u8],
        bucket: u32,
        items: &Bound<'py, PyAny>,
    ) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        self.check_bucket(bucket)?;
        let s = seed(run_seed)?;
        let array = import_arrow(items)?;
        let vals = values(array.as_ref())?;
        let role = self.plan.role;
        let points = py
            .detach(|| match role {
                Role::Receiver => ecdh::receiver_blind(&s, &self.plan, &vals),
                _ => ecdh::sender_blind(&s, &self.plan, bucket, &vals),
            })
            .map_err(|e| stage_error(1, role, format!("bucket {bucket}"), e))?;
        Ok(frames_py(py, self.stream(1), &points))
    }

    /// Sender, stage 2 on bucket `bucket`: a_i·P for the receiver's stage-1 part (its
    /// frames in chunk order, checked against `info` from its marker); frames.
    fn reblind<'py>(
        &self,
        py: Python<'py>,
        run_seed: &[u8],
        bucket: u32,
        chunks: Vec<Vec<u8>>,
        info: Info,
    ) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        self.check_bucket(bucket)?;
        let s = seed(run_seed)?;
        let what = format!("the receiver's stage 1 message, bucket {bucket}");
        let points = py
            .detach(|| {
                let points = self.read(1, bucket, &chunks, &info)?;
                ecdh::sender_reblind(&s, &self.plan, bucket, &points)
            })
            .map_err(|e| stage_error(2, Role::Sender, what, e))?;
        Ok(frames_py(py, self.stream(2), &points))
    }

    /// Receiver, stage 3 on bucket `bucket`: the positions (into the order of its stage-1
    /// message, of `own_count` items) of the items the sender also has, from the sender's
    /// stage-1 and stage-2 parts and their marker entries.
    #[allow(clippy::too_many_arguments)]
    fn finish(
        &self,
        py: Python<'_>,
        run_seed: &[u8],
        bucket: u32,
        own_count: u64,
        s1: Vec<Vec<u8>>,
        s1_info: Info,
        s2: Vec<Vec<u8>>,
        s2_info: Info,
    ) -> PyResult<Vec<u32>> {
        self.check_bucket(bucket)?;
        let s = seed(run_seed)?;
        let fail =
            |n: u8, e| stage_error(3, Role::Receiver, format!("the sender's stage {n} message, bucket {bucket}"), e);
        if s2_info.0 != own_count {
            return Err(fail(
                2,
                Deviation::Count { what: "DoubleBlinded", got: s2_info.0, expected: own_count }.into(),
            ));
        }
        let set = py
            .detach(|| {
                self.read(1, bucket, &s1, &s1_info)
                    .and_then(|p| ecdh::receiver_reblind(&s, &self.plan, &p))
                    .and_then(ecdh::sender_set)
            })
            .map_err(|e| fail(1, e))?;
        let own = py.detach(|| self.read(2, bucket, &s2, &s2_info)).map_err(|e| fail(2, e))?;
        Ok(py.detach(|| ecdh::matches(&set, &own).into_iter().map(|p| p as u32).collect()))
    }

    /// Cardinality, sender: `values` (32-byte points, concatenated, e.g. from
    /// `blind_raw`/`reblind_raw`) grouped by the part each is mixed into: (part, points).
    fn mix_split<'py>(&self, py: Python<'py>, values: &[u8]) -> PyResult<Vec<(u32, Bound<'py, PyBytes>)>> {
        let mut by: std::collections::BTreeMap<u32, Vec<u8>> = std::collections::BTreeMap::new();
        for v in as_points(values)? {
            by.entry(self.plan.mix_part_of(v)).or_default().extend_from_slice(v);
        }
        Ok(by.into_iter().map(|(p, b)| (p, PyBytes::new(py, &b))).collect())
    }

    /// Stage 1 (sender) or 2 on one bucket, unframed: the points concatenated, for
    /// `mix_split`. Stage 2 takes the receiver's part as `reblind` does.
    #[pyo3(signature = (run_seed, bucket, items=None, chunks=None, info=None))]
    fn raw<'py>(
        &self,
        py: Python<'py>,
        run_seed: &[u8],
        bucket: u32,
        items: Option<&Bound<'py, PyAny>>,
        chunks: Option<Vec<Vec<u8>>>,
        info: Option<Info>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        self.check_bucket(bucket)?;
        let s = seed(run_seed)?;
        let points = match (items, chunks, info) {
            (Some(items), None, None) => {
                let array = import_arrow(items)?;
                let vals = values(array.as_ref())?;
                py.detach(|| ecdh::sender_blind(&s, &self.plan, bucket, &vals))
                    .map_err(|e| stage_error(1, Role::Sender, format!("bucket {bucket}"), e))?
            }
            (None, Some(chunks), Some(info)) => {
                let what = format!("the receiver's stage 1 message, bucket {bucket}");
                py.detach(|| {
                    let points = self.read(1, bucket, &chunks, &info)?;
                    ecdh::sender_reblind(&s, &self.plan, bucket, &points)
                })
                .map_err(|e| stage_error(2, Role::Sender, what, e))?
            }
            _ => return Err(input_error("raw: items, or chunks and info")),
        };
        Ok(PyBytes::new(py, points.as_flattened()))
    }

    /// Cardinality, sender: one mixed part's message from its points (pieces of
    /// concatenated points), sorted; frames.
    fn frame_sorted<'py>(
        &self,
        py: Python<'py>,
        stage: u8,
        pieces: Vec<Vec<u8>>,
    ) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        let mut all: Vec<Encoded> = Vec::new();
        for p in &pieces {
            all.extend(as_points(p)?);
        }
        all.sort_unstable();
        Ok(frames_py(py, self.stream(stage), &all))
    }

    /// Cardinality, receiver's finish: the sender's part `part` of `stage` checked
    /// against `info`; for stage 1 re-keyed with b. The values concatenated.
    fn open_part<'py>(
        &self,
        py: Python<'py>,
        run_seed: &[u8],
        stage: u8,
        part: u32,
        chunks: Vec<Vec<u8>>,
        info: Info,
    ) -> PyResult<Bound<'py, PyBytes>> {
        self.check_bucket(part)?;
        let s = seed(run_seed)?;
        let what = format!("the sender's stage {stage} message, part {part}");
        let out = py
            .detach(|| {
                let points = self.read(stage, part, &chunks, &info)?;
                if stage == 1 { ecdh::receiver_reblind(&s, &self.plan, &points) } else { Ok(points) }
            })
            .map_err(|e| stage_error(3, Role::Receiver, what, e))?;
        Ok(PyBytes::new(py, out.as_flattened()))
    }

    /// The marker entry (items, bytes, digest) of this party's own part `part` of `stage`
    /// from its frames in chunk order, each frame checked.
    fn summarize(&self, stage: u8, part: u32, chunks: Vec<Vec<u8>>) -> PyResult<Info> {
        let mut items = 0u64;
        let mut bytes = Vec::new();
        for c in &chunks {
            let count = match c.get(1..5) {
                Some(n) if c[0] == self.stream(stage).tag => u32::from_le_bytes(n.try_into().expect("4 bytes")),
                _ => return Err(input_error(format!("stage {stage}, part {part}: a frame that is not this stage's"))),
            };
            if c.len() != 5 + 32 * count as usize {
                return Err(input_error(format!("stage {stage}, part {part}: a frame of the wrong length")));
            }
            items += count as u64;
            bytes.extend_from_slice(&(c.len() as u32).to_le_bytes());
            bytes.extend_from_slice(c);
        }
        let digest = hex(&part_digest(self.plan.session, stage, self.plan.role, part, &bytes));
        Ok((items, bytes.len() as u64, digest))
    }
}

fn as_points(bytes: &[u8]) -> PyResult<&[Encoded]> {
    let (points, rest) = bytes.as_chunks::<32>();
    if !rest.is_empty() {
        return Err(input_error("points are 32 bytes each"));
    }
    Ok(points)
}

/// Cardinality, receiver: `values` (concatenated 32-byte values) split by their first
/// byte into `n` groups, so both sides of a match meet in one group: (group, values).
#[pyfunction]
pub fn staged_split_values<'py>(py: Python<'py>, values: &[u8], n: u32) -> PyResult<Vec<(u32, Bound<'py, PyBytes>)>> {
    if n == 0 || n > 256 {
        return Err(input_error("1 to 256 groups"));
    }
    let mut by = vec![Vec::new(); n as usize];
    for v in as_points(values)? {
        by[(v[0] as u32 % n) as usize].extend_from_slice(v);
    }
    Ok(by
        .into_iter()
        .enumerate()
        .filter(|(_, b)| !b.is_empty())
        .map(|(g, b)| (g as u32, PyBytes::new(py, &b)))
        .collect())
}

/// Cardinality, receiver: how many of `own` (a·b·H(y), pieces of concatenated values)
/// are among `sender` (b·a·H(x)); a repeated sender value is refused.
#[pyfunction]
pub fn staged_count_matches(py: Python<'_>, sender: Vec<Vec<u8>>, own: Vec<Vec<u8>>) -> PyResult<u64> {
    let mut s: Vec<Encoded> = Vec::new();
    for p in &sender {
        s.extend(as_points(p)?);
    }
    let mut o: Vec<Encoded> = Vec::new();
    for p in &own {
        o.extend(as_points(p)?);
    }
    py.detach(|| ecdh::sender_set(s).map(|set| ecdh::matches(&set, &o).len() as u64))
        .map_err(|e| stage_error(3, Role::Receiver, "the sender's stage 1 message".into(), e))
}

/// The digest a marker lists for a part of `data` (`stage`, written by `role_name`, index
/// `part`) in the session `session_hex`: for empty parts and the hello.
#[pyfunction]
pub fn staged_part_digest(session_hex: &str, stage: u8, role_name: &str, part: u32, data: &[u8]) -> PyResult<String> {
    let session = if session_hex.is_empty() {
        SessionId::default()
    } else {
        let b: [u8; 32] = setwise::io::from_hex(session_hex)
            .and_then(|v| v.try_into().ok())
            .ok_or_else(|| input_error("a session id is 64 hexadecimal digits"))?;
        SessionId(b)
    };
    Ok(hex(&part_digest(session, stage, role(role_name)?, part, data)))
}
