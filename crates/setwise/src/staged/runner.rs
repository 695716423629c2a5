//! The stages of a staged run over an [`Exchange`] directory and a [`Workdir`], for the
//! CLI (`setwise stage`) and tests. Each call of [`Runner::step`] runs the next stage of
//! this party that has not finished (read from the markers, never chosen by the caller)
//! once the peer's messages it needs are there. ecdh runs by its own steps, below;
//! every other protocol by replay ([`super::replay`], stages in `staged::rounds`).
//!
//! | stage | receiver | sender | needs |
//! |---|---|---|---|
//! | 0 hello | hello | hello | — |
//! | 1 blind | b·H(y) per bucket | a_i·H(x) per bucket (mixed: cardinality) | the peer's hello |
//! | 2 re-blind | — | a_i·b·H(y) per bucket (mixed: cardinality) | the receiver's stage 1 |
//! | 3 finish | the result | — | the sender's stages 1 and 2 |
//!
//! Idempotence: a stage writes its parts atomically, then its marker; a stage with a
//! marker is never run again, and a stage run again after an interruption writes the
//! same bytes (every secret and order comes from the seed). Safety: the input's
//! fingerprint is kept at stage 0 and a changed input is refused; the digest of each
//! peer message a stage consumed is journaled, and a peer message that changed since is
//! refused (re-using an exponent on other points would leak).

use super::auth::ExchangeKey;
use super::bucket::{assign, select};
use super::ecdh;
use super::location::Location;
use super::message::{decode_part, encode_part, max_part_bytes};
use super::plan::{Plan, Settings};
use super::seed::RunSeed;
pub use super::stages::{MAX_LIVE_BUCKETS, RECEIVER_STAGES, SENDER_STAGES, stage_label, stage_name, stages_of};
pub(super) use super::stages::{at_named, peer_of};
use super::store::{Exchange, FORMAT, Marker, PartId, PartInfo, Workdir, shown};
use crate::crypto::dst::{self, Domain, SessionId};
use crate::crypto::ristretto::Encoded;
use crate::crypto::rng::fill_os;
use crate::error::{Deviation, Error, ErrorKind, Result};
use crate::io::hex;
use crate::protocols::ecdh::messages::{DOUBLE_BLINDED, RECEIVER_BLINDED, SENDER_BLINDED};
use crate::protocols::{Operation, Outcome, Protocol, Role};
use crate::session::Item;
use crate::session::{Hello, Input, MAX_HELLO_FRAME};
use crate::wire::stream::Stream;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// What a call of [`Runner::step`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Ran this stage to its marker.
    Ran(u8),
    /// The next stage cannot run yet: it waits for the peer's marker named here.
    Waiting {
        /// The stage that waits.
        stage: u8,
        /// The marker it waits for.
        marker: String,
    },
    /// Every stage of this party has its marker.
    Finished,
}

/// What the workdir keeps of the run's settings and input (`run.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct RunRecord {
    format: String,
    run: String,
    role: String,
    protocol: String,
    operation: String,
    key_columns: usize,
    buckets: String,
    bucket_key: String,
    /// The exchange key's fingerprint (absent in a run started before keys existed).
    #[serde(default)]
    exchange_key: String,
    items: u64,
    input: String,
}

/// The receiver's result as its workdir keeps it (`result.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunResult {
    /// The operation.
    pub operation: String,
    /// |X ∩ Y| (the number of rows a union added, or of IDs in a union).
    pub size: u64,
    /// `sum`, for the value holder: the sum of its values over X ∩ Y, in decimal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sum: Option<String>,
}

/// The fingerprint of a party's distinct items (in order) and key-column count.
pub fn input_fingerprint<I: AsRef<[u8]>>(items: &[I], key_columns: usize) -> String {
    fingerprint_of(items, None, key_columns)
}

/// [`input_fingerprint`], with each item's value and their bound when the role takes
/// values (a changed value would otherwise show only as a replay that differs).
fn fingerprint_of<I: AsRef<[u8]>>(items: &[I], values: Option<(&[u64], u64)>, key_columns: usize) -> String {
    let mut h = Domain::fixed(dst::STAGED_INPUT).hasher();
    h.update(&(key_columns as u64).to_le_bytes()).update(&(items.len() as u64).to_le_bytes());
    for i in items {
        h.update(&(i.as_ref().len() as u64).to_le_bytes()).update(i.as_ref());
    }
    if let Some((values, bound)) = values {
        h.update(b"values").update(&bound.to_le_bytes());
        values.iter().for_each(|v| _ = h.update(&v.to_le_bytes()));
    }
    h.finalize().to_hex().to_string()
}

/// One party's staged run: its settings, role, exchange, workdir and items.
#[derive(Debug)]
pub struct Runner<'a, I> {
    pub(super) settings: Settings,
    pub(super) role: Role,
    pub(super) exchange: Exchange,
    pub(super) workdir: Workdir,
    pub(super) items: &'a [I],
    /// For a role that takes values (`sum`'s value holder): one per item, and their bound.
    pub(super) values: Option<(&'a [u64], u64)>,
    record: RunRecord,
    attempt: String,
    /// Replayed runs: whether buckets' roles stay alive between stages
    /// ([`Runner::keep_roles_alive`]), and those that are.
    pub(super) keep_alive: bool,
    /// The most bytes the live roles may hold together ([`Runner::limit_live_roles`]).
    pub(super) live_budget: u64,
    /// Replayed runs in this process: the worker that runs the buckets' rounds (and
    /// keeps their live roles), made at the first round.
    pub(super) worker: std::cell::RefCell<Option<super::work::Worker>>,
    /// Replayed runs on a cluster: where the buckets are, instead of `items`.
    pub(super) remote: Option<Box<dyn Remote + 'a>>,
    /// The items of each bucket, computed once per runner (every stage needs them).
    assigned: std::cell::OnceCell<Vec<Vec<u32>>>,
    /// The workdir's lock, held while the runner lives.
    _lock: std::fs::File,
}

