//! A bucket's round apart from the runner. The runner checks the markers and decides,
//! per bucket, which parts its role reads and re-sends (a [`Task`]); a [`Worker`] that
//! holds the bucket's items runs the role one round further (kept alive, or replayed,
//! [`super::replay`]) and writes its part to the exchange (a [`Done`]).
//!
//! In one process (`setwise stage`) the runner is its own worker. On a cluster (the Spark
//! driver) workers run in the executors and meet the runner through files in the
//! party's workdir, which only the party can read: the runner [`post`]s a stage's tasks,
//! executors [`serve`] them (a task per group of buckets, kept running while the peer
//! keeps pace, so the roles stay alive between stages) and leave a done file per bucket,
//! which the runner [`collect`]s. The exchange key stays with the runner: workers read
//! the peer's parts checked against the digests the runner took from its markers.

use super::location::Location;
use super::plan::Plan;
use super::plan::Settings;
use super::replay::{
    BucketInput, BucketRun, Live, OwnedInput, Sent, decode_frames, encode_frames, max_part_bytes, run_bucket,
};
use super::seed::RunSeed;
use super::stages::{MAX_LIVE_BUCKETS, at_named, peer_of, stage_label};
use super::store::{Exchange, PartId, PartInfo, Workdir};
use crate::error::{Deviation, Error, ErrorKind, Result};
use crate::protocols::{Outcome, Role};
use crate::session::Item;
use crate::session::{Hello, Job, MAX_HELLO_FRAME};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One part a bucket's role reads (the peer's) or re-sends (its own): its stage and its
/// marker entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartRef {
    /// The stage that wrote it.
    pub stage: u8,
    /// What the marker says of it.
    pub info: PartInfo,
}

/// Bucket `bucket`'s work in stage `stage`, from the runner's checks of the markers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    /// The stage (a round, ≥ 2).
    pub stage: u8,
    /// The bucket.
    pub bucket: u32,
    /// The peer's item count in the bucket.
    pub peer_size: u64,
    /// This party's item count in the bucket, from its stage 1: a worker refuses other
    /// items (its role's draws must meet the same items at every stage).
    pub own_size: u64,
    /// The peer's parts of the bucket so far, oldest first.
    pub theirs: Vec<PartRef>,
    /// This party's own parts of the bucket so far, oldest first.
    pub ours: Vec<PartRef>,
    /// The peer sent nothing new: the role waits, and the stage's part is empty.
    pub wait: bool,
}

/// What kind of outcome a bucket's role ended with: the runner combines the buckets'
/// outcomes of one kind into the run's ([`Outcome`] says what each holds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Learned {
    /// Nothing (or the role has not ended).
    #[default]
    Nothing,
    /// Which own items are in the intersection ([`Done::matches`]).
    Intersection,
    /// How many ([`Done::count`]).
    Cardinality,
    /// How many and the sum of the own values over them ([`Done::count`], [`Done::sum`]).
    Sum,
    /// The peer's items outside the own set ([`Kept::Rows`]).
    Union,
    /// Private IDs ([`Kept::Ids`]).
    Ids,
}

/// What a bucket's role learned beyond counts, kept in the party's workdir when the role
/// ends ([`keep`]) until the runner (or, on a cluster, the executors) combine the buckets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kept {
    /// Rows: the peer's items outside the own set (`union`), or, on a cluster, the own
    /// items in the intersection.
    Rows(Vec<Vec<u8>>),
    /// Private IDs.
    Ids(BucketIds),
}

/// A bucket's private IDs: one per own item of the bucket, in its order, and its union's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketIds {
    /// One per own item.
    pub own: Vec<[u8; 32]>,
    /// The IDs of the bucket's part of X ∪ Y.
    pub union: Vec<[u8; 32]>,
}

/// What a bucket's stage did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Done {
    /// The bucket.
    pub bucket: u32,
    /// The part written (its marker entry).
    pub part: PartInfo,
    /// Whether the bucket's role ended in this stage.
    pub ended: bool,
    /// The kind of outcome it ended with.
    #[serde(default)]
    pub learned: Learned,
    /// Intersection: the positions, in the bucket's items, it matched.
    #[serde(default)]
    pub matches: Vec<u32>,
    /// The number matched (the cardinality, or the intersection's size), the number of
    /// union rows, or of union IDs.
    #[serde(default)]
    pub count: u64,
    /// Sum: the sum of the own values over the bucket's intersection.
    #[serde(default)]
    pub sum: u128,
    /// Whether the role was started again from the run's start for this round (it was
    /// not kept alive: over the memory budget, or in another process), rather than
    /// carried on from the stage before; false for a role's first round and a wait.
    #[serde(default)]
    pub replayed: bool,
    /// What it learned beyond counts, to [`keep`] (not in the done file).
    #[serde(skip)]
    pub kept: Option<Kept>,
}

