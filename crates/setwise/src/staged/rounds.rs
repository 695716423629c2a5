//! The stages of a replayed run in the [`Runner`]: bucket sizes, then rounds of every
//! bucket's role replayed over the messages in the exchange ([`super::replay`] says how
//! and what it leaks).
//!
//! The workdir keeps `replay.json`: the stage at which each bucket's role ended and, for
//! the receiver, what it learned there, so that the finish can combine the buckets and a
//! stage run again after an interruption re-runs the buckets that ended in it (they
//! write the same bytes).

use super::bucket::select;
use super::plan::Plan;
use super::replay::BucketInput;
use super::replay::MAX_STAGES;
use super::runner::{MAX_LIVE_BUCKETS, RunResult, Runner, not_there, peer_of};
use super::seed::RunSeed;
use super::store::{Exchange, Marker, PartId, PartInfo, Workdir};
use super::work::{Done, Learned, PartRef, Task, Worker, check_ids_kept, keep, read_ids, read_rows};
use crate::error::{Deviation, Error, Result};
use crate::io::hex;
use crate::protocols::{Operation, Outcome, Role};
use crate::session::Item;
use serde::{Deserialize, Serialize};

/// What the workdir keeps of a replayed run's buckets (`replay.json`; what they learned
/// beyond counts is in files of their own, [`keep`]).
#[derive(Debug, Default, Serialize, Deserialize)]
struct ReplayState {
    /// Per bucket, the stage in which its role ended.
    ended: Vec<Option<u8>>,
    /// Per bucket, the kind of outcome it ended with.
    #[serde(default)]
    learned: Vec<Learned>,
    /// Intersection: per bucket, the indices (into the whole input) it matched.
    matches: Vec<Vec<u64>>,
    /// Per bucket, the count it learned ([`Done::count`]).
    counts: Vec<u64>,
    /// Sum: per bucket, the sum of the own values over its intersection.
    #[serde(default)]
    sums: Vec<u128>,
}

impl ReplayState {
    fn new(buckets: usize) -> Self {
        Self {
            ended: vec![None; buckets],
            learned: vec![Learned::Nothing; buckets],
            matches: vec![Vec::new(); buckets],
            counts: vec![0; buckets],
            sums: vec![0; buckets],
        }
    }

    /// A state written before buckets kept the kind of what they learned (when staged
    /// runs were intersection and cardinality, and only the receiver learned), filled in
    /// as those runs learned, so a run in flight resumes after an upgrade.
    fn upgrade(&mut self, op: Operation, role: Role) {
        if !self.learned.is_empty() || !self.sums.is_empty() {
            return;
        }
        let kind = match (role, op) {
            (Role::Receiver, Operation::Intersection) => Learned::Intersection,
            (Role::Receiver, Operation::Cardinality) => Learned::Cardinality,
            _ => Learned::Nothing,
        };
        self.learned = self.ended.iter().map(|e| if e.is_some() { kind } else { Learned::Nothing }).collect();
        self.sums = vec![0; self.ended.len()];
    }

    /// Whether it is a state of `buckets` buckets.
    fn fits(&self, buckets: usize) -> bool {
        [self.ended.len(), self.learned.len(), self.matches.len(), self.counts.len(), self.sums.len()]
            .iter()
            .all(|&n| n == buckets)
    }

    /// The kind of outcome every bucket ended with; buckets that learned different kinds
    /// are refused (one protocol run gives one kind).
    fn learned(&self) -> Result<Learned> {
        let first = self.learned.first().copied().unwrap_or_default();
        if self.learned.iter().any(|&l| l != first) {
            return Err(Error::usage("outcome", "the buckets' roles ended with different kinds of outcome"));
        }
        Ok(first)
    }
}

