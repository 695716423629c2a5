//! Serving many peers on one listener, each session on its own thread, so that no peer
//! can stop the others.
//!
//! A connection is first *pending*: it must complete its TLS handshake and send its
//! first frame (the hello, checked by [`Admission::check`]) within
//! [`Admission::timeout`], and pending connections are capped in total and per source
//! address (there counting those pending longer than [`Admission::settle`], so that a
//! burst of honest connections from one host passes), the oldest dropped first when a
//! new one comes, so that idle, slow or garbage
//! connections can hold neither a session's place nor the server's threads. Only an
//! admitted connection waits for one of the `max_concurrent` session places; further
//! admitted ones wait their turn (up to [`Admission::max_pending`] of them; beyond, new
//! connections wait in the listen backlog). Every session gets the frame and session
//! deadlines of [`TcpConfig`]; accept errors (e.g. no file descriptors left) back off
//! instead of spinning; a thread the OS refuses drops that connection only; a panic
//! inside a session ends that session only; and only sessions that complete count
//! towards `sessions`. [`accept_one`] admits connections the same way for a listener
//! that runs one session.

use super::{NetError, TcpChannel, TcpConfig};
use std::collections::VecDeque;
use std::fmt::Display;
use std::io;
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::time::{Duration, Instant};

/// Checks a connection's first frame before it is admitted; the error says why not.
pub type FirstFrameCheck = Arc<dyn Fn(&[u8]) -> Result<(), String> + Send + Sync>;

/// Why a connection was dropped before its hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Pushed out by newer connections (too many pending in all, or from its address).
    Dropped,
    /// No TLS handshake and hello within the admission timeout.
    HelloTimeout,
    /// Its first frame does not open a session (not a setwise hello, or too large).
    NotAHello,
    /// Its TLS handshake failed (no or a wrong client certificate, a plain peer, …).
    Tls,
    /// It closed the connection before its hello.
    Closed,
    /// Anything else (an I/O error).
    Other,
}

impl Refusal {
    /// Every reason, in a fixed order (for counters).
    pub const ALL: [Refusal; 6] =
        [Refusal::Dropped, Refusal::HelloTimeout, Refusal::NotAHello, Refusal::Tls, Refusal::Closed, Refusal::Other];

    /// A short name, as metrics label it.
    pub fn name(self) -> &'static str {
        match self {
            Refusal::Dropped => "dropped",
            Refusal::HelloTimeout => "hello_timeout",
            Refusal::NotAHello => "not_a_hello",
            Refusal::Tls => "tls",
            Refusal::Closed => "closed",
            Refusal::Other => "other",
        }
    }

    fn of(e: &NetError) -> Self {
        match e {
            NetError::HelloDeadline(_) | NetError::Timeout(_) => Refusal::HelloTimeout,
            NetError::NotAdmitted(_) | NetError::FrameTooLarge { .. } => Refusal::NotAHello,
            NetError::Tls(_) => Refusal::Tls,
            NetError::Closed | NetError::Truncated { .. } => Refusal::Closed,
            _ => Refusal::Other,
        }
    }
}

/// How a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionEnd {
    /// It completed.
    Completed,
    /// It ended with an error (a bad peer, a timeout).
    Failed,
    /// It panicked (a bug; the server went on).
    Panicked,
}

/// What a server tells its [`EventSink`], as it happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServeEvent {
    /// A connection was dropped before its hello.
    Refused(Refusal),
    /// An admitted connection took a session's place.
    Started,
    /// A session ended, after `took`.
    Ended {
        /// How.
        how: SessionEnd,
        /// Its time from taking its place.
        took: Duration,
    },
}

/// Where a server reports [`ServeEvent`]s (e.g. metrics counters); called on the
/// sessions' threads, so it must be quick.
#[derive(Clone)]
pub struct EventSink(pub Arc<dyn Fn(ServeEvent) + Send + Sync>);

impl std::fmt::Debug for EventSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EventSink(…)")
    }
}

