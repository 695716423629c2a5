//! `--metrics ADDR`: a serving party's counters in the Prometheus text format at
//! `/metrics`, and `/health` for load balancers and supervisors.
//!
//! The server's own events (sessions started and ended, connections refused and why)
//! come from [`setwise::net::serve`] through an [`EventSink`]; bytes and the items peers
//! announced come from each completed session's report. Nothing here sees an item, a
//! key or a result: the counts are what the log already says. The endpoint is off by
//! default, a bare port listens on loopback only, and it answers one short request at a
//! time on its own thread, so its port cannot hold the protocol's server.

use crate::Failure;
use setwise::Report;
use setwise::net::{EventSink, Refusal, ServeEvent, SessionEnd, is_loopback};
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Upper bounds (seconds) of the session-duration histogram's buckets: from a loopback
/// ecdh query to an hour-long session.
const BOUNDS: [f64; 13] = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0];

const ENDS: [SessionEnd; 3] = [SessionEnd::Completed, SessionEnd::Failed, SessionEnd::Panicked];

/// A serving party's counters, shared by the sessions' threads and the endpoint.
pub struct Metrics {
    started: Instant,
    running: AtomicU64,
    ended: [AtomicU64; ENDS.len()],
    refused: [AtomicU64; Refusal::ALL.len()],
    /// Sessions per bucket (not cumulative; the +Inf bucket last).
    buckets: [AtomicU64; BOUNDS.len() + 1],
    duration_micros: AtomicU64,
    bytes_sent: AtomicU64,
    bytes_received: AtomicU64,
    peer_items: AtomicU64,
    stopping: AtomicBool,
    /// Constant series: `setwise_info` and the database's, rendered once.
    fixed: String,
}

impl Metrics {
    /// Counters for a server whose constant facts are `labels` (for `setwise_info`) and,
    /// serving a database, its items and `(name, value)` facts.
    pub fn new(labels: &[(&str, &str)], database: Option<(usize, &[(&str, &str)])>) -> Self {
        let mut fixed = String::new();
        let mut info = vec![("version", env!("CARGO_PKG_VERSION"))];
        info.extend_from_slice(labels);
        series(&mut fixed, "setwise_info", "gauge", "What this server is: setwise's version, role and protocol.");
        let _ = writeln!(fixed, "setwise_info{{{}}} 1", label_set(&info));
        if let Some((items, facts)) = database {
            series(&mut fixed, "setwise_database_items", "gauge", "Items in the database served.");
            let _ = writeln!(fixed, "setwise_database_items {items}");
            series(&mut fixed, "setwise_database_info", "gauge", "The database served: its parameters.");
            let _ = writeln!(fixed, "setwise_database_info{{{}}} 1", label_set(facts));
        }
        Self {
            started: Instant::now(),
            running: AtomicU64::new(0),
            ended: Default::default(),
            refused: Default::default(),
            buckets: Default::default(),
            duration_micros: AtomicU64::new(0),
            bytes_sent: AtomicU64::new(0),
            bytes_received: AtomicU64::new(0),
            peer_items: AtomicU64::new(0),
            stopping: AtomicBool::new(false),
            fixed,
        }
    }

    /// The sink the server tells its events to.
    pub fn sink(self: &Arc<Self>) -> EventSink {
        let m = self.clone();
        EventSink(Arc::new(move |e| m.event(e)))
    }