impl Done {
    /// The stage's record of bucket `bucket` from its part and, if the role ended, its
    /// outcome.
    pub(super) fn new(bucket: u32, part: PartInfo, outcome: Option<Outcome>) -> Result<Self> {
        let mut d = Done {
            bucket,
            part,
            ended: outcome.is_some(),
            learned: Learned::Nothing,
            matches: Vec::new(),
            count: 0,
            sum: 0,
            replayed: false,
            kept: None,
        };
        match outcome {
            None | Some(Outcome::Nothing) => {}
            Some(Outcome::Intersection(m)) => {
                d.learned = Learned::Intersection;
                d.matches = m.into_iter().map(|p| p as u32).collect();
                d.count = d.matches.len() as u64;
            }
            Some(Outcome::Cardinality(c)) => (d.learned, d.count) = (Learned::Cardinality, c),
            Some(Outcome::CardinalitySum { cardinality, sum }) => {
                (d.learned, d.count, d.sum) = (Learned::Sum, cardinality, sum)
            }
            Some(Outcome::Union(rows)) => {
                (d.learned, d.count) = (Learned::Union, rows.len() as u64);
                d.kept = Some(Kept::Rows(rows));
            }
            Some(Outcome::PrivateIds { own, union }) => {
                (d.learned, d.count) = (Learned::Ids, union.len() as u64);
                d.kept = Some(Kept::Ids(BucketIds { own, union }));
            }
            Some(other) => {
                return Err(Error::usage(
                    "outcome",
                    format!("a staged run cannot combine a bucket's outcome {other:?}"),
                ));
            }
        }
        Ok(d)
    }
}

/// Refuses a union row of bucket `bucket` that is of another bucket: a bucket's run keeps
/// its rows apart from that bucket's own items only, so through another bucket a peer
/// that deviates could repeat an own item in the union.
pub fn check_union_rows(plan: &Plan, bucket: u32, rows: &[Vec<u8>]) -> Result<()> {
    match rows.iter().position(|r| plan.bucket_of(r) != bucket) {
        None => Ok(()),
        Some(index) => {
            let why = format!("bucket {bucket}: union row {index} is of bucket {}", plan.bucket_of(&rows[index]));
            Err(Deviation::StagedMessage { why }.into())
        }
    }
}

/// Runs buckets' rounds on their items: the runner's own (in one process), or an
/// executor's (on a cluster).
#[derive(Debug)]
pub struct Worker {
    exchange: Exchange,
    plan: Plan,
    seed: RunSeed,
    job: Job,
    keep_alive: bool,
    /// The most bytes the live roles may hold together ([`Worker::limit_live`]).
    budget: u64,
    /// Each live role and the bytes it is counted for.
    live: BTreeMap<u32, (Live, u64)>,
}

impl Worker {
    /// A worker of `plan` writing to `exchange` (no key is needed to write parts). With
    /// `keep_alive`, each bucket's role stays running between stages.
    pub fn new(exchange: Exchange, plan: Plan, seed: RunSeed, job: Job, keep_alive: bool) -> Self {
        Self { exchange, plan, seed, job, keep_alive, budget: u64::MAX, live: BTreeMap::new() }
    }

    /// Keeps roles alive only while they fit in `bytes` together, counting each at the
    /// protocol's [`live_role_bytes`](crate::protocols::spec::Spec::live_role_bytes) per
    /// item of its bucket and its peer's: a bucket whose role does not fit replays its
    /// rounds from the start at each stage instead (slower, in the memory of one bucket).
    pub fn limit_live(&mut self, bytes: u64) {
        self.budget = bytes;
    }

    /// The bytes a live role of a bucket of `own` items whose peer has `peer` is counted
    /// for.
    fn role_bytes(&self, own: u64, peer: u64) -> u64 {
        (self.job.protocol.spec().live_role_bytes as u64).saturating_mul(own.max(peer))
    }