/// How a listener admits connections: what a connection must do, and how long it may
/// take, before it counts as a peer.
#[derive(Clone)]
pub struct Admission {
    /// Time from accepting a connection to its TLS handshake done and its first frame
    /// received.
    pub timeout: Duration,
    /// Connections not yet admitted, from all sources; the oldest is dropped for a new
    /// one beyond. Also bounds the admitted connections waiting for a session's place.
    pub max_pending: usize,
    /// Connections not yet admitted from one IP address, counting those pending longer
    /// than `settle`; its oldest is dropped for a new one beyond.
    pub max_pending_per_source: usize,
    /// How long a new connection does not count against its address's cap: a client
    /// that opens many connections at once (parallel queries from one host) is not cut
    /// off by its own burst, while connections left idle count after this.
    pub settle: Duration,
    /// Largest first frame read.
    pub max_first_frame: usize,
    /// What the first frame must be (e.g. a well-formed hello); `None`: any frame.
    pub check: Option<FirstFrameCheck>,
}

impl Default for Admission {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(10),
            max_pending: 64,
            max_pending_per_source: 8,
            settle: Duration::from_secs(1),
            max_first_frame: 64 << 10,
            check: None,
        }
    }
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission")
            .field("timeout", &self.timeout)
            .field("max_pending", &self.max_pending)
            .field("max_pending_per_source", &self.max_pending_per_source)
            .field("settle", &self.settle)
            .field("max_first_frame", &self.max_first_frame)
            .field("check", &self.check.as_ref().map(|_| "…"))
            .finish()
    }
}

/// Settings of a server.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Each connection's channel settings: frame size, frame and session deadlines.
    pub tcp: TcpConfig,
    /// What a connection must do before it takes a session's place.
    pub admission: Admission,
    /// Sessions running at once; further admitted connections wait their turn.
    pub max_concurrent: usize,
    /// Completed sessions to serve before returning; 0 serves until stopped.
    pub sessions: usize,
    /// Once set (e.g. on SIGTERM), no new session starts; `serve` returns when the
    /// running ones have ended.
    pub stop: Option<Arc<AtomicBool>>,
    /// Told of every refusal and every session's start and end.
    pub events: Option<EventSink>,
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            tcp: TcpConfig { session_timeout: Some(Duration::from_secs(3600)), ..TcpConfig::default() },
            admission: Admission::default(),
            max_concurrent: 8,
            sessions: 0,
            stop: None,
            events: None,
        }
    }
}

/// What a server did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServeStats {
    /// Sessions that completed.
    pub completed: usize,
    /// Sessions that ended with an error (bad peers, timeouts).
    pub failed: usize,
    /// Sessions that panicked (a bug; the server went on).
    pub panicked: usize,
    /// Connections dropped before they were admitted: no TLS handshake or hello in
    /// time, not a hello, refused by TLS, or pushed out by newer ones.
    pub refused: usize,
}

/// Longest wait between accept attempts after an error.
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// How often an idle accept loop checks whether it is done.
const POLL: Duration = Duration::from_millis(20);

/// The connections not yet admitted, oldest first, with a handle on each socket to drop
/// it.
#[derive(Default)]
struct Pending {
    entries: Mutex<PendingList>,
}

#[derive(Default)]
struct PendingList {
    /// Connection number, source, arrival, and a handle to shut it.
    waiting: VecDeque<(usize, IpAddr, Instant, TcpStream)>,
    /// Connections dropped to make room, until their thread has seen it.
    dropped: Vec<usize>,
}

