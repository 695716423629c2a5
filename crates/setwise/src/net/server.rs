//! Serving many peers on one listener, each session on its own thread, so that no peer
//! can stop the others: at most `max_concurrent` sessions run at once (further
//! connections wait in the listen backlog), every connection gets the frame and session
//! deadlines of [`TcpConfig`], accept errors (e.g. no file descriptors left) back off
//! instead of spinning, a thread the OS refuses drops that connection only, a panic
//! inside a session ends that session only, and only sessions that complete count
//! towards `sessions`.

use super::{TcpChannel, TcpConfig};
use std::fmt::Display;
use std::io;
use std::net::TcpListener;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Settings of a server.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Each connection's channel settings: frame size, frame and session deadlines.
    pub tcp: TcpConfig,
    /// Sessions running at once; further connections wait to be accepted.
    pub max_concurrent: usize,
    /// Completed sessions to serve before returning; 0 serves until stopped.
    pub sessions: usize,
    /// Once set (e.g. on SIGTERM), no new session starts; `serve` returns when the
    /// running ones have ended.
    pub stop: Option<Arc<AtomicBool>>,
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            tcp: TcpConfig { session_timeout: Some(Duration::from_secs(3600)), ..TcpConfig::default() },
            max_concurrent: 8,
            sessions: 0,
            stop: None,
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
}

/// Longest wait between accept attempts after an error.
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// How often an idle accept loop checks whether it is done.
const POLL: Duration = Duration::from_millis(20);

/// Serves connections on `listener` with `handle` until `config.sessions` sessions have
/// completed (or forever). `handle` returns a line describing a completed session or an
/// error; `log` gets one line per session (its number, the peer's address, the line, the
/// error, or the panic) and one per accept or thread failure.
pub fn serve<E: Display>(
    listener: &TcpListener,
    config: ServeConfig,
    handle: impl Fn(&mut TcpChannel) -> Result<String, E> + Sync,
    log: impl Fn(&str) + Sync,
) -> io::Result<ServeStats> {
    listener.set_nonblocking(true)?;
    let max = config.max_concurrent.max(1);
    let (active, freed) = (&Mutex::new(0usize), &Condvar::new());
    let (completed, failed, panicked) = (&AtomicUsize::new(0), &AtomicUsize::new(0), &AtomicUsize::new(0));
    let stopped = || config.stop.as_ref().is_some_and(|s| s.load(Ordering::SeqCst));
    let done = || stopped() || (config.sessions > 0 && completed.load(Ordering::SeqCst) >= config.sessions);
    let (handle, log) = (&handle, &log);
    std::thread::scope(|scope| {
        let mut accepted = 0usize;
        let mut backoff = Duration::ZERO;
        while !done() {
            // Wait for a free slot before accepting: excess connections stay queued.
            {
                let mut n = active.lock().unwrap_or_else(|e| e.into_inner());
                while *n >= max && !done() {
                    n = freed.wait_timeout(n, POLL).unwrap_or_else(|e| e.into_inner()).0;
                }
            }
            if done() {
                break;
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
                log(&format!("session {n} ({peer}): error: {e}"));
                continue;
            }
            *active.lock().unwrap_or_else(|e| e.into_inner()) += 1;
            let tcp = config.tcp.clone();
            let session = move || {
                let _slot = Slot { active, freed };
                let outcome = catch_unwind(AssertUnwindSafe(|| {
                    let mut ch = TcpChannel::from_stream(stream, tcp).map_err(|e| e.to_string())?;
                    // Under TLS the log names the peer's certificate identity.
                    let who = ch.peer_identity().map_or(String::new(), |id| format!("[{id}] "));
                    handle(&mut ch).map(|line| format!("{who}{line}")).map_err(|e| format!("{who}{e}"))
                }));
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
            if let Err(e) = std::thread::Builder::new().name(format!("session-{n}")).spawn_scoped(scope, session) {
                // The closure, and with it the slot guard, was never run: free the slot.
                *active.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
                backoff = (backoff * 2).clamp(Duration::from_millis(10), MAX_BACKOFF);
                log(&format!("session {n} ({peer}): no thread for it: {e} (retrying in {backoff:?})"));
                std::thread::sleep(backoff);
            }
        }
        if stopped() {
            let running = *active.lock().unwrap_or_else(|e| e.into_inner());
            log(&format!("stopping: no new sessions; waiting for {running} running"));
        }
    });
    let count = |c: &AtomicUsize| c.load(Ordering::SeqCst);
    Ok(ServeStats { completed: count(completed), failed: count(failed), panicked: count(panicked) })
}

/// A running session's place among the `max_concurrent`, given back when it ends.
struct Slot<'a> {
    active: &'a Mutex<usize>,
    freed: &'a Condvar,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        *self.active.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
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
        ServeConfig { tcp, max_concurrent, sessions, stop: None }
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
        let mut s = TcpStream::connect(addr).ok()?;
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
        let stats = std::thread::scope(|s| {
            let server =
                s.spawn(|| serve(&listener, config(3, 2), echo, |l| lines.lock().unwrap().push(l.to_string())));
            assert_eq!(client(addr, b"panic"), None);
            assert_eq!(client(addr, b"fail"), None);
            drop(TcpStream::connect(addr).unwrap()); // junk: connects and hangs up
            for k in 0..3u8 {
                assert_eq!(client(addr, &[k; 3]).unwrap(), [k; 3]);
            }
            server.join().unwrap().unwrap()
        });
        assert_eq!(stats, ServeStats { completed: 3, failed: 2, panicked: 1 });
        let lines = lines.into_inner().unwrap();
        assert_eq!(lines.iter().filter(|l| l.contains("panicked")).count(), 1, "{lines:?}");
        assert_eq!(lines.iter().filter(|l| l.contains("echoed")).count(), 3, "{lines:?}");
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
            assert_eq!(server.join().unwrap().unwrap(), ServeStats { completed: 1, failed: 1, panicked: 0 });
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
            assert_eq!(server.join().unwrap().unwrap(), ServeStats { completed: 1, failed: 0, panicked: 0 });
        });
        // The listener (still open here) queues a late connection that nobody accepts.
        let late = TcpStream::connect(addr).unwrap();
        late.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
        assert!((&late).read(&mut [0u8; 1]).is_err(), "nobody serves after a stop");
    }
}