impl<I: Item> Runner<'_, I> {
    /// This party's first stage without a marker, unless a marker says it was the last.
    pub(super) fn replay_next_stage(&self) -> Result<Option<u8>> {
        for k in 0..MAX_STAGES {
            match self.exchange.read_marker(k, self.role)? {
                None => return Ok(Some(k)),
                Some(m) if m.last => return Ok(None),
                Some(_) => {}
            }
        }
        Err(Error::usage("stage", format!("the run took {MAX_STAGES} stages without ending: start a new run")))
    }

    /// The peer's marker stage `stage` waits for, if it is not there: stage k needs the
    /// peer's stage k − 1, unless the peer's last stage came before.
    pub(super) fn replay_waits_for(&self, stage: u8) -> Result<Option<String>> {
        if stage == 0 {
            return Ok(None);
        }
        let peer = peer_of(self.role);
        let want = stage - 1;
        let fail = self.at_stage(stage, "");
        if self.exchange.read_marker(want, peer).map_err(|e| self.at_stage(stage, "")(e))?.is_some()
            || self.peer_ended_before(want).map_err(fail)?.is_some()
        {
            return Ok(None);
        }
        Ok(Some(self.exchange.show(&Exchange::marker_name(want, peer))))
    }

    /// The peer's last stage if it came before `stage` (its rounds start at 2).
    fn peer_ended_before(&self, stage: u8) -> Result<Option<u8>> {
        let peer = peer_of(self.role);
        for j in 2..stage {
            match self.exchange.read_marker(j, peer)? {
                Some(m) if m.last => return Ok(Some(j)),
                Some(_) => {}
                None => return Ok(None),
            }
        }
        Ok(None)
    }

    /// Runs stage `stage` (≥ 1) of a replayed run.
    pub(super) fn replay_stage(&self, stage: u8, deliver: &mut dyn FnMut(&Outcome) -> Result<()>) -> Result<()> {
        let seed = self.seed()?;
        let plan = self.plan(stage, &seed)?;
        if stage == 1 {
            return self.bucket_sizes(&plan);
        }
        self.round(stage, &seed, &plan, deliver)
    }

    /// Stage 1: this party's item count in each bucket, as its marker's part counts.
    fn bucket_sizes(&self, plan: &Plan) -> Result<()> {
        let fail = self.at_stage(1, "");
        let sizes: Vec<u64> = match &self.remote {
            Some(remote) => {
                let sizes = remote.bucket_sizes(plan).map_err(self.at_stage(1, ""))?;
                if sizes.len() != plan.buckets as usize || sizes.iter().sum::<u64>() != plan.own_size() {
                    return Err(fail(Error::usage(
                        "buckets",
                        format!(
                            "the executors counted {} items in {} buckets, not {} in {}",
                            sizes.iter().sum::<u64>(),
                            sizes.len(),
                            plan.own_size(),
                            plan.buckets
                        ),
                    )));
                }
                sizes
            }
            None => self.buckets(plan).iter().map(|idx| idx.len() as u64).collect(),
        };
        let parts = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| self.empty_part(plan, 1, i as u32, n))
            .collect::<Result<Vec<_>>>()
            .map_err(fail)?;
        self.exchange.write_marker(&self.marker(1, Some(plan.session), parts)).map_err(self.at_stage(1, ""))
    }

    /// Writes an empty part `i` of this party's stage `stage` that counts `items`.
    fn empty_part(&self, plan: &Plan, stage: u8, i: u32, items: u64) -> Result<PartInfo> {
        let path = Exchange::part_name(stage, self.role, i);
        let id = PartId { stage, role: self.role, part: i };
        let items =
            usize::try_from(items).map_err(|_| Error::usage("bucket", "a bucket too large for this machine"))?;
        self.exchange.write_part(&path, plan.session, id, &[], items)
    }

    /// Stage k ≥ 2: every bucket whose role can go on is run one round further (kept
    /// alive, or replayed, by the worker here or on the cluster). A failed stage ends the
    /// live roles: the stage run again replays them.
    fn round(&self, k: u8, seed: &RunSeed, plan: &Plan, deliver: &mut dyn FnMut(&Outcome) -> Result<()>) -> Result<()> {
        let ran = self.round_once(k, seed, plan, deliver);
        if ran.is_err() {
            *self.worker.borrow_mut() = None;
        }
        ran
    }

    fn round_once(
        &self,
        k: u8,
        seed: &RunSeed,
        plan: &Plan,
        deliver: &mut dyn FnMut(&Outcome) -> Result<()>,
    ) -> Result<()> {
        let peer = peer_of(self.role);
        let b = plan.buckets as usize;
        let peer_sizes = self.peer_marker(k, plan, 1, Some(plan.peer_size()))?;
        let own_sizes = self.own_sizes(k, plan)?;
        // The peer's rounds so far (up to its last), and this party's own.
        let mut theirs = Vec::new();
        for j in 2..k {
            let m = self.peer_marker(k, plan, j, None)?;
            let last = m.last;
            theirs.push(m);
            if last {
                break;
            }
        }
        let peer_ended = theirs.last().is_some_and(|m| m.last);
        let mut ours = Vec::new();
        for j in 2..k {
            let what = format!("this party's own stage {j} marker");
            let m = self.exchange.read_marker(j, self.role).map_err(self.at_stage(k, what.clone()))?;
            let m = m.ok_or_else(|| self.at_stage(k, what.clone())(not_there()))?;
            // Written by this party, but in a place the peer can write too.
            if m.run != self.settings.run_id || m.session != hex(&plan.session.0) || m.parts.len() != b || m.last {
                return Err(self.at_stage(k, what)(
                    Deviation::StagedMessage { why: "not this party's marker of this run (replaced?)".into() }.into(),
                ));
            }
            ours.push(m);
        }
        let fresh_from_peer = |i: usize| match theirs.last() {
            Some(m) if m.stage == k - 1 => m.parts[i].items,
            _ => 0,
        };
        let mut state: ReplayState = self.workdir.read_json("replay.json")?.unwrap_or_else(|| ReplayState::new(b));
        state.upgrade(plan.operation, self.role);
        if !state.fits(b) {
            return Err(Error::usage(
                "workdir",
                "replay.json does not match the run's buckets: the workdir was changed",
            ));
        }
        let refs = |ms: &[Marker], i: usize| -> Vec<PartRef> {
            ms.iter().map(|m| PartRef { stage: m.stage, info: m.parts[i].clone() }).collect()
        };
        let mut parts: Vec<Option<PartInfo>> = vec![None; b];
        let mut tasks = Vec::new();
        for (i, part) in parts.iter_mut().enumerate() {
            let fail = |why: String| self.at_stage(k, format!("bucket {i}"))(Deviation::StagedMessage { why }.into());
            let ended_before = state.ended[i].is_some_and(|e| e < k);
            let fresh = fresh_from_peer(i);
            if ended_before {
                if fresh > 0 {
                    return Err(fail(format!("the {peer} sent {fresh} messages after the bucket's run ended")));
                }
                *part = Some(self.empty_part(plan, k, i as u32, 0).map_err(self.at_stage(k, ""))?);
                continue;
            }
            let wait = k > 2 && fresh == 0;
            if wait && peer_ended {
                return Err(fail(format!("the {peer}'s run ended while this bucket waits for its next message")));
            }
            tasks.push(Task {
                stage: k,
                bucket: i as u32,
                peer_size: peer_sizes.parts[i].items,
                own_size: own_sizes[i],
                theirs: refs(&theirs, i),
                ours: refs(&ours, i),
                wait,
            });
        }
        for done in self.work(seed, plan, k, &tasks)? {
            let i = done.bucket as usize;
            if done.ended {
                state.ended[i] = Some(k);
                (state.learned[i], state.counts[i], state.sums[i]) = (done.learned, done.count, done.sum);
                if self.remote.is_none() {
                    let idx = &self.buckets(plan)[i];
                    state.matches[i] = done.matches.iter().map(|&p| u64::from(idx[p as usize])).collect();
                }
            }
            parts[i] = Some(done.part);
        }
        let infos: Vec<PartInfo> = parts.into_iter().flatten().collect();
        if infos.len() != b {
            return Err(Error::usage("stage", format!("stage {k}: {} parts written of the {b} buckets", infos.len())));
        }
        self.workdir.write_json("replay.json", &state)?;
        let last = state.ended.iter().all(Option::is_some);
        if last {
            self.finish(k, plan, &state, deliver)?;
        }
        let mut marker = self.marker(k, Some(plan.session), infos);
        marker.last = last;
        self.exchange.write_marker(&marker).map_err(self.at_stage(k, ""))
    }

    /// This party's item count per bucket, from its own stage-1 marker (checked as its
    /// later markers are: it is in a place the peer can write too).
    fn own_sizes(&self, k: u8, plan: &Plan) -> Result<Vec<u64>> {
        let what = "this party's own stage 1 marker";
        let m = self.exchange.read_marker(1, self.role).map_err(self.at_stage(k, what))?;
        let m = m.ok_or_else(|| self.at_stage(k, what)(not_there()))?;
        let ok = m.run == self.settings.run_id
            && m.session == hex(&plan.session.0)
            && m.parts.len() == plan.buckets as usize
            && m.total_items() == plan.own_size();
        if !ok {
            return Err(self.at_stage(k, what)(
                Deviation::StagedMessage { why: "not this party's marker of this run (replaced?)".into() }.into(),
            ));
        }
        Ok(m.parts.iter().map(|p| p.items).collect())
    }

    /// Runs stage `k`'s tasks: on the cluster, or by this process's worker on its items.
    fn work(&self, seed: &RunSeed, plan: &Plan, k: u8, tasks: &[Task]) -> Result<Vec<Done>> {
        if let Some(remote) = &self.remote {
            // A worker's error names its stage and bucket already.
            let dones = remote.run(plan, k, tasks).map_err(|e| match e {
                Error::Worker { .. } => e,
                e => self.at_stage(k, "")(e),
            })?;
            let same = dones.len() == tasks.len() && dones.iter().zip(tasks).all(|(d, t)| d.bucket == t.bucket);
            if !same {
                return Err(Error::usage(
                    "stage",
                    format!("stage {k}: the executors' done files do not answer its tasks"),
                ));
            }
            return Ok(dones);
        }
        let mut worker = self.worker.borrow_mut();
        let worker = worker.get_or_insert_with(|| {
            let job = plan.job(self.settings.key_columns);
            let alive = self.keep_alive && plan.buckets <= MAX_LIVE_BUCKETS;
            let mut w = Worker::new(self.exchange.clone(), plan.clone(), seed.clone(), job, alive);
            w.limit_live(self.live_budget);
            w
        });
        let buckets = self.buckets(plan);
        let values = |idx: &[u32]| {
            self.values.map(|(v, bound)| (idx.iter().map(|&i| v[i as usize]).collect::<Vec<u64>>(), bound))
        };
        tasks
            .iter()
            .map(|t| {
                let idx = &buckets[t.bucket as usize];
                let (items, values) = (select(self.items, idx), values(idx));
                let input = BucketInput { items: &items, values: values.as_ref().map(|(v, b)| (v.as_slice(), *b)) };
                let done = worker.run(t, input)?;
                keep(&self.workdir, &done)?;
                Ok(done)
            })
            .collect()
    }

    /// This party's result from every bucket's, combined by the kind they learned:
    /// delivered (here; on a cluster the rows are where the executors kept them), then
    /// kept in `result.json`. A role that learned nothing has no result.
    fn finish(
        &self,
        k: u8,
        plan: &Plan,
        state: &ReplayState,
        deliver: &mut dyn FnMut(&Outcome) -> Result<()>,
    ) -> Result<()> {
        let learned = state.learned().map_err(self.at_stage(k, ""))?;
        let count: u64 = state.counts.iter().sum();
        let sum: u128 = state
            .sums
            .iter()
            .try_fold(0u128, |a, &s| a.checked_add(s))
            .ok_or_else(|| self.at_stage(k, "")(Error::usage("sum", "the buckets' sums add up beyond 2^128")))?;
        let here = self.remote.is_none();
        let outcome = match learned {
            Learned::Nothing => return Ok(()),
            Learned::Cardinality => Some(Outcome::Cardinality(count)),
            Learned::Sum => Some(Outcome::CardinalitySum { cardinality: count, sum }),
            Learned::Intersection if here => {
                let mut all: Vec<usize> = state.matches.iter().flatten().map(|&p| p as usize).collect();
                all.sort_unstable();
                Some(Outcome::Intersection(all))
            }
            Learned::Union if here => {
                Some(Outcome::Union(union_rows(&self.workdir, plan).map_err(self.at_stage(k, ""))?))
            }
            Learned::Ids if here => Some(self.private_ids(plan)?),
            Learned::Ids => {
                check_ids_kept(&self.workdir, plan.buckets).map_err(self.at_stage(k, ""))?;
                None
            }
            Learned::Intersection | Learned::Union => None,
        };
        if let Some(outcome) = &outcome {
            deliver(outcome).map_err(self.at_stage(k, "delivering the result"))?;
        }
        let result = RunResult {
            operation: plan.operation.name().into(),
            size: count,
            sum: (learned == Learned::Sum).then(|| sum.to_string()),
        };
        self.workdir.write_json("result.json", &result)
    }

    /// The private IDs of every bucket: each own item's, in input order, and the union's,
    /// sorted (the buckets' IDs are under sessions of their own, so they do not collide).
    fn private_ids(&self, plan: &Plan) -> Result<Outcome> {
        let mut own = vec![[0u8; 32]; self.items.len()];
        let mut union = Vec::new();
        for (i, idx) in self.buckets(plan).iter().enumerate() {
            let ids = read_ids(&self.workdir, i as u32, idx.len())?;
            for (&p, id) in idx.iter().zip(ids.own) {
                own[p as usize] = id;
            }
            union.extend(ids.union);
        }
        union.sort_unstable();
        Ok(Outcome::PrivateIds { own, union })
    }
}