impl Pending {
    /// Registers connection `n` from `source`; first drops the oldest pending connection
    /// of `source` (among those older than `settle`), or of all, where a limit of
    /// `admission` is reached. Returns the numbers of those dropped.
    fn enter(&self, n: usize, source: IpAddr, stream: &TcpStream, admission: &Admission) -> Vec<usize> {
        let mut list = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let mut dropped = Vec::new();
        let now = Instant::now();
        let settled = |(_, ip, since, _): &(usize, IpAddr, Instant, TcpStream)| {
            *ip == source && now.duration_since(*since) >= admission.settle
        };
        if list.waiting.iter().filter(|e| settled(e)).count() >= admission.max_pending_per_source.max(1) {
            let at = list.waiting.iter().position(settled).expect("one from this source");
            dropped.push(list.drop_at(at));
        }
        if list.waiting.len() >= admission.max_pending.max(1) {
            dropped.push(list.drop_at(0));
        }
        if let Ok(s) = stream.try_clone() {
            list.waiting.push_back((n, source, now, s));
        }
        dropped
    }

    /// Connection `n` is admitted or gone; says whether it had been dropped for room.
    fn leave(&self, n: usize) -> bool {
        let mut list = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        list.waiting.retain(|(m, ..)| *m != n);
        let before = list.dropped.len();
        list.dropped.retain(|m| *m != n);
        list.dropped.len() < before
    }

    /// Drops every pending connection (the server stops, or a one-session listener has
    /// its peer).
    fn drop_all(&self) {
        let mut list = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        while !list.waiting.is_empty() {
            list.drop_at(0);
        }
    }
}

impl PendingList {
    fn drop_at(&mut self, at: usize) -> usize {
        let (n, _, _, stream) = self.waiting.remove(at).expect("a pending connection");
        // Its thread, blocked in the handshake or the first read, fails at once.
        let _ = stream.shutdown(Shutdown::Both);
        self.dropped.push(n);
        n
    }
}

/// Accepts connections on `listener` until `done()`, each admitted on a thread of
/// `scope` and then given to `admitted` (on that thread). While `full()` no connection
/// is accepted. Connections that are not admitted are counted in `refused` and logged.
#[allow(clippy::too_many_arguments)] // the listener, the rules, and what to do with whom
fn accept_loop<'scope, 'env: 'scope>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    listener: &TcpListener,
    tcp: &'env TcpConfig,
    admission: &'env Admission,
    pending: &'env Pending,
    refused: &'env AtomicUsize,
    events: Option<&'env EventSink>,
    done: &dyn Fn() -> bool,
    full: &dyn Fn() -> bool,
    admitted: &'env (dyn Fn(usize, SocketAddr, TcpChannel) + Sync),
    log: &'env (dyn Fn(&str) + Sync),
) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let mut accepted = 0usize;
    let mut backoff = Duration::ZERO;
    while !done() {
        if full() {
            std::thread::sleep(POLL);
            continue;
        }
        let (stream, peer) = match listener.accept() {
            Ok(s) => {
                backoff = Duration::ZERO;
                s
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(POLL);
                continue;
            }
            Err(e) => {
                backoff = (backoff * 2).clamp(Duration::from_millis(10), MAX_BACKOFF);
                log(&format!("accept failed: {e} (retrying in {backoff:?})"));
                std::thread::sleep(backoff);
                continue;
            }
        };
        accepted += 1;
        let n = accepted;
        if let Err(e) = stream.set_nonblocking(false) {
            log(&format!("connection {n} ({peer}): error: {e}"));
            continue;
        }
        for d in pending.enter(n, peer.ip(), &stream, admission) {
            log(&format!(
                "connection {d}: dropped for connection {n} ({peer}): too many connections without a hello \
                 (at most {} in all, {} from one address)",
                admission.max_pending, admission.max_pending_per_source
            ));
        }
        let admit = move || {
            let result = TcpChannel::admit(stream, tcp.clone(), admission);
            let was_dropped = pending.leave(n);
            let refuse = |why: Refusal| {
                refused.fetch_add(1, Ordering::SeqCst);
                if let Some(sink) = events {
                    (sink.0)(ServeEvent::Refused(why));
                }
            };
            match result {
                Ok(ch) if !was_dropped => admitted(n, peer, ch),
                // Dropped for room just as its hello came: its socket is shut already.
                Ok(_) => refuse(Refusal::Dropped),
                Err(_) if was_dropped => refuse(Refusal::Dropped),
                Err(e) => {
                    refuse(Refusal::of(&e));
                    log(&format!("connection {n} ({peer}): refused before its hello: {e}"));
                }
            }
        };
        if let Err(e) = std::thread::Builder::new().name(format!("connection-{n}")).spawn_scoped(scope, admit) {
            pending.leave(n);
            backoff = (backoff * 2).clamp(Duration::from_millis(10), MAX_BACKOFF);
            log(&format!("connection {n} ({peer}): no thread for it: {e} (retrying in {backoff:?})"));
            std::thread::sleep(backoff);
        }
    }
    Ok(())
}