/// Where a runner's buckets are when they are not in its process: a cluster's
/// executors, which hold the items and run the rounds ([`super::work`]). The runner keeps
/// the exchange key, the markers, the journal and the decisions; the remote only runs.
pub trait Remote {
    /// This party's item count in each of `plan`'s buckets.
    fn bucket_sizes(&self, plan: &Plan) -> Result<Vec<u64>>;
    /// Runs stage `stage`'s `tasks` (each bucket's role one round further) and returns
    /// what each did, in the tasks' order.
    fn run(&self, plan: &Plan, stage: u8, tasks: &[super::work::Task]) -> Result<Vec<super::work::Done>>;
}

impl std::fmt::Debug for dyn Remote + '_ {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Remote")
    }
}

impl<'a> Runner<'a, Vec<u8>> {
    /// Opens `role`'s side of a replayed run whose items are elsewhere (`remote`): `size`
    /// distinct items with the given `fingerprint` (the caller's, of the same items at
    /// every call). ecdh, whose stages need the items here, is refused.
    #[allow(clippy::too_many_arguments)] // as `open`, with the items' size and fingerprint
    pub fn open_remote(
        settings: Settings,
        role: Role,
        exchange: impl Into<Location>,
        workdir: &Path,
        (size, fingerprint): (u64, String),
        key: ExchangeKey,
        remote: Box<dyn Remote + 'a>,
    ) -> Result<Self> {
        if settings.protocol.spec().own_stages {
            return Err(Error::usage(
                "protocol",
                format!("a staged {} run holds its items in the runner (Runner::open)", settings.protocol),
            ));
        }
        if settings.operation == Operation::Shares {
            return Err(Error::usage(
                "operation",
                format!(
                    "a staged {} runs in one process (setwise stage); on a cluster: intersection, cardinality, sum, \
                 union and private-id",
                    settings.operation
                ),
            ));
        }
        let mut r = Self::start(settings, role, exchange, workdir, &[], (size, fingerprint), key)?;
        r.remote = Some(remote);
        Ok(r)
    }
}

impl<'a, I: Item> Runner<'a, I> {
    /// Opens `role`'s side of the run (creating the workdir), whose markers and abort
    /// notes are sealed and checked under `key` (both operators hold it). Refuses
    /// settings, an input or a key other than those the run started with.
    pub fn open(
        settings: Settings,
        role: Role,
        exchange: impl Into<Location>,
        workdir: &Path,
        items: &'a [I],
        key: ExchangeKey,
    ) -> Result<Self> {
        Self::open_input(settings, role, exchange, workdir, Input::Items(items), key)
    }

    /// [`Runner::open`] with the role's input: its items, or for the value holder of
    /// `sum` its items and values ([`Input::Values`]); other inputs are refused.
    pub fn open_input(
        settings: Settings,
        role: Role,
        exchange: impl Into<Location>,
        workdir: &Path,
        input: Input<'a, I>,
        key: ExchangeKey,
    ) -> Result<Self> {
        let takes = settings.protocol.spec().takes(settings.operation, role);
        if input.kind() != takes {
            return Err(Error::usage(
                "input",
                format!("{} {} takes {takes:?} from the {role}, not {input:?}", settings.protocol, settings.operation),
            ));
        }
        let (items, values) = match input {
            Input::Items(items) => (items, None),
            Input::Values { items, values, bound } if values.len() == items.len() => (items, Some((values, bound))),
            other => {
                return Err(Error::usage("input", format!("a staged run takes items (and values), not {other:?}")));
            }
        };
        let fingerprint = fingerprint_of(items, values, settings.key_columns);
        let mut r = Self::start(settings, role, exchange, workdir, items, (items.len() as u64, fingerprint), key)?;
        r.values = values;
        Ok(r)
    }

    fn start(
        settings: Settings,
        role: Role,
        exchange: impl Into<Location>,
        workdir: &Path,
        items: &'a [I],
        (size, fingerprint): (u64, String),
        key: ExchangeKey,
    ) -> Result<Self> {
        settings.validate()?;
        if !matches!(role, Role::Sender | Role::Receiver) {
            return Err(Error::usage("role", "a staged run has a sender and a receiver"));
        }
        let workdir = Workdir::create(workdir)?;
        let record = RunRecord {
            format: FORMAT.into(),
            run: settings.run_id.clone(),
            role: role.name().into(),
            protocol: settings.protocol.name().into(),
            operation: settings.operation.name().into(),
            key_columns: settings.key_columns,
            buckets: settings.buckets.to_string(),
            bucket_key: settings.bucket_key.as_ref().map_or("session".into(), |k| k.fingerprint()),
            exchange_key: key.fingerprint(),
            items: size,
            input: fingerprint,
        };
        if let Some(old) = workdir.read_json::<RunRecord>("run.json")? {
            check_record(&old, &record, workdir.root())?;
        }
        let lock = workdir.lock()?;
        let mut attempt = [0u8; 8];
        fill_os(&mut attempt);
        let exchange = Exchange::new(exchange, key, &settings.run_id);
        Ok(Self {
            settings,
            role,
            exchange,
            workdir,
            items,
            values: None,
            record,
            attempt: hex(&attempt),
            keep_alive: false,
            live_budget: u64::MAX,
            worker: Default::default(),
            remote: None,
            assigned: Default::default(),
            _lock: lock,
        })
    }