/// The peer's rows of every bucket's union, as kept in `workdir` (each bucket's
/// checked by its worker: [`super::work::check_union_rows`]).
fn union_rows(workdir: &Workdir, plan: &Plan) -> Result<Vec<Vec<u8>>> {
    let mut rows = Vec::new();
    for i in 0..plan.buckets {
        rows.extend(read_rows(workdir, i)?);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use crate::protocols::spec::Takes;
    use crate::protocols::{Operation, Outcome, Protocol, Role};
    use crate::session::Input;
    use crate::staged::ExchangeKey;
    use crate::staged::plan::{Buckets, Settings};
    use crate::staged::runner::status;
    use crate::staged::runner::{Runner, Step};
    use std::collections::BTreeSet;
    use std::path::Path;

    fn key() -> ExchangeKey {
        ExchangeKey::from_bytes([5; 32])
    }

    fn items(range: std::ops::Range<usize>) -> Vec<String> {
        range.map(|i| format!("item-{i}")).collect()
    }

    /// Runs both parties in turn to the end; what each learned (receiver, sender; None if
    /// nothing) and the stages taken. With `alive`, the receiver keeps its roles running
    /// between stages and the sender replays (the two must meet either way). The sender
    /// of `sum` holds the values `values(x)`.
    fn run_both(
        dir: &Path,
        protocol: Protocol,
        op: Operation,
        sets: (&[String], &[String]),
        b: u32,
        alive: bool,
    ) -> (Option<Outcome>, Option<Outcome>, u8) {
        run_settings(dir, Settings { buckets: Buckets::Fixed(b), ..Settings::new("t", protocol, op) }, sets, alive)
    }

    /// [`run_both`] with these settings.
    fn run_settings(
        dir: &Path,
        settings: Settings,
        (x, y): (&[String], &[String]),
        alive: bool,
    ) -> (Option<Outcome>, Option<Outcome>, u8) {
        let (protocol, op) = (settings.protocol, settings.operation);
        let ex = dir.join("exchange");
        let mut r = Runner::open(settings.clone(), Role::Receiver, &ex, &dir.join("r"), y, key()).unwrap();
        if alive {
            r.keep_roles_alive();
        }
        let v = values(x);
        let input = match protocol.spec().takes(op, Role::Sender) {
            Takes::Values => Input::Values { items: x, values: &v, bound: BOUND },
            _ => Input::Items(x),
        };
        let s = Runner::open_input(settings, Role::Sender, &ex, &dir.join("s"), input, key()).unwrap();
        let (mut got_r, mut got_s) = (None, None);
        let mut stages = 0;
        for _ in 0..40 {
            let a = r.step(&mut |o: &Outcome| {
                got_r = Some(o.clone());
                Ok(())
            });
            let c = s
                .step(&mut |o: &Outcome| {
                    got_s = Some(o.clone());
                    Ok(())
                })
                .unwrap();
            let a = a.unwrap();
            if let Step::Ran(n) = a {
                stages = stages.max(n);
            }
            if a == Step::Finished && c == Step::Finished {
                return (got_r, got_s, stages);
            }
        }
        panic!("{protocol} {op}: no end after 40 steps");
    }

    const BOUND: u64 = 1000;

    /// The sender's value of each item in `sum`.
    fn values(x: &[String]) -> Vec<u64> {
        (0..x.len() as u64).map(|i| i * 7 % (BOUND + 1)).collect()
    }

    fn plain(x: &[String], y: &[String]) -> Vec<usize> {
        let xs: BTreeSet<&String> = x.iter().collect();
        (0..y.len()).filter(|&i| xs.contains(&y[i])).collect()
    }

    /// Checks what each party learned against the plain set computation.
    fn check(op: Operation, (x, y): (&[String], &[String]), got: (Option<Outcome>, Option<Outcome>), what: &str) {
        let want = plain(x, y);
        let n = want.len() as u64;
        match (op, got) {
            (Operation::Intersection, (Some(Outcome::Intersection(m)), _)) => assert_eq!(m, want, "{what}"),
            (Operation::Cardinality, (Some(Outcome::Cardinality(c)), _)) => assert_eq!(c, n, "{what}"),
            (Operation::Sum, (Some(Outcome::Cardinality(c)), Some(Outcome::CardinalitySum { cardinality, sum }))) => {
                let ys: BTreeSet<&String> = y.iter().collect();
                let v = values(x);
                let total: u128 = (0..x.len()).filter(|&i| ys.contains(&x[i])).map(|i| u128::from(v[i])).sum();
                assert_eq!((c, cardinality, sum), (n, n, total), "{what}");
            }
            (Operation::Union, (Some(Outcome::Union(extra)), None)) => {
                let ys: BTreeSet<&[u8]> = y.iter().map(|s| s.as_bytes()).collect();
                let mut got: Vec<&[u8]> = extra.iter().map(Vec::as_slice).collect();
                let mut only_x: Vec<&[u8]> = x.iter().map(|s| s.as_bytes()).filter(|s| !ys.contains(s)).collect();
                got.sort_unstable();
                only_x.sort_unstable();
                assert_eq!(got, only_x, "{what}");
            }
            (
                Operation::PrivateId,
                (Some(Outcome::PrivateIds { own: ry, union: ru }), Some(Outcome::PrivateIds { own: sx, union: su })),
            ) => {
                assert_eq!(ru, su, "{what}: both see the same union");
                let all: BTreeSet<&String> = x.iter().chain(y).collect();
                assert_eq!(ru.len(), all.len(), "{what}: one ID per item of X ∪ Y");
                assert!(ru.windows(2).all(|w| w[0] < w[1]), "{what}: sorted, distinct");
                let by_item: std::collections::BTreeMap<&String, [u8; 32]> = x.iter().zip(sx).collect();
                for (item, id) in y.iter().zip(&ry) {
                    assert!(ru.binary_search(id).is_ok(), "{what}");
                    if let Some(theirs) = by_item.get(item) {
                        assert_eq!(theirs, id, "{what}: a common item has one ID");
                    }
                }
            }
            (op, got) => panic!("{what}: {op} gave {got:?}"),
        }
    }

    #[test]
    fn every_staged_protocol_matches_the_plain_sets() {
        // The sixth: a sender of more than twice the receiver's items (auto's mqrpmt then
        // takes the permuted OPRF).
        let cases =
            [(0..300, 200..450), (0..0, 0..10), (0..20, 0..0), (0..40, 100..140), (0..1, 0..1), (0..90, 60..100)];
        for spec in crate::protocols::registry::ALL {
            if spec.protocol() == Protocol::Ecdh {
                continue; // its own steps: runner's tests
            }
            for &op in spec.staged {
                for (n, (xs, ys)) in cases.clone().into_iter().enumerate() {
                    let (x, y) = (items(xs.clone()), items(ys.clone()));
                    let dir = tempfile::tempdir().unwrap();
                    let (r, s, stages) = run_both(dir.path(), spec.protocol(), op, (&x, &y), 3, n % 2 == 0);
                    check(op, (&x, &y), (r, s), &format!("{} {op} {xs:?} {ys:?}", spec.name));
                    assert!(stages >= 2, "{}", spec.name);
                }
            }
        }
    }

    /// `sum --sum-to receiver` staged: the receiver adds up every bucket's sum, the sender
    /// learns nothing, whether the side keeps its roles alive or replays.
    #[test]
    fn a_sum_given_to_the_receiver_adds_up_every_buckets() {
        for protocol in [Protocol::Mqrpmt, Protocol::Auto] {
            for (n, (xs, ys)) in [(0..300, 200..450), (0..20, 0..0), (0..90, 60..100)].into_iter().enumerate() {
                let (x, y) = (items(xs), items(ys));
                let settings = Settings {
                    buckets: Buckets::Fixed(3),
                    sum_to: crate::protocols::SumTo::Receiver,
                    ..Settings::new("t", protocol, Operation::Sum)
                };
                assert!(!Operation::Sum.sender_learns(settings.sum_to));
                let dir = tempfile::tempdir().unwrap();
                let (r, s, _) = run_settings(dir.path(), settings, (&x, &y), n % 2 == 0);
                let v = values(&x);
                let common: Vec<usize> = (0..x.len()).filter(|&i| y.contains(&x[i])).collect();
                let sum = common.iter().map(|&i| u128::from(v[i])).sum();
                let want = Outcome::CardinalitySum { cardinality: common.len() as u64, sum };
                assert_eq!((r, s), (Some(want), None), "{protocol} {n}");
            }
        }
    }

    #[test]
    fn a_replay_state_of_the_version_before_is_read_as_it_learned() {
        let old = r#"{"ended":[3,null],"matches":[[4,9],[]],"counts":[2,0]}"#;
        let mut r: super::ReplayState = serde_json::from_str(old).unwrap();
        r.upgrade(Operation::Intersection, Role::Receiver);
        assert!(r.fits(2));
        assert_eq!(r.learned, [super::Learned::Intersection, super::Learned::Nothing]);
        let mut s: super::ReplayState = serde_json::from_str(old).unwrap();
        s.upgrade(Operation::Intersection, Role::Sender);
        assert_eq!(s.learned, [super::Learned::Nothing; 2]);
        let big = super::ReplayState { sums: vec![u128::MAX, 1], ..super::ReplayState::new(2) };
        let back: super::ReplayState = serde_json::from_str(&serde_json::to_string(&big).unwrap()).unwrap();
        assert_eq!(back.sums, big.sums, "sums beyond 2^64 survive JSON");
    }

    #[test]
    fn a_union_row_of_another_bucket_is_refused() {
        use crate::staged::RunSeed;
        use crate::staged::work::check_union_rows;
        let settings =
            Settings { buckets: Buckets::Fixed(4), ..Settings::new("t", Protocol::Mqrpmt, Operation::Union) };
        let (a, b) = (RunSeed::from_bytes([1; 32]), RunSeed::from_bytes([2; 32]));
        let (ha, hb) = (settings.hello(Role::Receiver, 9, &a), settings.hello(Role::Sender, 9, &b));
        let plan = crate::staged::plan::Plan::agree(&settings, &ha, &hb).unwrap();
        let rows: Vec<Vec<u8>> = (0..40).map(|i| format!("row-{i}").into_bytes()).collect();
        let of = |i: u32| rows.iter().filter(|r| plan.bucket_of(r) == i).cloned().collect::<Vec<_>>();
        assert!((0..4).all(|i| check_union_rows(&plan, i, &of(i)).is_ok()));
        let mut stray = of(0);
        stray.push(of(1)[0].clone());
        let e = check_union_rows(&plan, 0, &stray).unwrap_err().to_string();
        assert!(e.contains(&format!("bucket 0: union row {} is of bucket 1", stray.len() - 1)), "{e}");
    }

    #[test]
    fn a_vole_run_resumes_after_any_stage_and_status_shows_its_rounds() {
        let dir = tempfile::tempdir().unwrap();
        let (x, y) = (items(0..500), items(250..900));
        let settings =
            Settings { buckets: Buckets::Fixed(2), ..Settings::new("t", Protocol::Vole, Operation::Intersection) };
        let ex = dir.path().join("exchange");
        let mut got = None;
        let mut done = (false, false);
        // Four stages each with roles kept alive, then stopped (the process ends) ...
        {
            let mut r = Runner::open(settings.clone(), Role::Receiver, &ex, &dir.path().join("r"), &y, key()).unwrap();
            let mut s = Runner::open(settings.clone(), Role::Sender, &ex, &dir.path().join("s"), &x, key()).unwrap();
            r.keep_roles_alive();
            s.keep_roles_alive();
            for _ in 0..4 {
                assert!(matches!(r.step(&mut |_| Ok(())).unwrap(), Step::Ran(_)));
                assert!(matches!(s.step(&mut |_| Ok(())).unwrap(), Step::Ran(_)));
            }
        }
        // ... then each step from a freshly opened runner, as separate invocations would
        // be: each replays to where the live roles got.
        for _ in 0..40 {
            let r = Runner::open(settings.clone(), Role::Receiver, &ex, &dir.path().join("r"), &y, key()).unwrap();
            let s = Runner::open(settings.clone(), Role::Sender, &ex, &dir.path().join("s"), &x, key()).unwrap();
            done.0 |= r
                .step(&mut |o: &Outcome| {
                    got = Some(o.clone());
                    Ok(())
                })
                .unwrap()
                == Step::Finished;
            done.1 |= s.step(&mut |_: &Outcome| Ok(())).unwrap() == Step::Finished;
            if done.0 && done.1 {
                break;
            }
        }
        assert_eq!(got, Some(Outcome::Intersection(plain(&x, &y))));
        let lines = status(&crate::staged::store::Exchange::new(&ex, key(), "t")).unwrap();
        assert!(lines.iter().any(|l| l.contains("(round 1)")), "{lines:?}");
        assert!(lines.iter().any(|l| l.contains("its last stage")), "{lines:?}");
    }

    /// A memory budget for about two of four buckets' roles: those that fit stay alive,
    /// the others replay at each stage, and the answer is the plain intersection.
    #[test]
    fn a_memory_budget_keeps_alive_the_roles_that_fit_and_replays_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let (x, y) = (items(0..800), items(400..1200));
        let settings =
            Settings { buckets: Buckets::Fixed(4), ..Settings::new("t", Protocol::Vole, Operation::Intersection) };
        let ex = dir.path().join("exchange");
        let mut r = Runner::open(settings.clone(), Role::Receiver, &ex, &dir.path().join("r"), &y, key()).unwrap();
        let mut s = Runner::open(settings, Role::Sender, &ex, &dir.path().join("s"), &x, key()).unwrap();
        let per_item = Protocol::Vole.spec().live_role_bytes as u64;
        for p in [&mut r, &mut s] {
            p.keep_roles_alive();
            p.limit_live_roles(2 * 260 * per_item);
        }
        let (mut got, mut live) = (None, Vec::new());
        for _ in 0..40 {
            let rs = r.step(&mut |o: &Outcome| {
                got = Some(o.clone());
                Ok(())
            });
            let ss = s.step(&mut |_: &Outcome| Ok(()));
            if let Some(w) = r.worker.borrow().as_ref() {
                live.push(w.live_roles());
            }
            if rs.unwrap() == Step::Finished && ss.unwrap() == Step::Finished {
                break;
            }
        }
        assert_eq!(got, Some(Outcome::Intersection(plain(&x, &y))));
        assert!(live.iter().any(|&n| (1..4).contains(&n)), "some roles alive, not all: {live:?}");
        assert!(live.iter().all(|&n| n < 4), "never all four: {live:?}");
    }

    #[test]
    fn a_damaged_peer_part_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let (x, y) = (items(0..200), items(100..300));
        let settings =
            Settings { buckets: Buckets::Fixed(2), ..Settings::new("t", Protocol::Vole, Operation::Intersection) };
        let ex = dir.path().join("exchange");
        let r = Runner::open(settings.clone(), Role::Receiver, &ex, &dir.path().join("r"), &y, key()).unwrap();
        let s = Runner::open(settings.clone(), Role::Sender, &ex, &dir.path().join("s"), &x, key()).unwrap();
        let mut none = |_: &Outcome| Ok(());
        for _ in 0..3 {
            r.step(&mut none).unwrap();
            s.step(&mut none).unwrap();
        }
        r.step(&mut none).unwrap();
        // A part of the receiver's, damaged: named with its stage and bucket.
        let part = ex.join("stage-2/receiver/part-00001.bin");
        let mut bytes = std::fs::read(&part).unwrap();
        *bytes.last_mut().expect("the receiver's first round sends something") ^= 1;
        std::fs::write(&part, &bytes).unwrap();
        let e = s.step(&mut none).unwrap_err().to_string();
        assert!(e.contains("the receiver's stage 2 message, bucket 1") && e.contains("digest"), "{e}");
        // Named once: the worker's context for the part, not again the bucket's around it.
        assert_eq!(e.matches("stage 3 (sender").count(), 1, "{e}");
    }

    /// Review finding: a live role fed from a stage other than the one before (here our
    /// own stage 4 run again after its marker was deleted) would have used its
    /// randomness on other messages. It now starts over by replay: the same bytes again.
    #[test]
    fn a_live_role_never_goes_on_from_another_state_than_the_runs() {
        let dir = tempfile::tempdir().unwrap();
        let (x, y) = (items(0..300), items(150..450));
        let settings =
            Settings { buckets: Buckets::Fixed(2), ..Settings::new("t", Protocol::Vole, Operation::Intersection) };
        let ex = dir.path().join("exchange");
        let mut r = Runner::open(settings.clone(), Role::Receiver, &ex, &dir.path().join("r"), &y, key()).unwrap();
        let mut s = Runner::open(settings.clone(), Role::Sender, &ex, &dir.path().join("s"), &x, key()).unwrap();
        r.keep_roles_alive();
        s.keep_roles_alive();
        let mut none = |_: &Outcome| Ok(());
        for _ in 0..5 {
            r.step(&mut none).unwrap();
            s.step(&mut none).unwrap();
        }
        let part = ex.join("stage-4/receiver/part-00000.bin");
        let written = std::fs::read(&part).unwrap();
        std::fs::remove_file(ex.join("stage-4/receiver.done.json")).unwrap();
        assert_eq!(r.step(&mut none).unwrap(), Step::Ran(4));
        assert_eq!(std::fs::read(&part).unwrap(), written, "stage 4 again, the same message");

        // One process at a time per party: a second one is refused while the first runs.
        let e = Runner::open(settings.clone(), Role::Receiver, &ex, &dir.path().join("r"), &y, key()).unwrap_err();
        assert!(e.to_string().contains("another setwise process"), "{e}");

        // Its own marker replaced by one with other parts: refused by name, not a panic.
        let path = ex.join("stage-3/receiver.done.json");
        let mut m: crate::staged::store::Marker = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        m.parts.pop();
        m.seal(&key(), "t").unwrap();
        std::fs::write(&path, serde_json::to_vec(&m).unwrap()).unwrap();
        drop((r, s));
        let r = Runner::open(settings, Role::Receiver, &ex, &dir.path().join("r"), &y, key()).unwrap();
        let e = r.step(&mut none).unwrap_err().to_string();
        assert!(e.contains("this party's own stage 3 marker") && e.contains("not this party's marker"), "{e}");
    }
}

