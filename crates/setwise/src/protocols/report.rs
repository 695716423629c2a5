//! Per-run reports: phases with wall time and traffic, set sizes, result counts.

use super::Role;
use crate::net::{Channel, Decorated, Decoration, Stats, Transfer};
use crate::wire::text::{MAX_SHOWN, printable};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// One timed phase of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    /// What the phase does.
    pub name: &'static str,
    /// When the phase started, in milliseconds since the run started.
    pub start_ms: f64,
    /// Wall time in milliseconds.
    pub wall_ms: f64,
    /// Traffic during the phase.
    #[serde(flatten)]
    pub traffic: Stats,
}

/// What a running role tells its observer: a phase starts, or a long transfer moved on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Progress {
    /// The phase of this name starts.
    Phase(&'static str),
    /// A chunked stream sent or received one more chunk (told once per chunk).
    Transfer(Transfer),
    /// A phase that only computes did one more piece of its items (told once per piece).
    Work(Work),
}

/// How far a computing phase is: items done of its total.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Work {
    /// Items done so far.
    pub done: u64,
    /// Items the phase works on.
    pub total: u64,
    /// What the items are, plural ("items", "bundles").
    pub unit: &'static str,
}

/// Called with each [`Progress`] event of a run (the CLI draws progress bars with it).
/// It runs on the protocol's threads between chunks or pieces of work (possibly on a
/// worker thread), so it must return quickly.
pub type PhaseObserver = Arc<dyn Fn(Progress) + Send + Sync>;

/// Items per piece of a metered computation: small enough for a bar that moves (a
/// piece of DH blinding is about 0.3 s on two cores), large enough that the pieces'
/// parallel loops stay busy.
pub const WORK_PIECE: usize = 1 << 14;

/// The progress of one computing phase, for its observer: [`Report::meter`].
#[derive(Clone, Default)]
pub struct Meter {
    observer: Option<PhaseObserver>,
    total: u64,
    unit: &'static str,
    done: Arc<AtomicU64>,
}

impl Meter {
    /// A meter of `total` items telling `observer` (none: it counts nothing), for work
    /// outside a protocol run (e.g. a database build).
    pub fn new(observer: Option<PhaseObserver>, total: usize) -> Self {
        Self { observer, total: total as u64, unit: "items", done: Arc::default() }
    }

    /// The same meter counting `unit` (plural) instead of items.
    pub fn counting(self, unit: &'static str) -> Self {
        Self { unit, ..self }
    }

    /// Counts `n` more items done and tells the observer.
    pub fn add(&self, n: usize) {
        if let Some(o) = &self.observer {
            let done = self.done.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
            o(Progress::Work(Work { done: done.min(self.total), total: self.total, unit: self.unit }));
        }
    }

    /// `f` on `items` piece by piece ([`WORK_PIECE`] items; `f` parallelises inside a
    /// piece), the results appended in order, each piece counted when done.
    pub fn map_pieces<T, U>(&self, items: &[T], f: impl Fn(&[T]) -> Vec<U>) -> Vec<U> {
        let mut out = Vec::with_capacity(items.len());
        for piece in items.chunks(WORK_PIECE) {
            out.extend(f(piece));
            self.add(piece.len());
        }
        out
    }
}

/// A channel that passes the streams' progress to an observer; everything else goes to
/// the channel it wraps. The session runs every role over one.
pub type Observed<'a, C> = Decorated<&'a mut C, Observer>;

/// The observer of an [`Observed`] channel.
pub struct Observer(Option<PhaseObserver>);

impl<'a, C: Channel + ?Sized> Observed<'a, C> {
    /// `inner`, observed by `observer` (none: progress is dropped).
    pub fn new(inner: &'a mut C, observer: Option<PhaseObserver>) -> Self {
        Decorated::wrap(inner, Observer(observer))
    }
}

impl Decoration for Observer {
    fn progress(&self, transfer: &Transfer) {
        if let Some(o) = &self.0 {
            o(Progress::Transfer(*transfer));
        }
    }
}

/// Details that are results (what the party learned), not parameters:
/// [`Report::detail`] files them with the results, out of the shareable report.
pub const RESULT_DETAILS: [&str; 1] = ["intersection_sum"];