    /// The indices of this party's items in each bucket of `plan` (the same plan at every
    /// stage of a run: both hellos are fixed at stage 0).
    pub(super) fn buckets(&self, plan: &Plan) -> &[Vec<u32>] {
        self.assigned.get_or_init(|| assign(plan, self.items))
    }

    /// This party's number of distinct items.
    fn size(&self) -> usize {
        self.record.items as usize
    }

    /// For a caller that runs many stages with this runner (`setwise stage run`): a
    /// replayed run keeps each bucket's role running between stages instead of replaying
    /// it from the start at each (at most [`MAX_LIVE_BUCKETS`] buckets; their state is in
    /// memory at once, as in a connected run). Another process still resumes by replay.
    pub fn keep_roles_alive(&mut self) {
        self.keep_alive = true;
    }

    /// With [`keep_roles_alive`](Self::keep_roles_alive): keeps alive only the roles
    /// that fit in `bytes` together (in bucket order, counted as
    /// [`Worker::limit_live`](super::work::Worker::limit_live) does); the others replay
    /// at each stage. Bounds a large run's memory at the cost of repeated rounds. Takes
    /// effect if called before the run's first round (when its worker is made).
    pub fn limit_live_roles(&mut self, bytes: u64) {
        self.live_budget = bytes;
    }

    /// Whether the run replays the protocol's roles ([`super::replay`]) rather than
    /// running stages of its own (`Spec::own_stages`: ecdh's).
    pub(super) fn replayed(&self) -> bool {
        !self.settings.protocol.spec().own_stages
    }

    /// What stage `n` of this run does.
    pub fn stage_label(&self, n: u8) -> String {
        stage_label(self.settings.protocol.name(), n)
    }

    /// Where an error happened: this party's stage `stage`, and `what` it concerned.
    pub(super) fn at_stage(&self, stage: u8, what: impl Into<String>) -> impl FnOnce(Error) -> Error {
        at_named(stage, self.stage_label(stage), self.role, what)
    }

    /// This party's first stage without a marker, if any.
    pub fn next_stage(&self) -> Result<Option<u8>> {
        if self.replayed() {
            return self.replay_next_stage();
        }
        for &s in stages_of(self.role) {
            if self.exchange.read_marker(s, self.role)?.is_none() {
                return Ok(Some(s));
            }
        }
        Ok(None)
    }

    /// The peer's marker that stage `stage` still waits for, if any. Fails if the peer
    /// stopped the run.
    pub fn waiting_for(&self, stage: u8) -> Result<Option<String>> {
        let peer = peer_of(self.role);
        if let Some(why) = self.exchange.read_abort(peer).map_err(self.at_stage(stage, ""))? {
            return Err(self.at_stage(stage, "")(Error::PeerAborted(why)));
        }
        if self.replayed() {
            return self.replay_waits_for(stage);
        }
        let needs: &[(u8, Role)] = match (stage, self.role) {
            (0, _) => &[],
            (1, _) => &[(0, peer)],
            (2, _) => &[(1, Role::Receiver)],
            _ => &[(1, Role::Sender), (2, Role::Sender)],
        };
        for &(s, r) in needs {
            if self.exchange.read_marker(s, r).map_err(self.at_stage(stage, ""))?.is_none() {
                return Ok(Some(self.exchange.show(&Exchange::marker_name(s, r))));
            }
        }
        Ok(None)
    }

    /// Runs the next stage if it can run. `deliver` gets the receiver's result in its
    /// finish, before the stage's marker is written (so an output that failed to appear
    /// makes the finish run again). A failure caused by the peer's messages is also
    /// recorded in the exchange (`abort-<role>.json`), so the peer stops waiting.
    pub fn step(&self, deliver: &mut dyn FnMut(&Outcome) -> Result<()>) -> Result<Step> {
        let Some(stage) = self.next_stage()? else { return Ok(Step::Finished) };
        // A refusal of the peer's marker (one that does not verify, say) while checking
        // what the stage waits for is told to the peer as a refusal while running is.
        let ran = match self.waiting_for(stage) {
            Ok(Some(marker)) => return Ok(Step::Waiting { stage, marker }),
            Ok(None) => self.run_stage(stage, deliver),
            Err(e) => Err(e),
        };
        match ran {
            Ok(()) => Ok(Step::Ran(stage)),
            Err(e) => {
                if e.kind() == ErrorKind::Peer
                    && !matches!(e, Error::Stage { ref source, .. } if matches!(**source, Error::PeerAborted(_)))
                {
                    let _ = self.exchange.write_abort(self.role, &e.to_string());
                }
                Err(e)
            }
        }
    }

    fn run_stage(&self, stage: u8, deliver: &mut dyn FnMut(&Outcome) -> Result<()>) -> Result<()> {
        if self.replayed() && stage > 0 {
            return self.replay_stage(stage, deliver);
        }
        match (stage, self.role) {
            (0, _) => self.hello().map_err(self.at_stage(0, "")),
            (1, Role::Receiver) => self.receiver_blind(),
            (1, _) => self.sender_blind(),
            (2, _) => self.sender_reblind(),
            (_, _) => self.receiver_finish(deliver),
        }
    }