/// The runner with its buckets on a "cluster" of threads (`staged::work`).
#[cfg(test)]
mod cluster_tests {
    use crate::error::{ErrorKind, Result};
    use crate::protocols::{Operation, Protocol};
    use crate::protocols::{Outcome, Role};
    use crate::staged::ExchangeKey;
    use crate::staged::plan::Plan;
    use crate::staged::plan::{Buckets, Settings};
    use crate::staged::runner::{Remote, Runner, Step};
    use crate::staged::store::Workdir;
    use crate::staged::work::{Done, Served, Task, Worker, collect, post, read_bucket_ids, read_rows, serve};
    use std::cell::RefCell;
    use std::collections::BTreeMap;
    use std::collections::BTreeSet;
    use std::path::{Path, PathBuf};
    use std::sync::mpsc::{Receiver, channel};
    use std::time::Duration;

    /// A cluster in threads: `groups` executors, each serving the buckets ≡ its index,
    /// started when a stage needs them and again after they linger out (replaying).
    struct Threads {
        exchange: PathBuf,
        workdir: Workdir,
        items: Vec<String>,
        groups: u32,
        linger: Duration,
        running: RefCell<Vec<Receiver<Result<Served>>>>,
        starts: std::sync::Arc<std::sync::atomic::AtomicUsize>,
        settings: Settings,
        session: RefCell<String>,
    }