/// What one party measured in one run.
///
/// The report is meant to be shared with the partner (to compare sizes, parameters and
/// timings), so [`to_json`](Self::to_json) holds only what both parties know: what this
/// party learned ([`results`](Self::results), [`result_details`](Self::result_details))
/// could tell the partner more than the protocol does (a sender must not learn the
/// intersection's size from the receiver's report). [`to_json_with_results`](Self::to_json_with_results)
/// adds it as a `private` section, for this party's own records.
#[derive(Serialize, Default)]
pub struct Report {
    /// Protocol name.
    pub protocol: String,
    /// Operation name.
    pub operation: String,
    /// This party's role.
    pub role: Option<Role>,
    /// Canonical parameters agreed in the hello.
    pub params: String,
    /// This party's distinct items.
    pub own_set_size: usize,
    /// The peer's announced distinct items.
    pub peer_set_size: usize,
    /// The identity in the peer's TLS certificate, when the channel authenticated one.
    pub peer_identity: Option<String>,
    /// Worker threads used.
    pub threads: usize,
    /// When the run started, in milliseconds since the Unix epoch (this party's clock;
    /// lines up both parties' timelines).
    pub started_unix_ms: u64,
    /// Timed phases, in order.
    pub phases: Vec<Phase>,
    /// Whole-run wall time in milliseconds.
    pub total_ms: f64,
    /// Whole-run traffic.
    pub traffic: Stats,
    /// Parameters the protocol chose, e.g. the FHE preset.
    pub details: BTreeMap<&'static str, String>,
    /// What this party learned, as counts (`intersection_size`, …): private to it, so
    /// [`to_json`](Self::to_json) leaves them out (see [`Report`]).
    #[serde(skip)]
    pub results: BTreeMap<&'static str, u64>,
    /// What this party learned that is not a count ([`RESULT_DETAILS`], e.g. the sum
    /// over the intersection): private like [`results`](Self::results).
    #[serde(skip)]
    pub result_details: BTreeMap<&'static str, String>,
    #[serde(skip)]
    observer: Option<PhaseObserver>,
    #[serde(skip)]
    started: Option<Instant>,
}

impl Report {
    /// An empty report for a run of `protocol`/`operation`; starts the run clock.
    pub fn new(protocol: &str, operation: &str) -> Self {
        Self {
            protocol: protocol.into(),
            operation: operation.into(),
            threads: rayon::current_num_threads(),
            started_unix_ms: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64),
            started: Some(Instant::now()),
            ..Default::default()
        }
    }

    /// Sets a callback told of each phase as it starts.
    pub fn observe(&mut self, observer: PhaseObserver) {
        self.observer = Some(observer);
    }

    /// A meter for a phase that computes on `total` items: the observer sees items done
    /// of the total (a bar rather than a spinner). Without an observer it counts nothing.
    pub fn meter(&self, total: usize) -> Meter {
        Meter::new(self.observer.clone(), total)
    }

    /// A callback for the building blocks below the protocols, which do not know
    /// [`Progress`]: `(what is counted, done, total)` told as [`Progress::Work`].
    pub fn tell(&self) -> impl Fn(&'static str, u64, u64) + Send + Sync + 'static {
        let observer = self.observer.clone();
        move |unit, done, total| {
            if let Some(o) = &observer {
                o(Progress::Work(Work { done, total, unit }));
            }
        }
    }

    /// Runs `f` as the phase `name`, recording its wall time and traffic on `ch`.
    pub fn phase<C: Channel, R>(&mut self, name: &'static str, ch: &mut C, f: impl FnOnce(&mut C) -> R) -> R {
        if let Some(obs) = &self.observer {
            obs(Progress::Phase(name));
        }
        let (t, before) = (Instant::now(), ch.stats());
        let start_ms = self.started.map_or(0.0, |s| t.duration_since(s).as_secs_f64() * 1e3);
        let out = f(ch);
        let (wall_ms, traffic) = (t.elapsed().as_secs_f64() * 1e3, ch.stats().since(&before));
        self.phases.push(Phase { name, start_ms, wall_ms, traffic });
        out
    }

    /// Records a result count.
    pub fn result(&mut self, name: &'static str, value: u64) {
        self.results.insert(name, value);
    }

    /// Records a parameter the protocol chose, or, for a name in [`RESULT_DETAILS`], a
    /// result that is not a count.
    pub fn detail(&mut self, name: &'static str, value: String) {
        if RESULT_DETAILS.contains(&name) {
            self.result_details.insert(name, value);
        } else {
            self.details.insert(name, value);
        }
    }

    /// Closes the run: total time and traffic.
    pub fn finish(&mut self, ch: &impl Channel) {
        self.total_ms = self.started.map_or(0.0, |s| s.elapsed().as_secs_f64() * 1e3);
        self.traffic = ch.stats();
    }

    /// The shareable report as pretty JSON: everything but what this party learned.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("reports serialise")
    }

    /// The report with what this party learned in a `private` section
    /// (`{"results": {name: count}, "details": {name: text}}`), as pretty JSON: this
    /// party's own record, not for the partner.
    pub fn to_json_with_results(&self) -> String {
        #[derive(Serialize)]
        struct Private<'a> {
            results: &'a BTreeMap<&'static str, u64>,
            details: &'a BTreeMap<&'static str, String>,
        }
        #[derive(Serialize)]
        struct WithResults<'a> {
            #[serde(flatten)]
            report: &'a Report,
            private: Private<'a>,
        }
        let private = Private { results: &self.results, details: &self.result_details };
        serde_json::to_string_pretty(&WithResults { report: self, private }).expect("reports serialise")
    }
}