    pub(super) fn seed(&self) -> Result<RunSeed> {
        self.workdir.read_seed().map_err(|e| {
            Error::usage(
                "run_seed",
                format!(
                    "{e}: the run seed is lost, and with it the run: start a new run with a new run id and exchange"
                ),
            )
        })
    }

    pub(super) fn marker(&self, stage: u8, session: Option<SessionId>, parts: Vec<PartInfo>) -> Marker {
        Marker {
            format: FORMAT.into(),
            run: self.settings.run_id.clone(),
            protocol: self.settings.protocol.name().into(),
            operation: self.settings.operation.name().into(),
            stage,
            role: self.role.name().into(),
            session: session.map_or(String::new(), |s| hex(&s.0)),
            parts,
            attempt: self.attempt.clone(),
            setwise: env!("CARGO_PKG_VERSION").into(),
            last: false,
            mac: String::new(), // sealed when written
        }
    }

    /// Stage 0: the seed (created once), the run record, the hello and its marker.
    fn hello(&self) -> Result<()> {
        let seed = if self.workdir.has_seed() { self.seed()? } else { self.workdir.create_seed()? };
        self.workdir.write_json("run.json", &self.record)?;
        let hello = self.settings.hello(self.role, self.size(), &seed).encode();
        let path = Exchange::hello_name(self.role);
        let info = self.exchange.write_part(
            &path,
            SessionId::default(),
            PartId { stage: 0, role: self.role, part: 0 },
            &hello,
            1,
        )?;
        self.exchange.write_marker(&self.marker(0, None, vec![info]))
    }

    /// Both hellos (ours recomputed, the peer's read and checked) and the plan.
    pub(super) fn plan(&self, stage: u8, seed: &RunSeed) -> Result<Plan> {
        let ours = self.settings.hello(self.role, self.size(), seed);
        let peer = peer_of(self.role);
        let what = format!("the {peer}'s hello (stage 0)");
        let fail = |e| self.at_stage(stage, what.clone())(e);
        let m = self.exchange.read_marker(0, peer).map_err(fail)?.ok_or_else(|| fail(not_there()))?;
        let info = match m.parts.as_slice() {
            [one] if one.bytes <= MAX_HELLO_FRAME as u64 => one,
            _ => {
                return Err(fail(
                    Deviation::StagedMessage { why: "the hello marker must list one hello".into() }.into(),
                ));
            }
        };
        let path = Exchange::hello_name(peer);
        let bytes = self
            .exchange
            .read_part(&path, info, SessionId::default(), PartId { stage: 0, role: peer, part: 0 })
            .map_err(fail)?;
        let theirs = Hello::decode(&bytes).map_err(fail)?;
        self.consume(stage, &format!("stage-0/{peer}"), &m.content_digest(), &what)?;
        Plan::agree(&self.settings, &ours, &theirs).map_err(self.at_stage(stage, ""))
    }

    /// For a side that said `auto`: the protocol every bucket runs and why (`the peer
    /// named it` when the peer did), once both hellos are in the exchange; `None` before,
    /// and for a side that named its protocol.
    pub fn protocol_agreed(&self) -> Result<Option<(Protocol, &'static str)>> {
        if self.settings.protocol != Protocol::Auto
            || !self.workdir.has_seed()
            || self.exchange.read_marker(0, peer_of(self.role))?.is_none()
        {
            return Ok(None);
        }
        let plan = self.plan(1, &self.seed()?)?;
        Ok(Some((plan.protocol, plan.why.unwrap_or("the peer named it"))))
    }

    /// Journals that stage `stage` consumed the peer message `key` with `digest`, or
    /// refuses if it consumed another version of it before.
    pub(super) fn consume(&self, stage: u8, key: &str, digest: &str, what: &str) -> Result<()> {
        let mut journal: BTreeMap<String, String> = self.workdir.read_json("journal.json")?.unwrap_or_default();
        match journal.get(key) {
            Some(d) if d == digest => Ok(()),
            Some(_) => Err(self.at_stage(stage, what.to_string())(
                Deviation::StagedMessage {
                    why: "changed since this side consumed it; continuing would reuse secrets on other messages: start a new run".into(),
                }
                .into(),
            )),
            None => {
                journal.insert(key.into(), digest.into());
                self.workdir.write_json("journal.json", &journal)
            }
        }
    }

    /// Writes part `i` of this party's stage `stage` and returns its marker entry.
    fn put(&self, plan: &Plan, stage: u8, stream: Stream<32>, i: u32, values: &[Encoded]) -> Result<PartInfo> {
        let bytes = encode_part(stream, values);
        let path = Exchange::part_name(stage, self.role, i);
        self.exchange.write_part(&path, plan.session, PartId { stage, role: self.role, part: i }, &bytes, values.len())
    }

    /// Writes `parts` (by index) and the stage's marker.
    fn publish(&self, plan: &Plan, stage: u8, stream: Stream<32>, parts: &[Vec<Encoded>]) -> Result<()> {
        let infos = parts
            .iter()
            .enumerate()
            .map(|(i, p)| self.put(plan, stage, stream, i as u32, p))
            .collect::<Result<Vec<_>>>()
            .map_err(self.at_stage(stage, ""))?;
        self.exchange.write_marker(&self.marker(stage, Some(plan.session), infos)).map_err(self.at_stage(stage, ""))
    }

