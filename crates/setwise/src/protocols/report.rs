//! Per-run reports: phases with wall time and traffic, set sizes, result counts.

use super::Role;
use crate::net::{Channel, Stats};
use crate::wire::text::{MAX_SHOWN, printable};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Instant;

/// One timed phase of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    /// What the phase does.
    pub name: &'static str,
    /// Wall time in milliseconds.
    pub wall_ms: f64,
    /// Traffic during the phase.
    #[serde(flatten)]
    pub traffic: Stats,
}

/// Called with each phase's name as it starts (the CLI shows a progress spinner).
pub type PhaseObserver = Box<dyn Fn(&'static str) + Send + Sync>;

/// What one party measured in one run.
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
    /// Timed phases, in order.
    pub phases: Vec<Phase>,
    /// Whole-run wall time in milliseconds.
    pub total_ms: f64,
    /// Whole-run traffic.
    pub traffic: Stats,
    /// Result counts, e.g. `intersection_size`.
    pub results: BTreeMap<&'static str, u64>,
    /// Parameters the protocol chose, e.g. the FHE preset.
    pub details: BTreeMap<&'static str, String>,
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
            started: Some(Instant::now()),
            ..Default::default()
        }
    }

    /// Sets a callback told of each phase as it starts.
    pub fn observe(&mut self, observer: PhaseObserver) {
        self.observer = Some(observer);
    }

    /// Runs `f` as the phase `name`, recording its wall time and traffic on `ch`.
    pub fn phase<C: Channel, R>(&mut self, name: &'static str, ch: &mut C, f: impl FnOnce(&mut C) -> R) -> R {
        if let Some(obs) = &self.observer {
            obs(name);
        }
        let (t, before) = (Instant::now(), ch.stats());
        let out = f(ch);
        self.phases.push(Phase { name, wall_ms: t.elapsed().as_secs_f64() * 1e3, traffic: ch.stats().since(&before) });
        out
    }

    /// Records a result count.
    pub fn result(&mut self, name: &'static str, value: u64) {
        self.results.insert(name, value);
    }

    /// Records a parameter the protocol chose.
    pub fn detail(&mut self, name: &'static str, value: String) {
        self.details.insert(name, value);
    }

    /// Closes the run: total time and traffic.
    pub fn finish(&mut self, ch: &impl Channel) {
        self.total_ms = self.started.map_or(0.0, |s| s.elapsed().as_secs_f64() * 1e3);
        self.traffic = ch.stats();
    }

    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("reports serialise")
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
        Ok(())
    }
}
