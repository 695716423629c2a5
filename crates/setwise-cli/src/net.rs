//! Reaching the peer: connecting or listening for one session, serving many, and a
//! loopback pair for the demo and the benchmarks.

use crate::Failure;
use crate::args::NetArgs;
use crate::metrics::{Endpoint, Metrics};
use setwise::net::{NetError, ServeConfig, TcpChannel, TcpConfig, accept_one, serve};
use setwise::session::served_line;
use setwise::{Outcome, Report};
use signal_hook::consts::{SIGINT, SIGTERM};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A transport failure while `phase`, as an exit-3 failure.
pub fn net_failure(phase: &'static str, source: NetError) -> Failure {
    Failure::from(setwise::Error::Net { phase, source })
}

/// One connection to the peer: made to `--connect`, or the first on `--listen` that
/// completes TLS and sends a hello in time (others are logged and dropped).
pub fn connect(a: &NetArgs) -> Result<TcpChannel, Failure> {
    match (&a.listen, &a.connect) {
        (Some(addr), _) => {
            let config = a.config()?;
            let listener = TcpListener::bind(addr).map_err(|e| net_failure("listening", e.into()))?;
            eprintln!("listening on {addr}");
            accept_one(&listener, config, &a.admission.admission(), None, |line| eprintln!("{line}"))
                .map_err(|e| net_failure("listening", e))
        }
        (_, Some(addr)) => TcpChannel::connect(addr, a.config()?).map_err(|e| net_failure("connecting", e)),
        _ => Err(Failure::usage(anyhow::anyhow!("give --listen or --connect"))),
    }
}

/// Two connected ends over loopback TCP: (accepted, connecting).
pub fn loopback() -> Result<(TcpChannel, TcpChannel), Failure> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(Failure::usage)?;
    let addr = listener.local_addr().map_err(Failure::usage)?.to_string();
    let (a, b) = std::thread::scope(|s| {
        let accepted = s.spawn(|| TcpChannel::accept(&listener, TcpConfig::default()));
        let b = TcpChannel::connect(&addr, TcpConfig::default());
        (accepted.join().expect("accept thread"), b)
    });
    Ok((a.map_err(|e| net_failure("accepting", e))?, b.map_err(|e| net_failure("connecting", e))?))
}

/// Serves sessions on `addr` until `config.sessions` have completed (0: until stopped),
/// each on its own thread within the server's limits, logging one line per session;
/// no peer, however bad, stops the others or counts as a session it did not complete.
/// SIGTERM or SIGINT stops accepting; running sessions get `grace` to finish, then the
/// process exits 0.
pub fn serve_many(
    addr: &str,
    mut config: ServeConfig,
    grace: Duration,
    endpoint: Option<Endpoint>,
    handle: impl Fn(&mut TcpChannel) -> setwise::Result<(Outcome, Report)> + Sync,
) -> Result<(), Failure> {
    let listener = TcpListener::bind(addr).map_err(|e| net_failure("listening", e.into()))?;
    // Healthy only once there is something to be healthy about.
    if let Some(e) = &endpoint {
        e.start()?;
    }
    let metrics = endpoint.map(|e| e.metrics);
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [SIGTERM, SIGINT] {
        signal_hook::flag::register(signal, stop.clone()).map_err(|e| net_failure("listening", e.into()))?;
    }
    config.stop = Some(stop.clone());
    config.events = metrics.as_ref().map(Metrics::sink);
    let stopping = metrics.clone();
    std::thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(50));
        }
        if let Some(m) = stopping {
            m.stopping();
        }
        eprintln!("stopping: no new sessions; running ones have {} s to finish", grace.as_secs());
        std::thread::sleep(grace);
        eprintln!("stopping: grace period over, exiting with sessions still running");
        std::process::exit(0);
    });
    let what = match config.sessions {
        0 => "any number of sessions".to_string(),
        n => format!("{n} sessions"),
    };
    let tls = match &config.tcp.tls {
        Some(t) if t.mutual() => "mutual TLS",
        Some(_) => "TLS",
        None => "plain TCP",
    };
    eprintln!("listening on {addr} ({tls}) for {what}, at most {} at once", config.max_concurrent);
    let handle = |ch: &mut TcpChannel| {
        let (outcome, report) = handle(ch)?;
        if let Some(m) = &metrics {
            m.completed(&report);
        }
        Ok::<_, setwise::Error>(served_line(&outcome, &report))
    };
    let stats =
        serve(&listener, config, handle, |line| eprintln!("{line}")).map_err(|e| net_failure("listening", e.into()))?;
    if stats.failed + stats.panicked + stats.refused > 0 {
        eprintln!(
            "served {} sessions; {} failed, {} panicked, {} connections refused before their hello",
            stats.completed, stats.failed, stats.panicked, stats.refused
        );
    }
    Ok(())
}