    /// The peer's marker of `stage` for this run, checked: its session, and B parts
    /// whose counts add up to `total` (from the hello) when given.
    pub(super) fn peer_marker(&self, stage: u8, plan: &Plan, peer_stage: u8, total: Option<u64>) -> Result<Marker> {
        let peer = peer_of(self.role);
        let what = format!("the {peer}'s stage {peer_stage} message");
        let fail = |e| self.at_stage(stage, what.clone())(e);
        let m = self.exchange.read_marker(peer_stage, peer).map_err(fail)?.ok_or_else(|| fail(not_there()))?;
        let bad = |why: String| fail(Deviation::StagedMessage { why }.into());
        if m.run != self.settings.run_id || m.session != hex(&plan.session.0) {
            return Err(bad(format!(
                "the marker is for run {} session {}, not this run's",
                shown(&m.run),
                shown(&m.session)
            )));
        }
        if m.parts.len() != plan.buckets as usize {
            return Err(bad(format!("the marker lists {} parts, not the {} agreed", m.parts.len(), plan.buckets)));
        }
        if let Some(t) = total
            && m.total_items() != t
        {
            return Err(fail(
                Deviation::Count { what: "staged message items", got: m.total_items(), expected: t }.into(),
            ));
        }
        self.consume(stage, &format!("stage-{peer_stage}/{peer}"), &m.content_digest(), &what)?;
        Ok(m)
    }

    /// Reads and decodes part `i` of the peer's stage `peer_stage`; errors name the
    /// stage and the bucket (`aligned`) or part.
    fn get(
        &self,
        stage: u8,
        plan: &Plan,
        m: &Marker,
        stream: Stream<32>,
        i: u32,
        aligned: bool,
    ) -> Result<Vec<Encoded>> {
        let peer = peer_of(self.role);
        let unit = if aligned { "bucket" } else { "part" };
        let fail = self.at_stage(stage, format!("the {peer}'s stage {} message, {unit} {i}", m.stage));
        let info = &m.parts[i as usize];
        (|| {
            if info.bytes > max_part_bytes(info.items) {
                return Err(Deviation::StagedMessage {
                    why: format!("{} bytes cannot hold {} points", info.bytes, info.items),
                }
                .into());
            }
            let path = Exchange::part_name(m.stage, peer, i);
            let bytes =
                self.exchange.read_part(&path, info, plan.session, PartId { stage: m.stage, role: peer, part: i })?;
            let n = usize::try_from(info.items).map_err(|_| Error::usage("part", "part too large for this machine"))?;
            Ok(decode_part(stream, &bytes, n)?)
        })()
        .map_err(fail)
    }

    /// Receiver, stage 1: b·H(y) per bucket.
    fn receiver_blind(&self) -> Result<()> {
        let seed = self.seed()?;
        let plan = self.plan(1, &seed)?;
        let buckets = self.buckets(&plan);
        let parts = buckets
            .iter()
            .map(|idx| ecdh::receiver_blind(&seed, &plan, &select(self.items, idx)))
            .collect::<Result<Vec<_>>>()
            .map_err(self.at_stage(1, ""))?;
        self.publish(&plan, 1, RECEIVER_BLINDED, &parts)
    }

    /// Sender, stage 1: a_i·H(x) per bucket (mixed over parts for cardinality).
    fn sender_blind(&self) -> Result<()> {
        let seed = self.seed()?;
        let plan = self.plan(1, &seed)?;
        let buckets = self.buckets(&plan);
        let mut parts = Vec::with_capacity(buckets.len());
        for (i, idx) in buckets.iter().enumerate() {
            let fail = self.at_stage(1, format!("bucket {i}"));
            parts.push(ecdh::sender_blind(&seed, &plan, i as u32, &select(self.items, idx)).map_err(fail)?);
        }
        if plan.operation == Operation::Cardinality {
            parts = ecdh::mix(&plan, parts.concat());
        }
        self.publish(&plan, 1, SENDER_BLINDED, &parts)
    }

    /// Sender, stage 2: a_i·(b·H(y)) per bucket of the receiver's stage 1 (mixed for
    /// cardinality).
    fn sender_reblind(&self) -> Result<()> {
        let seed = self.seed()?;
        let plan = self.plan(2, &seed)?;
        let m = self.peer_marker(2, &plan, 1, Some(plan.receiver_size))?;
        let mut parts = Vec::with_capacity(plan.buckets as usize);
        for i in 0..plan.buckets {
            let points = self.get(2, &plan, &m, RECEIVER_BLINDED, i, true)?;
            let fail = self.at_stage(2, format!("the receiver's stage 1 message, bucket {i}"));
            parts.push(ecdh::sender_reblind(&seed, &plan, i, &points).map_err(fail)?);
        }
        if plan.operation == Operation::Cardinality {
            parts = ecdh::mix(&plan, parts.concat());
        }
        self.publish(&plan, 2, DOUBLE_BLINDED, &parts)
    }