    fn held(&self) -> u64 {
        self.live.values().map(|(_, b)| b).sum()
    }

    /// How many buckets' roles are alive now.
    #[cfg(test)]
    pub(super) fn live_roles(&self) -> usize {
        self.live.len()
    }

    /// An executor's worker (roles kept alive, up to [`MAX_LIVE_BUCKETS`] buckets in the
    /// run; beyond, each stage replays) for `role`'s side of the run with these
    /// `settings` and `size` items: the plan rebuilt from both hellos (this party's from
    /// the seed in `workdir`, the peer's from the exchange) and checked to be the one the
    /// runner agreed, whose [`Plan::id`] is `plan_id`.
    pub fn open(
        settings: &Settings,
        role: Role,
        size: usize,
        exchange: impl Into<Location>,
        workdir: &Workdir,
        plan_id: &str,
    ) -> Result<Self> {
        let seed = workdir.read_seed()?;
        let exchange = Exchange::unauthenticated(exchange);
        let ours = settings.hello(role, size, &seed);
        let name = Exchange::hello_name(peer_of(role));
        let at = exchange.show(&name);
        let theirs =
            exchange.read(&name, MAX_HELLO_FRAME as u64)?.ok_or_else(|| Error::damaged(Path::new(&at), "missing"))?;
        let plan = Plan::agree(settings, &ours, &Hello::decode(&theirs)?)?;
        if plan.id() != plan_id {
            return Err(Error::damaged(Path::new(&at), "not the hello the runner agreed on (replaced since)"));
        }
        let job = plan.job(settings.key_columns);
        let alive = plan.buckets <= MAX_LIVE_BUCKETS;
        Ok(Self::new(exchange, plan, seed, job, alive))
    }