/// Serves connections on `listener` with `handle` until `config.sessions` sessions have
/// completed (or forever). `handle` returns a line describing a completed session or an
/// error; `log` gets one line per session (its number, the peer's address, the line, the
/// error, or the panic), one per connection refused before its hello, and one per
/// accept or thread failure.
pub fn serve<E: Display>(
    listener: &TcpListener,
    config: ServeConfig,
    handle: impl Fn(&mut TcpChannel) -> Result<String, E> + Sync,
    log: impl Fn(&str) + Sync,
) -> io::Result<ServeStats> {
    let max = config.max_concurrent.max(1);
    // Sessions running, and admitted connections waiting for a place.
    let (places, freed) = (&Mutex::new((0usize, 0usize)), &Condvar::new());
    let (completed, failed, panicked, refused) =
        (&AtomicUsize::new(0), &AtomicUsize::new(0), &AtomicUsize::new(0), &AtomicUsize::new(0));
    let stopped = || config.stop.as_ref().is_some_and(|s| s.load(Ordering::SeqCst));
    let done = || stopped() || (config.sessions > 0 && completed.load(Ordering::SeqCst) >= config.sessions);
    let (handle, log) = (&handle, &log);
    let pending = &Pending::default();
    let (tcp, admission) = (&config.tcp, &config.admission);
    let session = |n: usize, peer: SocketAddr, mut ch: TcpChannel| {
        {
            let mut p = places.lock().unwrap_or_else(|e| e.into_inner());
            p.1 += 1;
            while p.0 >= max && !done() {
                p = freed.wait_timeout(p, POLL).unwrap_or_else(|e| e.into_inner()).0;
            }
            p.1 -= 1;
            if done() {
                log(&format!("connection {n} ({peer}): not served: the server is done"));
                return;
            }
            p.0 += 1;
        }
        let _place = Place { places, freed };
        let tell = |e| {
            if let Some(sink) = &config.events {
                (sink.0)(e);
            }
        };
        tell(ServeEvent::Started);
        let started = Instant::now();
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            // Under TLS the log names the peer's certificate identity.
            let who = ch.peer_identity().map_or(String::new(), |id| format!("[{id}] "));
            handle(&mut ch).map(|line| format!("{who}{line}")).map_err(|e| format!("{who}{e}"))
        }));
        let how = match &outcome {
            Ok(Ok(_)) => SessionEnd::Completed,
            Ok(Err(_)) => SessionEnd::Failed,
            Err(_) => SessionEnd::Panicked,
        };
        tell(ServeEvent::Ended { how, took: started.elapsed() });
        match outcome {
            Ok(Ok(line)) => {
                completed.fetch_add(1, Ordering::SeqCst);
                log(&format!("session {n} ({peer}): {line}"));
            }
            Ok(Err(e)) => {
                failed.fetch_add(1, Ordering::SeqCst);
                log(&format!("session {n} ({peer}): error: {e}"));
            }
            Err(panic) => {
                panicked.fetch_add(1, Ordering::SeqCst);
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".into());
                log(&format!("session {n} ({peer}): panicked (a bug; the server goes on): {what}"));
            }
        }
    };
    // Admitted connections waiting for a place are bounded like pending ones.
    let full = || places.lock().unwrap_or_else(|e| e.into_inner()).1 >= admission.max_pending.max(1);
    let result = std::thread::scope(|scope| {
        let events = config.events.as_ref();
        let r = accept_loop(scope, listener, tcp, admission, pending, refused, events, &done, &full, &session, log);
        pending.drop_all();
        if stopped() {
            let running = places.lock().unwrap_or_else(|e| e.into_inner()).0;
            log(&format!("stopping: no new sessions; waiting for {running} running"));
        }
        r
    });
    result?;
    let count = |c: &AtomicUsize| c.load(Ordering::SeqCst);
    Ok(ServeStats {
        completed: count(completed),
        failed: count(failed),
        panicked: count(panicked),
        refused: count(refused),
    })
}