    /// Receiver, stage 3: the result, delivered, kept in `result.json`, then the marker.
    fn receiver_finish(&self, deliver: &mut dyn FnMut(&Outcome) -> Result<()>) -> Result<()> {
        let seed = self.seed()?;
        let plan = self.plan(3, &seed)?;
        let s1 = self.peer_marker(3, &plan, 1, Some(plan.sender_size))?;
        let buckets = self.buckets(&plan);
        let cardinality = plan.operation == Operation::Cardinality;
        let s2 = self.peer_marker(3, &plan, 2, Some(plan.receiver_size))?;
        let outcome = if cardinality {
            let mut sender = Vec::new(); // grown as parts are read, never sized from the hello
            for i in 0..plan.buckets {
                let points = self.get(3, &plan, &s1, SENDER_BLINDED, i, false)?;
                let fail = self.at_stage(3, format!("the sender's stage 1 message, part {i}"));
                sender.extend(ecdh::receiver_reblind(&seed, &plan, &points).map_err(fail)?);
            }
            let set = ecdh::sender_set(sender).map_err(self.at_stage(3, "the sender's stage 1 message"))?;
            let mut count = 0u64;
            for i in 0..plan.buckets {
                let own = self.get(3, &plan, &s2, DOUBLE_BLINDED, i, false)?;
                count += ecdh::matches(&set, &own).len() as u64;
            }
            Outcome::Cardinality(count)
        } else {
            let mut matched = Vec::new();
            for (i, idx) in buckets.iter().enumerate() {
                let i = i as u32;
                let due = s2.parts[i as usize].items;
                if due != idx.len() as u64 {
                    let what = format!("the sender's stage 2 message, bucket {i}");
                    return Err(self.at_stage(3, what)(
                        Deviation::Count { what: "DoubleBlinded", got: due, expected: idx.len() as u64 }.into(),
                    ));
                }
                let points = self.get(3, &plan, &s1, SENDER_BLINDED, i, true)?;
                let fail = self.at_stage(3, format!("the sender's stage 1 message, bucket {i}"));
                let set = ecdh::receiver_reblind(&seed, &plan, &points).and_then(ecdh::sender_set).map_err(fail)?;
                let own = self.get(3, &plan, &s2, DOUBLE_BLINDED, i, true)?;
                matched.extend(ecdh::matches(&set, &own).into_iter().map(|p| idx[p] as usize));
            }
            matched.sort_unstable();
            Outcome::Intersection(matched)
        };
        deliver(&outcome).map_err(self.at_stage(3, "delivering the result"))?;
        let size = match &outcome {
            Outcome::Intersection(m) => m.len() as u64,
            Outcome::Cardinality(c) => *c,
            _ => 0,
        };
        self.workdir
            .write_json("result.json", &RunResult { operation: plan.operation.name().into(), size, sum: None })?;
        self.exchange.write_marker(&self.marker(3, Some(plan.session), Vec::new())).map_err(self.at_stage(3, ""))
    }

    /// The receiver's result kept by its finish, if it ran.
    pub fn result(&self) -> Result<Option<RunResult>> {
        self.workdir.read_json("result.json")
    }
}

pub(super) fn not_there() -> Error {
    Deviation::StagedMessage { why: "its marker is not there".into() }.into()
}

/// Refuses to go on with settings or an input that differ from the run's start.
fn check_record(old: &RunRecord, new: &RunRecord, workdir: &Path) -> Result<()> {
    let fields = [
        ("run id", &old.run, &new.run),
        ("role", &old.role, &new.role),
        ("protocol", &old.protocol, &new.protocol),
        ("operation", &old.operation, &new.operation),
        ("buckets", &old.buckets, &new.buckets),
        ("bucket key", &old.bucket_key, &new.bucket_key),
        ("exchange key (fingerprint)", &old.exchange_key, &new.exchange_key),
    ];
    for (name, a, b) in fields {
        if a != b {
            return Err(Error::usage(
                "settings",
                format!("{name}: the run in {} was started with {a}, this invocation has {b}", workdir.display()),
            ));
        }
    }
    if old.key_columns != new.key_columns || old.items != new.items || old.input != new.input {
        return Err(Error::usage(
            "input",
            format!(
                "the input changed since stage 0 of run {} ({} distinct items then, {} now; fingerprint {} then, {} now): \
             a run must use the input it started with (start a new run for a new input)",
                old.run,
                old.items,
                new.items,
                old.input.get(..16).unwrap_or(&old.input),
                new.input.get(..16).unwrap_or(&new.input)
            ),
        ));
    }
    Ok(())
}