    /// This worker's plan.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    fn at(&self, stage: u8, what: impl Into<String>) -> impl FnOnce(Error) -> Error {
        at_named(stage, stage_label(self.job.protocol.name(), stage), self.plan.role, what)
    }

    /// Runs `task` on the bucket's `input` (always the same items, in the same order) and
    /// writes its part.
    pub fn run<I: Item>(&mut self, task: &Task, input: BucketInput<'_, I>) -> Result<Done> {
        let (k, bucket, items) = (task.stage, task.bucket, input.items);
        if bucket >= self.plan.buckets || k < 2 {
            return Err(Error::usage("task", format!("stage {k}, bucket {bucket}: not a round of this run")));
        }
        if input.values.is_some_and(|(v, _)| v.len() != items.len()) {
            return Err(Error::usage("values", format!("bucket {bucket}: not one value per item")));
        }
        if items.len() as u64 != task.own_size {
            return Err(self.at(k, format!("bucket {bucket}"))(Error::usage(
                "input",
                format!(
                    "{} items here, {} in this party's stage 1: the input changed since the run started",
                    items.len(),
                    task.own_size
                ),
            )));
        }
        // A live role goes on only from the stage before this one, whose part on disk is
        // the one it wrote: if another process ran a stage, or a marker changed, its
        // state is not the run's, and feeding it would use its randomness on other
        // messages. Every role then starts over by replay, checked against the disk. (A
        // waiting role is checked too: its empty part would otherwise pass for current.)
        if self.live.get(&bucket).is_some_and(|(role, _)| !goes_on(task, role)) {
            self.live.clear();
        }
        let (run, replayed) = if task.wait {
            (BucketRun { fresh: Vec::new(), outcome: None }, false)
        } else {
            self.advance(task, input).map_err(self.at(k, format!("bucket {bucket}")))?
        };
        let role = self.plan.role;
        let path = Exchange::part_name(k, role, bucket);
        let id = PartId { stage: k, role, part: bucket };
        let part = self
            .exchange
            .write_part(&path, self.plan.session, id, &encode_frames(&run.fresh), run.fresh.len())
            .map_err(self.at(k, ""))?;
        if let Some((live, _)) = self.live.get_mut(&bucket) {
            live.written = Some((k, part.digest.clone()));
        }
        let mut done = Done::new(bucket, part, run.outcome)?;
        done.replayed = replayed;
        if let (Learned::Union, Some(Kept::Rows(rows))) = (done.learned, &done.kept) {
            check_union_rows(&self.plan, bucket, rows).map_err(self.at(k, ""))?;
        }
        Ok(done)
    }

    /// The frames of the part `r` of `from` in `bucket`, read and checked against its
    /// marker entry.
    fn frames_of(&self, k: u8, from: Role, bucket: u32, r: &PartRef) -> Result<Vec<Vec<u8>>> {
        let whose = if from == self.plan.role { "this party's own".to_string() } else { format!("the {from}'s") };
        let fail = self.at(k, format!("{whose} stage {} message, bucket {bucket}", r.stage));
        (|| {
            if r.info.bytes > max_part_bytes(r.info.items) {
                return Err(Deviation::StagedMessage {
                    why: format!("{} bytes cannot hold {} frames", r.info.bytes, r.info.items),
                }
                .into());
            }
            let path = Exchange::part_name(r.stage, from, bucket);
            let id = PartId { stage: r.stage, role: from, part: bucket };
            let bytes = self.exchange.read_part(&path, &r.info, self.plan.session, id)?;
            Ok(decode_frames(&bytes, r.info.items)?)
        })()
        .map_err(fail)
    }

    /// The bucket's role one round further: its live role given the peer's last part,
    /// or a replay over all of them (then `true`, if there were earlier rounds).
    fn advance<I: Item>(&mut self, task: &Task, input: BucketInput<'_, I>) -> Result<(BucketRun, bool)> {
        let (k, bucket) = (task.stage, task.bucket);
        let peer = peer_of(self.plan.role);
        // Current, as `run` checked.
        if let Some((role, _)) = self.live.get(&bucket) {
            let frames = match task.theirs.last().filter(|r| r.stage == k - 1) {
                Some(r) => self.frames_of(k, peer, bucket, r)?,
                None => Vec::new(),
            };
            let run = role.advance(frames);
            if !matches!(run, Ok(BucketRun { outcome: None, .. })) {
                self.live.remove(&bucket);
            }
            return Ok((run?, false));
        }
        // Earlier rounds of this role, if any, are run again.
        let replayed = !task.ours.is_empty();
        let mut inbound = Vec::new();
        for r in &task.theirs {
            inbound.extend(self.frames_of(k, peer, bucket, r)?);
        }
        let sent: Vec<Sent> = task
            .ours
            .iter()
            .map(|r| Sent { stage: r.stage, frames: r.info.items, digest: r.info.digest.clone() })
            .collect();
        let peer_size = usize::try_from(task.peer_size)
            .map_err(|_| Error::usage("bucket", "a bucket too large for this machine"))?;
        // At least a byte, so that a budget of 0 keeps no role alive, empty ones too.
        let cost = self.role_bytes(task.own_size, task.peer_size).max(1);
        if self.keep_alive && self.held().saturating_add(cost) <= self.budget {
            let (role, run) = Live::start(
                self.job.clone(),
                self.seed.clone(),
                self.plan.clone(),
                bucket,
                OwnedInput::of(input),
                peer_size,
                inbound,
                sent,
            )?;
            if run.outcome.is_none() {
                self.live.insert(bucket, (role, cost));
            }
            return Ok((run, replayed));
        }
        Ok((run_bucket(&self.job, &self.seed, &self.plan, bucket, input, peer_size, inbound, sent)?, replayed))
    }
}

/// Whether `role`, alive, is where `task` needs it: it wrote this party's part of the
/// stage before, the one the task names.
fn goes_on(task: &Task, role: &Live) -> bool {
    let k = task.stage;
    task.ours.last().is_some_and(|r| r.stage == k - 1 && role.written == Some((k - 1, r.info.digest.clone())))
}

/// Where a stage's tasks and done files are kept in the workdir.
fn round_dir(workdir: &Workdir, stage: u8) -> PathBuf {
    workdir.root().join("rounds").join(format!("stage-{stage}"))
}

fn tasks_name(stage: u8) -> String {
    format!("rounds/stage-{stage}/tasks.json")
}

fn done_name(stage: u8, bucket: u32) -> String {
    format!("rounds/stage-{stage}/bucket-{bucket:05}.done.json")
}

fn rows_name(bucket: u32) -> String {
    format!("rounds/rows/bucket-{bucket:05}.bin")
}

fn ids_name(bucket: u32) -> String {
    format!("rounds/ids/bucket-{bucket:05}.bin")
}

