//! Work that waits on a network runs on a worker thread while the calling thread waits
//! without the GIL, checks for Ctrl-C every 100 ms and hands the worker's log lines to
//! a Python callable. An interrupt raises `KeyboardInterrupt` after cancelling the work:
//! a single run has its socket shut down so it ends at once; a server stops accepting
//! and its running sessions get `grace` to finish.

use pyo3::prelude::*;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the worker shares with the waiting thread to be cancelled.
#[derive(Default)]
pub struct Cancel {
    stop: Arc<AtomicBool>,
    socket: Mutex<Option<TcpStream>>,
}

impl Cancel {
    fn cancel(&self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(s) = self.socket.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// The flag a server polls to stop accepting.
    pub fn flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// The connection to shut down on a cancel.
    pub fn watch(&self, socket: TcpStream) {
        *self.socket.lock().unwrap_or_else(|e| e.into_inner()) = Some(socket);
    }
}

/// Where the worker sends log lines.
pub type Log = Sender<String>;

/// Runs `work` on a worker thread and waits for it (see the module doc). `log` gets each
/// line the worker sends; `grace` is how long a cancelled worker may take to end
/// before the interrupt is raised regardless.
pub fn on_worker<T: Send + 'static>(
    py: Python<'_>,
    log: Option<&Bound<'_, PyAny>>,
    grace: Duration,
    work: impl FnOnce(&Cancel, &Log) -> PyResult<T> + Send + 'static,
) -> PyResult<T> {
    let cancel = Arc::new(Cancel::default());
    let (tx, rx) = channel();
    let (log_tx, log_rx) = channel::<String>();
    let worker_cancel = cancel.clone();
    std::thread::spawn(move || {
        let _ = tx.send(work(&worker_cancel, &log_tx));
    });
    // Waiting happens without the GIL, from whichever thread holds the lock.
    let rx = Mutex::new(rx);
    let wait = |until: Duration| py.detach(|| rx.lock().unwrap_or_else(|e| e.into_inner()).recv_timeout(until));
    loop {
        let got = wait(Duration::from_millis(100));
        flush(log, &log_rx)?;
        match got {
            Ok(r) => return r,
            Err(RecvTimeoutError::Timeout) => {
                if let Err(interrupt) = py.check_signals() {
                    cancel.cancel();
                    let until = Instant::now() + grace;
                    while let Err(RecvTimeoutError::Timeout) = wait(Duration::from_millis(100)) {
                        flush(log, &log_rx)?;
                        if Instant::now() >= until {
                            break;
                        }
                    }
                    flush(log, &log_rx)?;
                    return Err(interrupt);
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(crate::errors::Error::new_err("the worker thread ended without a result"));
            }
        }
    }
}

fn flush(log: Option<&Bound<'_, PyAny>>, lines: &Receiver<String>) -> PyResult<()> {
    for line in lines.try_iter() {
        if let Some(log) = log {
            log.call1((line,))?;
        }
    }
    Ok(())
}