    fn event(&self, e: ServeEvent) {
        match e {
            ServeEvent::Started => {
                self.running.fetch_add(1, Ordering::Relaxed);
            }
            ServeEvent::Ended { how, took } => {
                self.running.fetch_sub(1, Ordering::Relaxed);
                let at = ENDS.iter().position(|e| *e == how).expect("every end");
                self.ended[at].fetch_add(1, Ordering::Relaxed);
                let secs = took.as_secs_f64();
                let bucket = BOUNDS.iter().position(|b| secs <= *b).unwrap_or(BOUNDS.len());
                self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
                let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
                self.duration_micros.fetch_add(micros, Ordering::Relaxed);
            }
            ServeEvent::Refused(why) => {
                let at = Refusal::ALL.iter().position(|r| *r == why).expect("every reason");
                self.refused[at].fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// A completed session's traffic and the items its peer announced.
    pub fn completed(&self, r: &Report) {
        self.bytes_sent.fetch_add(r.traffic.bytes_sent, Ordering::Relaxed);
        self.bytes_received.fetch_add(r.traffic.bytes_received, Ordering::Relaxed);
        self.peer_items.fetch_add(r.peer_set_size as u64, Ordering::Relaxed);
    }

    /// The server stops taking sessions (SIGTERM): `/health` answers 503 from now on.
    pub fn stopping(&self) {
        self.stopping.store(true, Ordering::Relaxed);
    }

    /// Every series in the Prometheus text format (version 0.0.4).
    pub fn render(&self) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut out = self.fixed.clone();
        series(&mut out, "setwise_sessions_total", "counter", "Sessions ended, by result.");
        for (end, c) in ENDS.iter().zip(&self.ended) {
            let result = match end {
                SessionEnd::Completed => "completed",
                SessionEnd::Failed => "failed",
                SessionEnd::Panicked => "panicked",
            };
            let _ = writeln!(out, "setwise_sessions_total{{result=\"{result}\"}} {}", get(c));
        }
        series(&mut out, "setwise_sessions_running", "gauge", "Sessions running now.");
        let _ = writeln!(out, "setwise_sessions_running {}", get(&self.running));
        series(
            &mut out,
            "setwise_connections_refused_total",
            "counter",
            "Connections dropped before their hello, by reason.",
        );
        for (why, c) in Refusal::ALL.iter().zip(&self.refused) {
            let _ = writeln!(out, "setwise_connections_refused_total{{reason=\"{}\"}} {}", why.name(), get(c));
        }
        series(
            &mut out,
            "setwise_session_duration_seconds",
            "histogram",
            "Time of each session, from taking its place to its end.",
        );
        let mut cumulative = 0;
        for (i, c) in self.buckets.iter().enumerate() {
            cumulative += get(c);
            let le = BOUNDS.get(i).map_or("+Inf".to_string(), |b| b.to_string());
            let _ = writeln!(out, "setwise_session_duration_seconds_bucket{{le=\"{le}\"}} {cumulative}");
        }
        let _ = writeln!(out, "setwise_session_duration_seconds_sum {}", get(&self.duration_micros) as f64 / 1e6);
        let _ = writeln!(out, "setwise_session_duration_seconds_count {cumulative}");
        for (name, help, c) in [
            ("setwise_sent_bytes_total", "Bytes sent in completed sessions.", &self.bytes_sent),
            ("setwise_received_bytes_total", "Bytes received in completed sessions.", &self.bytes_received),
            ("setwise_peer_items_total", "Items the peers announced in completed sessions.", &self.peer_items),
        ] {
            series(&mut out, name, "counter", help);
            let _ = writeln!(out, "{name} {}", get(c));
        }
        series(&mut out, "setwise_uptime_seconds", "gauge", "Seconds since the server started.");
        let _ = writeln!(out, "setwise_uptime_seconds {:.3}", self.started.elapsed().as_secs_f64());
        out
    }
}

fn series(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// `a="x",b="y"`, values escaped as the text format asks.
fn label_set(labels: &[(&str, &str)]) -> String {
    let escape = |v: &str| v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
    labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape(v))).collect::<Vec<_>>().join(",")
}

/// The address `--metrics` names: a bare port listens on loopback.
fn address(given: &str) -> String {
    if given.parse::<u16>().is_ok() { format!("127.0.0.1:{given}") } else { given.to_string() }
}

/// Longest a scraper may take to send its request or read the answer.
const IO_TIMEOUT: Duration = Duration::from_secs(2);
/// Largest request read (a scraper's GET is a few hundred bytes).
const MAX_REQUEST: usize = 8 << 10;

/// A metrics endpoint asked for and not yet listening.
pub struct Endpoint {
    given: String,
    /// The counters it shows.
    pub metrics: Arc<Metrics>,
}

impl Endpoint {
    /// The endpoint `--metrics given` asks for, showing `metrics`.
    pub fn new(given: &str, metrics: Metrics) -> Self {
        Self { given: given.to_string(), metrics: Arc::new(metrics) }
    }

    /// Listens, and serves `/metrics` and `/health` on a thread of its own for as long as
    /// the process runs: one connection at a time, each with [`IO_TIMEOUT`] to send its
    /// request and read the answer, so a client that stalls holds the endpoint for that
    /// long at most and never a thread or descriptor of the protocol's server.
    pub fn start(&self) -> Result<(), Failure> {
        let addr = address(&self.given);
        let listener =
            TcpListener::bind(&addr).map_err(|e| Failure::usage(anyhow::anyhow!("--metrics {addr}: {e}")))?;
        let bound = listener.local_addr().map_or(addr.clone(), |a| a.to_string());
        eprintln!("metrics on http://{bound}/metrics, health on /health");
        if !is_loopback(&addr) {
            eprintln!("warning: --metrics {bound} is not a loopback address: anyone who reaches it sees the counters");
        }
        let metrics = self.metrics.clone();
        std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || {
                for stream in listener.incoming().flatten() {
                    // A client that went away or stalled is no concern of the server.
                    let _ = answer(stream, &metrics);
                }
            })
            .map_err(|e| Failure::usage(anyhow::anyhow!("--metrics: no thread for it: {e}")))?;
        Ok(())
    }
}