/// Most bytes of a bucket's kept outcome that [`read_rows`] and [`read_ids`] read.
const MAX_KEPT_BYTES: u64 = 1 << 36;

/// Keeps what `done`'s role learned beyond counts ([`Kept`]) in the workdir; called
/// before its done file is written, so no outcome is lost. Rows are kept as frames
/// after their count; IDs as both counts, then the IDs (a bucket's IDs may exceed a
/// frame).
pub fn keep(workdir: &Workdir, done: &Done) -> Result<()> {
    match &done.kept {
        None => Ok(()),
        Some(Kept::Rows(rows)) => write_rows(workdir, done.bucket, rows),
        Some(Kept::Ids(ids)) => {
            let mut bytes = Vec::with_capacity(16 + 32 * (ids.own.len() + ids.union.len()));
            bytes.extend((ids.own.len() as u64).to_le_bytes());
            bytes.extend((ids.union.len() as u64).to_le_bytes());
            ids.own.iter().chain(&ids.union).for_each(|id| bytes.extend_from_slice(id));
            workdir.write_bytes(&ids_name(done.bucket), &bytes)
        }
    }
}

/// Keeps `rows` as bucket `bucket`'s ([`read_rows`]).
fn write_rows<R: AsRef<[u8]>>(workdir: &Workdir, bucket: u32, rows: &[R]) -> Result<()> {
    let mut bytes = (rows.len() as u64).to_le_bytes().to_vec();
    bytes.extend(encode_frames(rows));
    workdir.write_bytes(&rows_name(bucket), &bytes)
}

/// A cluster bucket's private IDs with the own items they belong to: the items (kept
/// beside the IDs by [`serve`], since a cluster's driver holds none), paired in order
/// with their IDs, and the IDs of the bucket's part of the union.
pub fn read_bucket_ids(workdir: &Workdir, bucket: u32) -> Result<(Vec<Vec<u8>>, BucketIds)> {
    let items = read_rows(workdir, bucket)?;
    let ids = read_ids(workdir, bucket, items.len())?;
    Ok((items, ids))
}

/// Checks that each of `buckets` buckets kept its private IDs (a cluster's driver reads
/// them only when the party asks for its result, so a missing file is named here, when
/// the run finishes, rather than a bucket left out of the result then).
pub fn check_ids_kept(workdir: &Workdir, buckets: u32) -> Result<()> {
    for b in 0..buckets {
        let path = workdir.root().join(ids_name(b));
        if !path.is_file() {
            return Err(Error::damaged(&path, "missing: the bucket's executor kept no IDs"));
        }
    }
    Ok(())
}

/// The rows bucket `bucket` kept ([`Kept::Rows`]; empty if there are none).
pub fn read_rows(workdir: &Workdir, bucket: u32) -> Result<Vec<Vec<u8>>> {
    let name = rows_name(bucket);
    let damaged = |why: String| Error::damaged(&workdir.root().join(&name), why);
    let Some(bytes) = workdir.read_bytes(&name, MAX_KEPT_BYTES)? else { return Ok(Vec::new()) };
    let (count, body) = bytes.split_at_checked(8).ok_or_else(|| damaged("truncated".into()))?;
    let count = u64::from_le_bytes(count.try_into().expect("8 bytes"));
    decode_frames(body, count).map_err(|e| damaged(e.to_string()))
}

/// The private IDs bucket `bucket` kept ([`Kept::Ids`]): one per own item of the
/// bucket (`own` of them) and its union's.
pub fn read_ids(workdir: &Workdir, bucket: u32, own: usize) -> Result<BucketIds> {
    let name = ids_name(bucket);
    let damaged = |why: &str| Error::damaged(&workdir.root().join(&name), why);
    let bytes = workdir.read_bytes(&name, MAX_KEPT_BYTES)?.ok_or_else(|| damaged("missing"))?;
    let (head, body) = bytes.split_at_checked(16).ok_or_else(|| damaged("truncated"))?;
    let count = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
    let (mine, union) = (count(&head[..8]), count(&head[8..]));
    let (ids, rest) = body.as_chunks::<32>();
    if !rest.is_empty() || mine.checked_add(union) != Some(ids.len() as u64) {
        return Err(damaged("not the IDs its counts say"));
    }
    if mine != own as u64 {
        return Err(damaged("not one ID per item of the bucket"));
    }
    let (mine, union) = ids.split_at(own);
    Ok(BucketIds { own: mine.to_vec(), union: union.to_vec() })
}