/// Bytes in a short human form.
pub fn human_bytes(b: u64) -> String {
    match b {
        b if b >= 10 << 20 => format!("{:.1} MB", b as f64 / 1e6),
        b if b >= 10 << 10 => format!("{:.1} kB", b as f64 / 1e3),
        b => format!("{b} B"),
    }
}

impl fmt::Debug for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json())
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let role = self.role.map_or("-".to_string(), |r| r.to_string());
        writeln!(
            f,
            "{} {} ({role}): {} items, peer {} items, {} threads",
            self.protocol, self.operation, self.own_set_size, self.peer_set_size, self.threads
        )?;
        if let Some(peer) = &self.peer_identity {
            writeln!(f, "  peer (TLS certificate): {}", printable(peer, MAX_SHOWN))?;
        }
        for p in &self.phases {
            writeln!(
                f,
                "  {:<28} {:>10.1} ms   sent {:>10}   received {:>10}",
                p.name,
                p.wall_ms,
                human_bytes(p.traffic.bytes_sent),
                human_bytes(p.traffic.bytes_received)
            )?;
        }
        writeln!(
            f,
            "  {:<28} {:>10.1} ms   sent {:>10}   received {:>10}   ({} / {} messages)",
            "total",
            self.total_ms,
            human_bytes(self.traffic.bytes_sent),
            human_bytes(self.traffic.bytes_received),
            self.traffic.messages_sent,
            self.traffic.messages_received
        )?;
        for (k, v) in &self.details {
            writeln!(f, "  {k}: {v}")?;
        }
        for (k, v) in &self.results {
            writeln!(f, "  {k}: {v}")?;
        }
        for (k, v) in &self.result_details {
            writeln!(f, "  {k}: {v}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::MemoryChannel;
    use crate::wire::stream::{CHUNK, Counted, Stream};
    use std::sync::Mutex;

    /// The shareable JSON holds no result; the private section holds them all.
    #[test]
    fn results_stay_out_of_the_shareable_json() {
        let mut r = Report::new("mqrpmt", "sum");
        r.result("intersection_size", 7);
        r.detail("intersection_sum", "1234".into());
        r.detail("preset", "small".into());
        let shared: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        let own: serde_json::Value = serde_json::from_str(&r.to_json_with_results()).unwrap();
        assert_eq!(shared["details"], serde_json::json!({ "preset": "small" }));
        assert!(shared.get("private").is_none() && shared.get("results").is_none(), "{shared}");
        assert!(!r.to_json().contains("intersection"));
        assert_eq!(
            own["private"],
            serde_json::json!({ "results": { "intersection_size": 7 }, "details": { "intersection_sum": "1234" } })
        );
        let mut without = own.clone();
        without.as_object_mut().unwrap().remove("private");
        assert_eq!(without, shared, "the rest is the same");
    }

    /// An observer that keeps every event.
    fn recorder() -> (Arc<Mutex<Vec<Progress>>>, PhaseObserver) {
        let events = Arc::new(Mutex::new(Vec::new()));
        let e = events.clone();
        (events, Arc::new(move |p| e.lock().unwrap().push(p)))
    }

    #[test]
    fn a_meter_maps_piece_by_piece_and_counts_up_to_the_total() {
        let (events, observer) = recorder();
        let mut report = Report::new("p", "o");
        report.observe(observer);
        let items: Vec<u32> = (0..(2 * WORK_PIECE + 5) as u32).collect();
        let meter = report.meter(items.len());
        let doubled = meter.map_pieces(&items, |piece| piece.iter().map(|x| 2 * x).collect());
        assert_eq!(doubled, items.iter().map(|x| 2 * x).collect::<Vec<_>>());
        let work: Vec<Work> = events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|p| if let Progress::Work(w) = p { Some(*w) } else { None })
            .collect();
        let done: Vec<u64> = work.iter().map(|w| w.done).collect();
        let n = items.len() as u64;
        assert_eq!(done, [WORK_PIECE as u64, 2 * WORK_PIECE as u64, n]);
        assert!(work.iter().all(|w| w.total == n));
        // Without an observer nothing is told, and the results are the same.
        let quiet = Report::new("p", "o").meter(items.len());
        assert_eq!(quiet.map_pieces(&items, |piece| piece.to_vec()), items);
    }

    fn transfers(events: &Mutex<Vec<Progress>>) -> Vec<Transfer> {
        let events = events.lock().unwrap();
        events.iter().filter_map(|p| if let Progress::Transfer(t) = p { Some(*t) } else { None }).collect()
    }

    #[test]
    fn streams_tell_progress_once_per_chunk_on_both_sides() {
        const S: Stream<4> = Stream::new(0x42, "Test");
        let (mut a, mut b) = MemoryChannel::pair(1 << 22);
        let ((sent, so), (received, ro)) = (recorder(), recorder());
        let records: Vec<[u8; 4]> = (0..40_000u32).map(u32::to_le_bytes).collect();
        S.send(&mut Observed::new(&mut a, Some(so)), &records, "sending test").unwrap();
        S.recv_all(&mut Observed::new(&mut b, Some(ro)), records.len(), "receiving test").unwrap();
        let (sent, received) = (transfers(&sent), transfers(&received));
        assert_eq!(sent.len(), 40_000usize.div_ceil(CHUNK));
        assert_eq!(sent.iter().map(|t| t.done).collect::<Vec<_>>(), [16_384, 32_768, 40_000]);
        // The receiving side also tells when it starts waiting, before the first chunk.
        assert_eq!(received.iter().map(|t| t.done).collect::<Vec<_>>(), [0, 16_384, 32_768, 40_000]);
        let last = received.last().unwrap();
        assert_eq!((last.done, last.total, last.bytes, last.total_bytes), (40_000, 40_000, 160_000, Some(160_000)));
        assert!(sent.iter().all(|t| t.sending && t.what == "sending test"));
        assert!(received.iter().all(|t| !t.sending && t.what == "receiving test"));
    }

    #[test]
    fn counted_streams_tell_records_and_bytes() {
        let c = Counted::new(0x43, "Items", 3);
        let (mut a, mut b) = MemoryChannel::pair(1 << 16);
        let (events, o) = recorder();
        let items: Vec<Vec<u8>> = (0..7u8).map(|i| vec![i; i as usize]).collect();
        c.send(&mut a, &items, "t", |w, x| {
            w.bytes(x);
        })
        .unwrap();
        c.recv(&mut Observed::new(&mut b, Some(o)), items.len(), "t", |r| {
            r.bytes("item", 16).map(|_| ()).map_err(Into::into)
        })
        .unwrap();
        let got = transfers(&events);
        assert_eq!(got.iter().map(|t| t.done).collect::<Vec<_>>(), [0, 3, 6, 7]);
        let last = got.last().unwrap();
        // Each record is a 4-byte length and its bytes: 7·4 + (0 + 1 + … + 6).
        assert_eq!((last.bytes, last.total_bytes), (49, None));
    }

    #[test]
    fn phases_are_told_as_they_start() {
        let (events, o) = recorder();
        let mut report = Report::new("p", "o");
        report.observe(o);
        let (mut a, _b) = MemoryChannel::pair(16);
        report.phase("one", &mut a, |_| ());
        report.phase("two", &mut a, |_| ());
        assert_eq!(*events.lock().unwrap(), [Progress::Phase("one"), Progress::Phase("two")]);
    }
}