/// Accepts connections on `listener` until one is admitted (its TLS handshake and first
/// frame within `admission`'s limits) and returns it; the others are dropped. Connections
/// refused on the way are logged to `log`. Returns an `Interrupted` error once `stop` is
/// set.
pub fn accept_one(
    listener: &TcpListener,
    config: TcpConfig,
    admission: &Admission,
    stop: Option<&AtomicBool>,
    log: impl Fn(&str) + Sync,
) -> Result<TcpChannel, NetError> {
    let (tx, rx) = mpsc::channel::<TcpChannel>();
    let tx = Mutex::new(tx);
    let (got, refused, pending) = (&AtomicBool::new(false), &AtomicUsize::new(0), &Pending::default());
    let stopped = || stop.is_some_and(|s| s.load(Ordering::SeqCst));
    let done = || stopped() || got.load(Ordering::SeqCst);
    let log = &log;
    let admitted = |_: usize, _: SocketAddr, ch: TcpChannel| {
        // The first one admitted is the peer; a later one is dropped.
        if !got.swap(true, Ordering::SeqCst) {
            let _ = tx.lock().unwrap_or_else(|e| e.into_inner()).send(ch);
        }
    };
    let never_full = || false;
    std::thread::scope(|scope| {
        let r = accept_loop(
            scope,
            listener,
            &config,
            admission,
            pending,
            refused,
            None,
            &done,
            &never_full,
            &admitted,
            log,
        );
        pending.drop_all();
        r
    })?;
    rx.try_recv().map_err(|_| io::Error::new(io::ErrorKind::Interrupted, "stopped before a peer came").into())
}