fn error_name(stage: u8, bucket: u32) -> String {
    format!("rounds/stage-{stage}/bucket-{bucket:05}.error.json")
}

/// A worker's failure as its error file keeps it: whose fault, and the message.
#[derive(Debug, Serialize, Deserialize)]
struct Failure {
    peer: bool,
    network: bool,
    message: String,
}

/// A stage's tasks as posted: by which driver (`attempt`), and what.
#[derive(Debug, Serialize, Deserialize)]
struct Posted {
    attempt: String,
    tasks: Vec<Task>,
}

/// The runner, on a cluster: publishes stage `stage`'s tasks for the executors, as the
/// driver `attempt` (and clears the error files an earlier attempt at the stage left).
pub fn post(workdir: &Workdir, stage: u8, tasks: &[Task], attempt: &str) -> Result<()> {
    let dir = round_dir(workdir, stage);
    std::fs::create_dir_all(&dir).map_err(|e| Error::file(&dir, e))?;
    for t in tasks {
        let path = workdir.root().join(error_name(stage, t.bucket));
        if path.exists() {
            std::fs::remove_file(&path).map_err(|e| Error::file(&path, e))?;
        }
    }
    workdir.write_json(&tasks_name(stage), &Posted { attempt: attempt.into(), tasks: tasks.to_vec() })
}

/// The runner, on a cluster: what the executors did with stage `stage`'s `tasks`, once
/// every one is done (None before); a worker's failure comes back as the error it was.
pub fn collect(workdir: &Workdir, stage: u8, tasks: &[Task]) -> Result<Option<Vec<Done>>> {
    let mut dones = Vec::with_capacity(tasks.len());
    for t in tasks {
        if let Some(d) = workdir.read_json::<Done>(&done_name(stage, t.bucket))? {
            if d.bucket != t.bucket {
                return Err(Error::damaged(
                    &workdir.root().join(done_name(stage, t.bucket)),
                    "the done file of another bucket",
                ));
            }
            dones.push(d);
            continue;
        }
        if let Some(f) = workdir.read_json::<Failure>(&error_name(stage, t.bucket))? {
            let kind = match (f.peer, f.network) {
                (true, _) => ErrorKind::Peer,
                (_, true) => ErrorKind::Network,
                _ => ErrorKind::Local,
            };
            return Err(Error::Worker { kind, message: f.message });
        }
        return Ok(None);
    }
    Ok(Some(dones))
}

/// Why [`serve`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    /// Every bucket it holds ended.
    Ended,
    /// No tasks came for `linger`: the peer is slow, and the executor is given back (a
    /// later stage starts the roles again by replay).
    Lingered,
    /// Another driver of the party posted the stage (this one's was killed and the run
    /// started again): its executors run the buckets.
    Superseded,
}