/// Where a run stands, one line per stage and role, from the exchange's markers: checked
/// when `e` has the exchange key, else marked as not authenticated.
pub fn status(e: &Exchange) -> Result<Vec<String>> {
    let unverified = if e.is_authenticated() { "" } else { "not authenticated: " };
    let mut lines = Vec::new();
    // The protocol, from the first marker that names one (the status of an ecdh run
    // lists its fixed stages; of a replayed run, those written and the next).
    let mut protocol = None;
    for stage in 0..super::replay::MAX_STAGES {
        let mut found = false;
        let mut stage_lines = Vec::new();
        for role in [Role::Receiver, Role::Sender] {
            let state = match e.read_marker(stage, role) {
                Ok(Some(m)) => {
                    found = true;
                    protocol.get_or_insert_with(|| m.protocol.clone());
                    format!(
                        "done ({unverified}run {}, {} parts, {} items, attempt {}{})",
                        shown(&m.run),
                        m.parts.len(),
                        m.total_items(),
                        shown(&m.attempt),
                        if m.last { ", its last stage" } else { "" }
                    )
                }
                Ok(None) => "not done".into(),
                Err(err) => {
                    found = true;
                    format!("unreadable marker: {err}")
                }
            };
            stage_lines.push((role, state));
        }
        let ecdh = protocol.as_deref().is_none_or(|p| p == "ecdh");
        if (ecdh && stage > 3) || (!ecdh && !found && stage > 1) {
            break;
        }
        let name = stage_label(protocol.as_deref().unwrap_or("ecdh"), stage);
        for (role, state) in stage_lines {
            if ecdh && !stages_of(role).contains(&stage) {
                continue;
            }
            lines.push(format!("stage {stage} ({name}) {role}: {state}"));
        }
    }
    for role in [Role::Receiver, Role::Sender] {
        match e.read_abort(role) {
            Ok(Some(why)) => {
                let tag = if e.is_authenticated() { "" } else { " (the note is not authenticated)" };
                lines.push(format!("the {role} stopped the run{tag}: {why}"));
            }
            Ok(None) => {}
            Err(err) => lines.push(format!("unreadable abort note of the {role}: {err}")),
        }
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocols::Protocol;
    use crate::staged::plan::Buckets;
    use std::collections::BTreeSet;

    /// The exchange key of the tests' runs.
    fn key() -> ExchangeKey {
        ExchangeKey::from_bytes([3; 32])
    }

    /// Runs both parties in turn until both are finished; the receiver's outcome.
    fn run_both(dir: &Path, op: Operation, x: &[String], y: &[String], buckets: u32) -> Outcome {
        let settings = Settings { buckets: Buckets::Fixed(buckets), ..Settings::new("t", Protocol::Ecdh, op) };
        let ex = dir.join("exchange");
        let r = Runner::open(settings.clone(), Role::Receiver, &ex, &dir.join("r"), y, key()).unwrap();
        let s = Runner::open(settings, Role::Sender, &ex, &dir.join("s"), x, key()).unwrap();
        let mut got = None;
        let mut deliver = |o: &Outcome| {
            got = Some(o.clone());
            Ok(())
        };
        let mut none = |_: &Outcome| Ok(());
        for _ in 0..10 {
            let a = r.step(&mut deliver).unwrap();
            let b = s.step(&mut none).unwrap();
            if a == Step::Finished && b == Step::Finished {
                break;
            }
        }
        got.expect("the receiver finished")
    }

    fn items(range: std::ops::Range<usize>) -> Vec<String> {
        range.map(|i| format!("k{i}")).collect()
    }

    #[test]
    fn both_operations_and_edge_cases_match_the_plain_sets() {
        let cases = [(0..300, 200..400), (0..0, 0..10), (0..10, 0..0), (0..50, 100..150), (0..64, 0..64), (0..1, 0..1)];
        for (xs, ys) in cases {
            let (x, y) = (items(xs.clone()), items(ys.clone()));
            let xset: BTreeSet<&String> = x.iter().collect();
            let want: Vec<usize> = (0..y.len()).filter(|&i| xset.contains(&y[i])).collect();
            for op in [Operation::Intersection, Operation::Cardinality] {
                let dir = tempfile::tempdir().unwrap();
                let got = run_both(dir.path(), op, &x, &y, 4);
                match got {
                    Outcome::Intersection(m) => assert_eq!(m, want, "{xs:?} {ys:?}"),
                    Outcome::Cardinality(c) => assert_eq!(c, want.len() as u64, "{xs:?} {ys:?}"),
                    other => panic!("{other:?}"),
                }
            }
        }
    }

    #[test]
    fn a_forged_hello_and_marker_are_refused_by_name() {
        use crate::staged::message::part_digest;
        let dir = tempfile::tempdir().unwrap();
        let settings =
            Settings { buckets: Buckets::Fixed(2), ..Settings::new("t", Protocol::Ecdh, Operation::Intersection) };
        let ex = dir.path().join("exchange");
        let (x, y) = (items(0..10), items(5..15));
        let r = Runner::open(settings.clone(), Role::Receiver, &ex, &dir.path().join("r"), &y, key()).unwrap();
        let s = Runner::open(settings.clone(), Role::Sender, &ex, &dir.path().join("s"), &x, key()).unwrap();
        assert_eq!(r.step(&mut |_| Ok(())).unwrap(), Step::Ran(0));
        assert_eq!(s.step(&mut |_| Ok(())).unwrap(), Step::Ran(0));
        // Someone with write access to the exchange, but not a party, replaces the
        // sender's hello by one of its own and fixes the marker's digest (keyed only by
        // public values) to match.
        let forged = settings.hello(Role::Sender, 10, &RunSeed::from_bytes([66; 32])).encode();
        let hello = ex.join("stage-0/sender.hello");
        let honest = (std::fs::read(&hello).unwrap(), std::fs::read(ex.join("stage-0/sender.done.json")).unwrap());
        std::fs::write(&hello, &forged).unwrap();
        let marker = ex.join("stage-0/sender.done.json");
        let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&marker).unwrap()).unwrap();
        m["parts"][0]["bytes"] = forged.len().into();
        m["parts"][0]["digest"] = hex(&part_digest(SessionId::default(), 0, Role::Sender, 0, &forged)).into();
        std::fs::write(&marker, m.to_string()).unwrap();
        let e = r.step(&mut |_| Ok(())).unwrap_err().to_string();
        assert!(e.contains("stage-0/sender.done.json: its MAC does not verify under the exchange key"), "{e}");
        assert!(e.contains("or the two parties hold different keys"), "{e}");
        assert!(ex.join("abort-receiver.json").exists(), "the sender is told");
        std::fs::remove_file(ex.join("abort-receiver.json")).unwrap();

        // Replays of genuine markers: the receiver's own hello marker as the sender's, and
        // the sender's hello marker of another run under the same key.
        std::fs::write(&hello, &honest.0).unwrap();
        std::fs::copy(ex.join("stage-0/receiver.done.json"), &marker).unwrap();
        let e = r.step(&mut |_| Ok(())).unwrap_err().to_string();
        assert!(e.contains("its MAC does not verify"), "another role's marker: {e}");
        std::fs::remove_file(ex.join("abort-receiver.json")).unwrap();
        let other = Settings { run_id: "t2".into(), ..settings.clone() };
        let ex2 = dir.path().join("exchange2");
        let s2 = Runner::open(other, Role::Sender, &ex2, &dir.path().join("s2"), &x, key()).unwrap();
        assert_eq!(s2.step(&mut |_| Ok(())).unwrap(), Step::Ran(0));
        std::fs::copy(ex2.join("stage-0/sender.done.json"), &marker).unwrap();
        std::fs::copy(ex2.join("stage-0/sender.hello"), &hello).unwrap();
        let e = r.step(&mut |_| Ok(())).unwrap_err().to_string();
        assert!(e.contains("its MAC does not verify"), "another run's marker: {e}");
        std::fs::remove_file(ex.join("abort-receiver.json")).unwrap();

        // A forged abort note stops nothing silently: it is refused by name.
        std::fs::write(&hello, &honest.0).unwrap();
        std::fs::write(&marker, &honest.1).unwrap();
        let note = serde_json::json!({ "format": FORMAT, "role": "sender", "error": "stop", "mac": "00".repeat(32) });
        std::fs::write(ex.join("abort-sender.json"), note.to_string()).unwrap();
        let e = r.step(&mut |_| Ok(())).unwrap_err().to_string();
        assert!(e.contains("abort-sender.json: its MAC does not verify under the exchange key"), "{e}");
        std::fs::remove_file(ex.join("abort-sender.json")).unwrap();

        // Restored, the run goes on; a party holding another key is refused, and a key
        // changed within a run is refused before anything is read.
        assert_eq!(r.step(&mut |_| Ok(())).unwrap(), Step::Ran(1));
        let other_key = ExchangeKey::from_bytes([4; 32]);
        let e = Runner::open(settings.clone(), Role::Sender, &ex, &dir.path().join("s"), &x, other_key.clone())
            .unwrap_err()
            .to_string();
        assert!(e.contains("exchange key"), "{e}");
        let s3 = Runner::open(settings, Role::Sender, &ex, &dir.path().join("s3"), &x, other_key).unwrap();
        let e = s3.step(&mut |_| Ok(())).unwrap_err().to_string();
        assert!(
            e.contains("stage-0/sender.done.json: its MAC does not verify"),
            "its own marker under another key: {e}"
        );
    }

    #[test]
    fn status_shows_the_peers_fields_and_abort_escaped_and_bounded() {
        use crate::staged::store::tests::{assert_shown_safely, hostile};
        let dir = tempfile::tempdir().unwrap();
        let (x, y) = (items(0..10), items(5..15));
        run_both(dir.path(), Operation::Intersection, &x, &y, 1);
        let ex = dir.path().join("exchange");
        // A peer holding the key writes hostile fields and a hostile reason.
        let path = ex.join("stage-1/sender.done.json");
        let mut m: Marker = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        m.run = hostile();
        m.attempt = hostile();
        m.seal(&key(), "t").unwrap();
        std::fs::write(&path, serde_json::to_vec(&m).unwrap()).unwrap();
        let e = Exchange::new(&ex, key(), "t");
        e.write_abort(Role::Sender, &hostile()).unwrap();
        for e in [e, Exchange::unauthenticated(&ex)] {
            let lines = status(&e).unwrap();
            assert!(lines.iter().any(|l| l.contains("stopped the run")), "{lines:?}");
            assert!(lines.iter().any(|l| l.contains("stage 1 (blind) sender: done")), "{lines:?}");
            lines.iter().for_each(|l| assert_shown_safely(l));
        }
        let lines = status(&Exchange::unauthenticated(&ex)).unwrap();
        assert!(lines.iter().all(|l| !l.contains("done (run")), "not authenticated, and said so: {lines:?}");
    }

    #[test]
    fn a_peer_message_changed_after_it_was_consumed_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (x, y) = (items(0..100), items(50..150));
        run_both(dir.path(), Operation::Intersection, &x, &y, 2);
        // The sender's stage 2 consumed the receiver's stage 1; pretend it saw another one.
        let journal = dir.path().join("s/journal.json");
        let mut j: BTreeMap<String, String> = serde_json::from_slice(&std::fs::read(&journal).unwrap()).unwrap();
        j.insert("stage-1/receiver".into(), "0".repeat(64));
        std::fs::write(&journal, serde_json::to_vec(&j).unwrap()).unwrap();
        std::fs::remove_file(dir.path().join("exchange/stage-2/sender.done.json")).unwrap();
        let settings =
            Settings { buckets: Buckets::Fixed(2), ..Settings::new("t", Protocol::Ecdh, Operation::Intersection) };
        let s = Runner::open(settings, Role::Sender, &dir.path().join("exchange"), &dir.path().join("s"), &x, key())
            .unwrap();
        let e = s.step(&mut |_| Ok(())).unwrap_err().to_string();
        assert!(e.contains("stage 2") && e.contains("changed since this side consumed it"), "{e}");
    }
}
