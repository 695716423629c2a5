//! Reaching the peer: connecting or listening for one session, serving many, and a
//! loopback pair for the demo and the benchmarks.

use crate::Failure;
use crate::args::NetArgs;
use setwise::net::{NetError, TcpChannel, TcpConfig};
use std::net::TcpListener;

/// A transport failure while `phase`, as an exit-3 failure.
pub fn net_failure(phase: &'static str, source: NetError) -> Failure {
    Failure::from(setwise::Error::Net { phase, source })
}

/// One connection to the peer: accepted on `--listen` or made to `--connect`.
pub fn connect(a: &NetArgs) -> Result<TcpChannel, Failure> {
    match (&a.listen, &a.connect) {
        (Some(addr), _) => {
            eprintln!("listening on {addr}");
            TcpChannel::listen(addr, a.config()).map_err(|e| net_failure("listening", e))
        }
        (_, Some(addr)) => TcpChannel::connect(addr, a.config()).map_err(|e| net_failure("connecting", e)),
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

/// Accepts `sessions` connections on `addr` (0: forever) and runs `handle` on each in
/// its own thread, logging each session's summary or error; one bad peer never stops
/// the others.
pub fn serve_many(
    addr: &str,
    config: TcpConfig,
    sessions: usize,
    handle: impl Fn(&mut TcpChannel) -> setwise::Result<String> + Sync,
) -> Result<(), Failure> {
    let listener = TcpListener::bind(addr).map_err(|e| net_failure("listening", e.into()))?;
    let what = if sessions == 0 { "any number of sessions".to_string() } else { format!("{sessions} sessions") };
    eprintln!("listening on {addr} for {what}");
    let handle = &handle;
    std::thread::scope(|s| {
        let mut served = 0usize;
        while sessions == 0 || served < sessions {
            let stream = match listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) => {
                    eprintln!("accept failed: {e}");
                    continue;
                }
            };
            served += 1;
            let n = served;
            s.spawn(move || {
                let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
                let result = TcpChannel::from_stream(stream, config)
                    .map_err(|e| setwise::Error::Net { phase: "accepting", source: e })
                    .and_then(|mut ch| handle(&mut ch));
                match result {
                    Ok(line) => eprintln!("session {n} ({peer}): {line}"),
                    Err(e) => eprintln!("session {n} ({peer}): error: {e}"),
                }
            });
        }
    });
    Ok(())
}