/// An executor's part of a cluster run: runs, from stage `from` on, the tasks the runner
/// posts for the buckets it holds (`items`: each bucket's items in a fixed order), its
/// roles kept alive between stages as far as the worker's budget allows
/// ([`Worker::limit_live`]; with `values`, each bucket's values in the order of its
/// items, and their bound: the value holder of `sum`), until none of its buckets has a task (each stage's
/// tasks name every bucket whose role has not ended), no task comes for `linger`, or
/// another driver than `attempt` posts. What a role learned beyond counts is kept per
/// bucket when it ends ([`keep`]; the intersection as the matched items, [`read_rows`]).
/// A failure is also left in an error file, where the runner finds it.
#[allow(clippy::too_many_arguments)] // the buckets, their values, the timing, the attempt
pub fn serve<I: Item>(
    workdir: &Workdir,
    worker: &mut Worker,
    items: &BTreeMap<u32, Vec<I>>,
    values: Option<(&BTreeMap<u32, Vec<u64>>, u64)>,
    linger: Duration,
    attempt: &str,
    from: u8,
) -> Result<Served> {
    let mut stage = from;
    loop {
        let Some(posted) = wait_for_tasks(workdir, stage, linger)? else { return Ok(Served::Lingered) };
        if posted.attempt != attempt {
            return Ok(Served::Superseded);
        }
        let mine: Vec<&Task> = posted.tasks.iter().filter(|t| items.contains_key(&t.bucket)).collect();
        if mine.is_empty() {
            return Ok(Served::Ended);
        }
        for t in mine {
            if workdir.read_json::<Done>(&done_name(stage, t.bucket))?.is_some() {
                continue; // done by an earlier attempt at this task
            }
            let own = &items[&t.bucket];
            let values = values.map(|(v, bound)| (v.get(&t.bucket).map_or(&[][..], Vec::as_slice), bound));
            let input = BucketInput { items: own.as_slice(), values };
            let done = worker.run(t, input).and_then(|mut d| {
                if d.learned == Learned::Intersection && !d.matches.is_empty() {
                    d.kept = Some(Kept::Rows(d.matches.iter().map(|&p| own[p as usize].as_ref().to_vec()).collect()));
                }
                if d.learned == Learned::Ids {
                    // The driver holds no items: it pairs these with the IDs, in order.
                    write_rows(workdir, t.bucket, own)?;
                }
                keep(workdir, &d)?;
                Ok(d)
            });
            let mut done = match done {
                Ok(d) => d,
                Err(e) => {
                    let f = Failure {
                        peer: e.kind() == ErrorKind::Peer,
                        network: e.kind() == ErrorKind::Network,
                        message: e.to_string(),
                    };
                    let _ = workdir.write_json(&error_name(stage, t.bucket), &f);
                    return Err(e);
                }
            };
            done.matches.clear(); // kept in its file; the runner needs the count
            workdir.write_json(&done_name(stage, t.bucket), &done)?;
        }
        stage = stage.checked_add(1).ok_or_else(|| Error::usage("stage", "too many stages"))?;
    }
}