    impl Remote for Threads {
        fn bucket_sizes(&self, plan: &Plan) -> Result<Vec<u64>> {
            let mut n = vec![0u64; plan.buckets as usize];
            self.items.iter().for_each(|x| n[plan.bucket_of(x.as_bytes()) as usize] += 1);
            Ok(n)
        }

        fn run(&self, plan: &Plan, stage: u8, tasks: &[Task]) -> Result<Vec<Done>> {
            *self.session.borrow_mut() = plan.id();
            post(&self.workdir, stage, tasks, "test")?;
            loop {
                if let Some(d) = collect(&self.workdir, stage, tasks)? {
                    return Ok(d);
                }
                let mut running = self.running.borrow_mut();
                running.retain(|rx| match rx.try_recv() {
                    Ok(_) => false, // a failure is in its error file
                    Err(std::sync::mpsc::TryRecvError::Empty) => true,
                    Err(_) => false,
                });
                if running.is_empty() {
                    self.starts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    for g in 0..self.groups {
                        running.push(self.executor(plan, g, stage));
                    }
                }
                drop(running);
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    }

    impl Threads {
        fn executor(&self, plan: &Plan, g: u32, from: u8) -> Receiver<Result<Served>> {
            let mut items: BTreeMap<u32, Vec<Vec<u8>>> = BTreeMap::new();
            for b in (g..plan.buckets).step_by(self.groups as usize) {
                items.insert(b, Vec::new());
            }
            for x in &self.items {
                if let Some(v) = items.get_mut(&plan.bucket_of(x.as_bytes())) {
                    v.push(x.as_bytes().to_vec());
                }
            }
            items.values_mut().for_each(|v| v.sort());
            let (workdir, linger, exchange) = (self.workdir.clone(), self.linger, self.exchange.clone());
            let (settings, size, session) = (self.settings.clone(), self.items.len(), self.session.borrow().clone());
            let (tx, rx) = channel();
            std::thread::spawn(move || {
                let mut worker = Worker::open(&settings, Role::Receiver, size, &exchange, &workdir, &session).unwrap();
                let _ = tx.send(serve(&workdir, &mut worker, &items, None, linger, "test", from));
            });
            rx
        }
    }

    fn items(range: std::ops::Range<usize>) -> Vec<String> {
        range.map(|i| format!("item-{i}")).collect()
    }

    /// The receiver on a "cluster" of two executors, the sender in one process: the
    /// matched rows are the plain intersection, whether the executors keep their roles
    /// alive through the run or linger out between stages and replay.
    fn remote_run(dir: &Path, linger: Duration) -> (BTreeSet<String>, usize) {
        let (x, y) = (items(0..400), items(250..700));
        let (r, s, starts) = parties(dir, linger, &x, &y);
        let mut finished = (false, false);
        for _ in 0..40 {
            finished.0 |= r.step(&mut |_| panic!("the rows are the executors'")).unwrap() == Step::Finished;
            finished.1 |= s.step(&mut |_| Ok(())).unwrap() == Step::Finished;
            if finished == (true, true) {
                let w = Workdir::create(&dir.join("r")).unwrap();
                let got: BTreeSet<String> =
                    (0..3).flat_map(|b| read_rows(&w, b).unwrap()).map(|x| String::from_utf8(x).unwrap()).collect();
                let want: BTreeSet<String> = y.iter().filter(|i| x.contains(i)).cloned().collect();
                assert_eq!(got, want);
                let result: crate::staged::runner::RunResult =
                    Workdir::create(&dir.join("r")).unwrap().read_json("result.json").unwrap().unwrap();
                assert_eq!(result.size, want.len() as u64);
                return (got, starts.load(std::sync::atomic::Ordering::SeqCst));
            }
        }
        panic!("no end after 40 steps");
    }

    type Parties<'a> = (Runner<'a, Vec<u8>>, Runner<'a, String>, std::sync::Arc<std::sync::atomic::AtomicUsize>);

    /// The receiver on two executors (threads), the sender in one process.
    fn parties<'a>(dir: &Path, linger: Duration, x: &'a [String], y: &[String]) -> Parties<'a> {
        parties_of(dir, linger, x, y, Protocol::Vole, Operation::Intersection)
    }