/// Reads one request from `stream` and answers it, then closes the connection.
fn answer(mut stream: TcpStream, metrics: &Metrics) -> std::io::Result<()> {
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    // One deadline for the whole request: a client sending a byte now and then would
    // otherwise renew a per-read timeout for as long as it liked.
    let deadline = Instant::now() + IO_TIMEOUT;
    let mut request = Vec::new();
    let mut buf = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < MAX_REQUEST {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        stream.set_read_timeout(Some(left))?;
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        request.extend_from_slice(&buf[..n]);
    }
    let line = request.split(|&b| b == b'\n').next().unwrap_or_default();
    let mut words = line.split(|&b| b == b' ');
    let (method, target) = (words.next().unwrap_or_default(), words.next().unwrap_or_default());
    let path = target.split(|&b| b == b'?').next().unwrap_or_default();
    let text = "text/plain; charset=utf-8";
    let (status, body, kind) = match (method, path) {
        (b"GET" | b"HEAD", b"/metrics") => ("200 OK", metrics.render(), "text/plain; version=0.0.4; charset=utf-8"),
        (b"GET" | b"HEAD", b"/health") if metrics.stopping.load(Ordering::Relaxed) => {
            ("503 Service Unavailable", "stopping\n".to_string(), text)
        }
        (b"GET" | b"HEAD", b"/health") => ("200 OK", "ok\n".to_string(), text),
        (b"GET" | b"HEAD", _) => ("404 Not Found", "not found\n".to_string(), text),
        _ => ("405 Method Not Allowed", "only GET\n".to_string(), text),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    if method != b"HEAD" {
        stream.write_all(body.as_bytes())?;
    }
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_format_counts_every_event() {
        let m = Arc::new(Metrics::new(&[("role", "sender"), ("protocol", "a\"b")], Some((42, &[("preset", "x")]))));
        let sink = m.sink();
        for took in [0.005, 0.3, 7.0, 4000.0] {
            (sink.0)(ServeEvent::Started);
            (sink.0)(ServeEvent::Ended { how: SessionEnd::Completed, took: Duration::from_secs_f64(took) });
        }
        (sink.0)(ServeEvent::Started);
        (sink.0)(ServeEvent::Ended { how: SessionEnd::Failed, took: Duration::from_millis(1) });
        (sink.0)(ServeEvent::Started);
        (sink.0)(ServeEvent::Refused(Refusal::Tls));
        (sink.0)(ServeEvent::Refused(Refusal::Tls));
        let text = m.render();
        for line in [
            "setwise_sessions_total{result=\"completed\"} 4",
            "setwise_sessions_total{result=\"failed\"} 1",
            "setwise_sessions_total{result=\"panicked\"} 0",
            "setwise_sessions_running 1",
            "setwise_connections_refused_total{reason=\"tls\"} 2",
            "setwise_connections_refused_total{reason=\"dropped\"} 0",
            "setwise_session_duration_seconds_bucket{le=\"0.01\"} 2",
            "setwise_session_duration_seconds_bucket{le=\"0.5\"} 3",
            "setwise_session_duration_seconds_bucket{le=\"10\"} 4",
            "setwise_session_duration_seconds_bucket{le=\"300\"} 4",
            "setwise_session_duration_seconds_bucket{le=\"+Inf\"} 5",
            "setwise_session_duration_seconds_count 5",
            "setwise_database_items 42",
            "setwise_database_info{preset=\"x\"} 1",
            "protocol=\"a\\\"b\"",
        ] {
            assert!(text.contains(line), "{line} in:\n{text}");
        }
        let sum: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix("setwise_session_duration_seconds_sum "))
            .and_then(|v| v.parse().ok())
            .unwrap();
        assert!((sum - 4007.306).abs() < 1e-6, "{sum}");
        // Every sample line belongs to a series declared with # TYPE.
        for l in text.lines().filter(|l| !l.starts_with('#')) {
            let name = l.split(['{', ' ']).next().unwrap();
            let base = name.trim_end_matches("_bucket").trim_end_matches("_sum").trim_end_matches("_count");
            assert!(text.contains(&format!("# TYPE {base} ")), "{name}");
        }
    }

    #[test]
    fn a_bare_port_listens_on_loopback() {
        assert_eq!(address("9100"), "127.0.0.1:9100");
        assert_eq!(address("0.0.0.0:9100"), "0.0.0.0:9100");
    }
}