/// Stage `stage`'s tasks once the runner posted them, looking more slowly as the wait
/// grows (5 ms up to 200 ms); None after `linger`.
fn wait_for_tasks(workdir: &Workdir, stage: u8, linger: Duration) -> Result<Option<Posted>> {
    let start = Instant::now();
    let mut pause = Duration::from_millis(5);
    loop {
        if let Some(t) = workdir.read_json::<Posted>(&tasks_name(stage))? {
            return Ok(Some(t));
        }
        if start.elapsed() >= linger {
            return Ok(None);
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(200));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocols::{Operation, Protocol};
    use crate::staged::RunSeed;

    #[test]
    fn executors_of_an_earlier_driver_stop_when_another_posts_and_idle_ones_linger_out() {
        let dir = tempfile::tempdir().unwrap();
        let w = Workdir::create(&dir.path().join("w")).unwrap();
        let items: BTreeMap<u32, Vec<Vec<u8>>> = BTreeMap::from([(0, vec![b"a".to_vec()])]);
        let (plan, a) = receivers_plan(1);
        let job = plan.job(1);
        let mut worker = Worker::new(Exchange::unauthenticated(dir.path()), plan, a, job, true);
        let none = serve(&w, &mut worker, &items, None, Duration::from_millis(20), "old", 2).unwrap();
        assert_eq!(none, Served::Lingered);
        let task = Task { stage: 2, bucket: 0, peer_size: 1, own_size: 1, theirs: vec![], ours: vec![], wait: true };
        post(&w, 2, &[task], "new").unwrap();
        let got = serve(&w, &mut worker, &items, None, Duration::from_secs(5), "old", 2).unwrap();
        assert_eq!(got, Served::Superseded);
        assert!(w.read_json::<Done>(&done_name(2, 0)).unwrap().is_none(), "the old one did nothing");
    }

    #[test]
    fn private_ids_beyond_a_frame_are_kept_and_read_back_and_damage_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let w = Workdir::create(dir.path()).unwrap();
        // More IDs than one 64 MiB frame holds: a bucket of 2^21 items and more.
        let id = |i: u32| {
            let mut b = [0u8; 32];
            b[..4].copy_from_slice(&i.to_le_bytes());
            b
        };
        let own: Vec<[u8; 32]> = (0..(1u32 << 21) + 3).map(id).collect();
        let union: Vec<[u8; 32]> = (7..20).map(id).collect();
        let part = PartInfo { items: 0, bytes: 0, digest: String::new() };
        let outcome = Outcome::PrivateIds { own: own.clone(), union: union.clone() };
        keep(&w, &Done::new(3, part, Some(outcome)).unwrap()).unwrap();
        let got = read_ids(&w, 3, own.len()).unwrap();
        assert!(got.own == own && got.union == union);
        let e = read_ids(&w, 3, own.len() - 1).unwrap_err().to_string();
        assert!(e.contains("not one ID per item"), "{e}");
        let path = dir.path().join(ids_name(3));
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.pop();
        std::fs::write(&path, &bytes).unwrap();
        let e = read_ids(&w, 3, own.len()).unwrap_err().to_string();
        assert!(e.contains("not the IDs its counts say") && e.contains("bucket-00003"), "{e}");
        assert!(read_ids(&w, 4, 0).unwrap_err().to_string().contains("missing"));
        // A cluster's finish names a bucket whose IDs are missing (else the result would
        // lack its rows without a word).
        let small = Outcome::PrivateIds { own: vec![id(1)], union: vec![id(1)] };
        for b in 0..3 {
            keep(
                &w,
                &Done::new(b, PartInfo { items: 0, bytes: 0, digest: String::new() }, Some(small.clone())).unwrap(),
            )
            .unwrap();
        }
        check_ids_kept(&w, 4).unwrap();
        std::fs::remove_file(dir.path().join(ids_name(1))).unwrap();
        let e = check_ids_kept(&w, 4).unwrap_err().to_string();
        assert!(e.contains("bucket-00001") && e.contains("kept no IDs"), "{e}");
    }

    /// The plan of a vole run between a receiver (whose seed is returned) and a sender
    /// of `n` items each.
    fn receivers_plan(n: usize) -> (Plan, RunSeed) {
        let settings = Settings::new("t", Protocol::Vole, Operation::Intersection);
        let (a, b) = (RunSeed::generate(), RunSeed::generate());
        let (ha, hb) = (settings.hello(Role::Receiver, n, &a), settings.hello(Role::Sender, n, &b));
        (Plan::agree(&settings, &ha, &hb).unwrap(), a)
    }

    /// A live role that waits in a stage is checked to be where the task says this
    /// party's parts are, as one that runs is: if another process wrote the stage before,
    /// the role is dropped (else its empty part would pass for current, and it would go on
    /// from a state that is not the run's at the next stage).
    #[test]
    fn a_waiting_live_role_is_dropped_when_its_last_part_is_not_the_runs() {
        let dir = tempfile::tempdir().unwrap();
        let (plan, a) = receivers_plan(2);
        let items = [b"one".to_vec(), b"two".to_vec()];
        let input = || BucketInput { items: &items, values: None };
        let first = |worker: &mut Worker| {
            let task =
                Task { stage: 2, bucket: 0, peer_size: 2, own_size: 2, theirs: vec![], ours: vec![], wait: false };
            worker.run(&task, input()).unwrap().part
        };
        let wait_after = |part: PartInfo| Task {
            stage: 3,
            bucket: 0,
            peer_size: 2,
            own_size: 2,
            theirs: vec![],
            ours: vec![PartRef { stage: 2, info: part }],
            wait: true,
        };
        for (other, alive) in [(false, 1), (true, 0)] {
            let ex = Exchange::unauthenticated(&dir.path().join(format!("ex-{other}")));
            let mut worker = Worker::new(ex, plan.clone(), a.clone(), plan.job(1), true);
            let mut part = first(&mut worker);
            assert_eq!(worker.live_roles(), 1);
            if other {
                part.digest = "0".repeat(64); // another process's stage 2
            }
            worker.run(&wait_after(part), input()).unwrap();
            assert_eq!(worker.live_roles(), alive, "another process's stage 2: {other}");
        }
    }

    #[test]
    fn a_worker_refuses_other_items_than_the_run_started_with() {
        let dir = tempfile::tempdir().unwrap();
        let (plan, a) = receivers_plan(2);
        let job = plan.job(1);
        let mut worker = Worker::new(Exchange::unauthenticated(dir.path()), plan, a, job, false);
        let task = Task { stage: 2, bucket: 0, peer_size: 2, own_size: 2, theirs: vec![], ours: vec![], wait: false };
        let one = [b"only one".to_vec()];
        let e = worker.run(&task, BucketInput { items: &one, values: None }).unwrap_err().to_string();
        assert!(e.contains("bucket 0") && e.contains("1 items here, 2 in this party's stage 1"), "{e}");
    }
}