/// A running session's place among the `max_concurrent`, given back when it ends.
struct Place<'a> {
    places: &'a Mutex<(usize, usize)>,
    freed: &'a Condvar,
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        self.places.lock().unwrap_or_else(|e| e.into_inner()).0 -= 1;
        self.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::Channel;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    fn config(sessions: usize, max_concurrent: usize) -> ServeConfig {
        let tcp = TcpConfig { io_timeout: Some(Duration::from_secs(2)), ..TcpConfig::default() };
        ServeConfig { tcp, admission: Admission::default(), max_concurrent, sessions, stop: None, events: None }
    }

    /// An echo of one frame; the frame `panic` panics the session, `fail` fails it.
    fn echo(ch: &mut TcpChannel) -> Result<String, String> {
        let f = ch.recv().map_err(|e| e.to_string())?;
        match &f[..] {
            b"panic" => panic!("asked to"),
            b"fail" => Err("asked to".into()),
            _ => {
                ch.send(&f).map_err(|e| e.to_string())?;
                Ok("echoed".into())
            }
        }
    }

    fn client(addr: std::net::SocketAddr, msg: &[u8]) -> Option<Vec<u8>> {
        exchange(TcpStream::connect(addr).ok()?, msg)
    }

    /// Sends `msg` as one frame on `s` and reads one frame back.
    fn exchange(mut s: TcpStream, msg: &[u8]) -> Option<Vec<u8>> {
        s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        s.write_all(&(msg.len() as u32).to_le_bytes()).ok()?;
        s.write_all(msg).ok()?;
        let mut len = [0u8; 4];
        s.read_exact(&mut len).ok()?;
        let mut body = vec![0u8; u32::from_le_bytes(len) as usize];
        s.read_exact(&mut body).ok()?;
        Some(body)
    }

    #[test]
    fn panics_and_failures_end_their_session_only_and_do_not_count() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let lines = Mutex::new(Vec::new());
        let events = Arc::new(Mutex::new(Vec::new()));
        let mut c = config(3, 2);
        let seen = events.clone();
        c.events = Some(EventSink(Arc::new(move |e| seen.lock().unwrap().push(e))));
        let stats = std::thread::scope(|s| {
            let server = s.spawn(|| serve(&listener, c, echo, |l| lines.lock().unwrap().push(l.to_string())));
            assert_eq!(client(addr, b"panic"), None);
            assert_eq!(client(addr, b"fail"), None);
            drop(TcpStream::connect(addr).unwrap()); // junk: connects and hangs up
            for k in 0..3u8 {
                assert_eq!(client(addr, &[k; 3]).unwrap(), [k; 3]);
            }
            server.join().unwrap().unwrap()
        });
        assert_eq!(
            stats,
            ServeStats { completed: 3, failed: 1, panicked: 1, refused: 1 },
            "the junk connection is refused, not failed"
        );
        let lines = lines.into_inner().unwrap();
        assert_eq!(lines.iter().filter(|l| l.contains("panicked")).count(), 1, "{lines:?}");
        assert_eq!(lines.iter().filter(|l| l.contains("echoed")).count(), 3, "{lines:?}");
        // The sink saw the same: five sessions started and how each ended, and the junk
        // connection refused as closed before its hello.
        let events = events.lock().unwrap();
        let count = |f: &dyn Fn(&ServeEvent) -> bool| events.iter().filter(|e| f(e)).count();
        let ended = |how| move |e: &ServeEvent| matches!(e, ServeEvent::Ended { how: h, .. } if *h == how);
        assert_eq!(count(&|e| *e == ServeEvent::Started), 5, "{events:?}");
        assert_eq!(count(&ended(SessionEnd::Completed)), 3, "{events:?}");
        assert_eq!(count(&ended(SessionEnd::Failed)), 1, "{events:?}");
        assert_eq!(count(&ended(SessionEnd::Panicked)), 1, "{events:?}");
        assert_eq!(count(&|e| *e == ServeEvent::Refused(Refusal::Closed)), 1, "{events:?}");
    }

    #[test]
    fn at_most_max_concurrent_sessions_run_and_the_rest_wait() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (now, peak) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let slow = |ch: &mut TcpChannel| {
            let n = now.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(n, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(150));
            now.fetch_sub(1, Ordering::SeqCst);
            echo(ch)
        };
        std::thread::scope(|s| {
            let server = s.spawn(|| serve(&listener, config(6, 2), slow, |_| {}));
            let clients: Vec<_> = (0..6u8).map(|k| s.spawn(move || client(addr, &[k]))).collect();
            for (k, c) in clients.into_iter().enumerate() {
                assert_eq!(c.join().unwrap().unwrap(), [k as u8], "every waiting client is served");
            }
            assert_eq!(server.join().unwrap().unwrap().completed, 6);
        });
        assert_eq!(peak.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_slow_peer_meets_the_session_deadline() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut c = config(1, 2);
        c.tcp.session_timeout = Some(Duration::from_millis(700));
        let lines = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            let server = s.spawn(|| {
                // Empty frames, each well within the frame timeout, until a non-empty one.
                let patient = |ch: &mut TcpChannel| loop {
                    let f = ch.recv().map_err(|e| e.to_string())?;
                    if !f.is_empty() {
                        ch.send(&f).map_err(|e| e.to_string())?;
                        return Ok::<_, String>("echoed".to_string());
                    }
                };
                serve(&listener, c, patient, |l| lines.lock().unwrap().push(l.to_string()))
            });
            let mut slow = TcpStream::connect(addr).unwrap();
            for _ in 0..20 {
                std::thread::sleep(Duration::from_millis(100));
                if slow.write_all(&[0, 0, 0, 0]).is_err() {
                    break;
                }
            }
            assert_eq!(client(addr, b"ok").unwrap(), b"ok");
            assert_eq!(
                server.join().unwrap().unwrap(),
                ServeStats { completed: 1, failed: 1, panicked: 0, refused: 0 }
            );
        });
        let lines = lines.into_inner().unwrap();
        assert!(lines.iter().any(|l| l.contains("the session took longer than its limit")), "{lines:?}");
    }

    #[test]
    fn a_stop_lets_running_sessions_finish_and_starts_no_new_one() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let mut c = config(0, 4);
        c.stop = Some(stop.clone());
        let started = AtomicBool::new(false);
        let slow = |ch: &mut TcpChannel| {
            started.store(true, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(300));
            echo(ch)
        };
        std::thread::scope(|s| {
            let server = s.spawn(|| serve(&listener, c, slow, |_| {}));
            let running = s.spawn(|| client(addr, b"in flight"));
            while !started.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(5));
            }
            stop.store(true, Ordering::SeqCst);
            // The session under way completes; the server then returns without serving more.
            assert_eq!(running.join().unwrap().unwrap(), b"in flight");
            assert_eq!(
                server.join().unwrap().unwrap(),
                ServeStats { completed: 1, failed: 0, panicked: 0, refused: 0 }
            );
        });
        // The listener (still open here) queues a late connection that nobody accepts.
        let late = TcpStream::connect(addr).unwrap();
        late.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
        assert!((&late).read(&mut [0u8; 1]).is_err(), "nobody serves after a stop");
    }

    /// Connections that never send a frame, that send one byte, or a frame prefix far
    /// beyond the first frame's limit; left open.
    fn pests(addr: std::net::SocketAddr) -> Vec<TcpStream> {
        (0..36)
            .map(|i| {
                let mut c = TcpStream::connect(addr).unwrap();
                match i {
                    0..20 => {}
                    20..30 => c.write_all(&[7]).unwrap(),
                    _ => c.write_all(&(60u32 << 20).to_le_bytes()).unwrap(),
                }
                c
            })
            .collect()
    }

    /// Whether the server has closed `c` (a read ends) within `within`.
    fn closed(c: &mut TcpStream, within: Duration) -> bool {
        c.set_read_timeout(Some(within)).unwrap();
        !matches!(c.read(&mut [0u8; 1]), Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut))
    }

    #[test]
    fn idle_and_garbage_connections_hold_no_place() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut c = config(3, 1);
        c.tcp.io_timeout = Some(Duration::from_secs(60));
        let stats = std::thread::scope(|s| {
            let server = s.spawn(|| serve(&listener, c, echo, |_| {}));
            let _pests = pests(addr);
            for k in 0..3u8 {
                assert_eq!(client(addr, &[k; 4]).expect("answered beside the pests"), [k; 4]);
            }
            server.join().unwrap().unwrap()
        });
        assert_eq!((stats.completed, stats.failed), (3, 0));
        assert!(stats.refused >= 36 - 8, "{stats:?}");
    }

    #[test]
    fn a_connection_without_its_first_frame_in_time_is_dropped() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut c = config(1, 1);
        c.admission.timeout = Duration::from_millis(300);
        let lines = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            let server = s.spawn(|| serve(&listener, c, echo, |l| lines.lock().unwrap().push(l.to_string())));
            let mut idle = TcpStream::connect(addr).unwrap();
            let mut trickle = TcpStream::connect(addr).unwrap();
            trickle.write_all(&[1, 0]).unwrap(); // half a length prefix, never the rest
            assert!(closed(&mut idle, Duration::from_secs(5)) && closed(&mut trickle, Duration::from_secs(5)));
            assert_eq!(client(addr, b"ok").unwrap(), b"ok");
            assert_eq!(server.join().unwrap().unwrap().refused, 2);
        });
        let lines = lines.into_inner().unwrap();
        let dropped = lines.iter().filter(|l| l.contains("no TLS handshake and hello within 300ms")).count();
        assert_eq!(dropped, 2, "{lines:?}");
    }

    #[test]
    fn the_oldest_pending_connections_are_dropped_first() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut c = config(1, 1);
        c.admission = Admission {
            timeout: Duration::from_secs(30),
            max_pending_per_source: 2,
            settle: Duration::from_millis(100),
            ..Admission::default()
        };
        std::thread::scope(|s| {
            let server = s.spawn(|| serve(&listener, c, echo, |_| {}));
            let mut old = TcpStream::connect(addr).unwrap();
            std::thread::sleep(Duration::from_millis(200));
            let mut newer = TcpStream::connect(addr).unwrap();
            std::thread::sleep(Duration::from_millis(200));
            // A third from the same address pushes out the oldest, not the newer one.
            let _third = TcpStream::connect(addr).unwrap();
            assert!(closed(&mut old, Duration::from_secs(5)), "the oldest is dropped");
            assert!(!closed(&mut newer, Duration::from_millis(300)), "the newer one waits on");
            // A real client pushes out `newer` in its turn, and is answered.
            assert_eq!(client(addr, b"ok").unwrap(), b"ok");
            server.join().unwrap().unwrap();
        });
    }

    #[test]
    fn a_burst_of_connections_from_one_address_is_served() {
        // A partner running many queries at once from one host: all its connections are
        // accepted together, before any has sent its hello.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (lines, stop) = (Mutex::new(Vec::new()), Arc::new(AtomicBool::new(false)));
        let mut c = config(0, 8);
        c.stop = Some(stop.clone());
        let (answers, stats) = std::thread::scope(|s| {
            let server = s.spawn(|| serve(&listener, c, echo, |l| lines.lock().unwrap().push(l.to_string())));
            let burst: Vec<TcpStream> = (0..24).map(|_| TcpStream::connect(addr).unwrap()).collect();
            std::thread::sleep(POLL * 5);
            let clients: Vec<_> =
                burst.into_iter().enumerate().map(|(k, c)| s.spawn(move || exchange(c, &[k as u8]))).collect();
            let answers: Vec<_> = clients.into_iter().map(|c| c.join().unwrap()).collect();
            stop.store(true, Ordering::SeqCst);
            (answers, server.join().unwrap().unwrap())
        });
        let lines = lines.into_inner().unwrap();
        for (k, a) in answers.iter().enumerate() {
            assert_eq!(a.as_deref(), Some(&[k as u8][..]), "connection {k} of the burst is served: {lines:#?}");
        }
        assert_eq!(stats, ServeStats { completed: 24, ..ServeStats::default() });
    }

    #[test]
    fn a_first_frame_that_fails_the_check_is_refused_by_name() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut c = config(1, 1);
        c.admission.check = Some(Arc::new(|f: &[u8]| if f.starts_with(b"hi") { Ok(()) } else { Err("no hi".into()) }));
        let lines = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            let server = s.spawn(|| serve(&listener, c, echo, |l| lines.lock().unwrap().push(l.to_string())));
            assert_eq!(client(addr, b"xx"), None);
            assert_eq!(client(addr, b"hi there").unwrap(), b"hi there");
            assert_eq!(server.join().unwrap().unwrap().refused, 1);
        });
        let lines = lines.into_inner().unwrap();
        assert!(lines.iter().any(|l| l.contains("does not open a session: no hi")), "{lines:?}");
    }

    #[test]
    fn accept_one_returns_the_first_admitted_connection() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let _pests = pests(addr);
        std::thread::scope(|s| {
            let peer = s.spawn(move || client(addr, b"me"));
            let mut ch = accept_one(&listener, TcpConfig::default(), &Admission::default(), None, |_| {}).unwrap();
            assert_eq!(ch.recv().unwrap(), b"me", "the admitted frame comes first");
            ch.send(b"you").unwrap();
            assert_eq!(peer.join().unwrap().unwrap(), b"you");
        });
        let stop = AtomicBool::new(true);
        let stopped = accept_one(&listener, TcpConfig::default(), &Admission::default(), Some(&stop), |_| {});
        assert!(stopped.is_err(), "a stop ends the wait");
    }
}