    /// [`parties`] running `protocol`'s `op`.
    fn parties_of<'a>(
        dir: &Path,
        linger: Duration,
        x: &'a [String],
        y: &[String],
        protocol: Protocol,
        op: Operation,
    ) -> Parties<'a> {
        let key = ExchangeKey::from_bytes([9; 32]);
        let settings = Settings { buckets: Buckets::Fixed(3), ..Settings::new("t", protocol, op) };
        let ex = dir.join("exchange");
        let threads = Threads {
            exchange: ex.clone(),
            workdir: Workdir::create(&dir.join("r")).unwrap(),
            items: y.to_vec(),
            groups: 2,
            linger,
            running: Default::default(),
            starts: Default::default(),
            settings: settings.clone(),
            session: Default::default(),
        };
        let fingerprint = (y.len() as u64, "the caller's".to_string());
        let starts = threads.starts.clone();
        let r = Runner::open_remote(
            settings.clone(),
            Role::Receiver,
            &ex,
            &dir.join("r"),
            fingerprint,
            key.clone(),
            Box::new(threads),
        )
        .unwrap();
        let mut s = Runner::open(settings, Role::Sender, &ex, &dir.join("s"), x, key).unwrap();
        s.keep_roles_alive();
        (r, s, starts)
    }

    #[test]
    fn a_cluster_runner_matches_the_plain_sets_with_live_or_lingering_executors() {
        let dir = tempfile::tempdir().unwrap();
        let (_, starts) = remote_run(dir.path(), Duration::from_secs(30));
        assert_eq!(starts, 1, "executors kept pace: started once");
        let dir = tempfile::tempdir().unwrap();
        let (_, starts) = remote_run(dir.path(), Duration::from_millis(1));
        assert!(starts > 1, "executors that linger out are started again, and replay");
    }

    /// Private IDs on a "cluster": the driver holds no items, so each bucket's executor
    /// keeps its items beside their IDs, and they pair up to the plain computation's
    /// shape: one ID per own item, the union's IDs the sender's, common items' IDs equal.
    #[test]
    fn a_cluster_runners_private_ids_pair_with_the_items_the_executors_kept() {
        let dir = tempfile::tempdir().unwrap();
        let (x, y) = (items(0..300), items(200..450));
        let (r, s, _) = parties_of(dir.path(), Duration::from_secs(30), &x, &y, Protocol::Mqrpmt, Operation::PrivateId);
        let mut sender = None;
        let mut finished = (false, false);
        for _ in 0..40 {
            finished.0 |= r.step(&mut |_| panic!("the IDs are the executors'")).unwrap() == Step::Finished;
            let mut deliver = |o: &Outcome| {
                sender = Some(o.clone());
                Ok(())
            };
            finished.1 |= s.step(&mut deliver).unwrap() == Step::Finished;
            if finished == (true, true) {
                break;
            }
        }
        assert_eq!(finished, (true, true), "no end after 40 steps");
        let Some(Outcome::PrivateIds { own: sender_ids, union: sender_union }) = sender else {
            panic!("the sender learns its IDs")
        };
        let w = Workdir::create(&dir.path().join("r")).unwrap();
        let (mut mine, mut union) = (BTreeMap::new(), Vec::new());
        for b in 0..3 {
            let (items, ids) = read_bucket_ids(&w, b).unwrap();
            assert_eq!(items.len(), ids.own.len());
            mine.extend(items.into_iter().map(|i| String::from_utf8(i).unwrap()).zip(ids.own));
            union.extend(ids.union);
        }
        union.sort_unstable();
        assert_eq!(mine.keys().cloned().collect::<BTreeSet<_>>(), y.iter().cloned().collect());
        assert_eq!(union, sender_union, "both hold the union's IDs");
        assert_eq!(union.len(), 450);
        for (i, item) in x.iter().enumerate() {
            assert!(union.binary_search(&sender_ids[i]).is_ok(), "{item}'s ID is in the union");
            if let Some(id) = mine.get(item) {
                assert_eq!(id, &sender_ids[i], "{item} is common: one ID");
            }
        }
        let distinct: BTreeSet<_> = mine.values().chain(&sender_ids).collect();
        assert_eq!(distinct.len(), 450, "one ID per item of the union");
    }

    #[test]
    fn an_executors_refusal_of_a_damaged_peer_part_comes_back_by_name_and_aborts() {
        let dir = tempfile::tempdir().unwrap();
        let (x, y) = (items(0..200), items(100..300));
        let (r, s, _) = parties(dir.path(), Duration::from_secs(30), &x, &y);
        let mut none = |_: &Outcome| Ok(());
        for _ in 0..4 {
            r.step(&mut none).unwrap();
            s.step(&mut none).unwrap();
        }
        let part = dir.path().join("exchange/stage-3/sender/part-00001.bin");
        let mut bytes = std::fs::read(&part).unwrap();
        *bytes.last_mut().expect("the sender's round sends something") ^= 1;
        std::fs::write(&part, &bytes).unwrap();
        let e = r.step(&mut none).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("the sender's stage 3 message, bucket 1") && text.contains("digest"), "{text}");
        assert_eq!(e.kind(), ErrorKind::Peer, "{text}");
        assert!(dir.path().join("exchange/abort-receiver.json").exists(), "the sender is told");
    }
}
