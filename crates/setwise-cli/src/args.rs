//! Arguments shared by several subcommands: where items come from, the job, the peer
//! and the report.

use crate::Failure;
use clap::{ArgGroup, Args};
use setwise::net::{Admission, DEFAULT_MAX_FRAME, ServeConfig, TcpConfig, TlsConfig, TlsOptions};
use setwise::protocols::registry;
use setwise::protocols::{Named, Reveal, Spec};
use setwise::session::Job;
use setwise::{Operation, Protocol, Security, SumTo};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Where the items come from.
#[derive(Args)]
pub struct InputArgs {
    /// Input file: CSV (with a header unless --no-header); for .txt, one item per line;
    /// Parquet (.parquet, .pq) or Arrow IPC (.arrow, .feather, .ipc; .arrows for a stream),
    /// read batch by batch.
    #[arg(long)]
    pub input: Option<PathBuf>,
    /// Key columns: header names, or 1-based indices with --no-header; several are
    /// joined. Default: the first column. In Parquet and Arrow files, a struct's field is
    /// `column.field`.
    #[arg(long, value_delimiter = ',')]
    pub key: Vec<String>,
    /// The CSV input has no header row.
    #[arg(long)]
    pub no_header: bool,
    /// Input format, overriding the guess from the file name.
    #[arg(long, value_parser = ["csv", "text", "parquet", "arrow", "arrows"])]
    pub format: Option<String>,
}

/// What `--protocol auto` does in a connected run.
const AUTO_HELP: &str = "chosen after the hello from the operation, both set sizes and the security asked for; \
                         against a peer that names a protocol auto can run, that one";

/// `--protocol`'s help: each protocol of the registry with the operations `ops` gives it
/// (those it runs, or those it stages), then `auto`, described by `auto`, where it has
/// any.
pub fn protocol_help(ops: fn(&Spec) -> &'static [Operation], auto: &str) -> String {
    let list: Vec<String> = registry::ALL
        .iter()
        .filter(|s| !std::ptr::eq(**s, &registry::AUTO) && !ops(s).is_empty())
        .map(|s| format!("{} ({})", s.name, names(ops(s))))
        .collect();
    let auto = match ops(&registry::AUTO) {
        [] => String::new(),
        _ => format!("; or auto ({auto})"),
    };
    format!("Protocol: {}{auto}", list.join(", "))
}

/// `--reveal`'s help, with the protocols whose result the sender may also learn.
fn reveal_help() -> String {
    let list: Vec<String> = registry::ALL
        .iter()
        .filter(|s| !std::ptr::eq(**s, &registry::AUTO) && !s.reveal_both.is_empty())
        .map(|s| format!("{} {}", s.name, names(s.reveal_both)))
        .collect();
    format!(
        "Who learns the result: receiver, or both ({}): the receiver then tells the sender, which writes its own \
         rows in the intersection with --output or prints the count. The sender trusts the receiver's report \
         (docs/protocols/reveal.md). Both sides must agree.",
        list.join("; ")
    )
}

/// `--security`'s help, with the protocols that withstand a malicious peer.
fn security_help() -> String {
    let list: Vec<String> = registry::ALL
        .iter()
        .filter(|s| !std::ptr::eq(**s, &registry::AUTO) && s.security == Security::Malicious)
        .map(|s| format!("{} {}", s.name, names(s.operations)))
        .collect();
    format!(
        "The adversary to withstand: semi-honest, or malicious ({}; auto picks one). Both sides must agree.",
        list.join("; ")
    )
}

/// Operation names, comma-separated.
fn names(ops: &[Operation]) -> String {
    ops.iter().map(|o| o.name()).collect::<Vec<_>>().join(", ")
}

/// What to run.
#[derive(Args)]
pub struct JobArgs {
    // The help lists the registry's protocols with their operations.
    #[arg(long, default_value = registry::DEFAULT.name, help = protocol_help(|s| s.operations, AUTO_HELP))]
    pub protocol: Protocol,
    /// Operation: intersection (the receiver learns the common items); cardinality (ecdh,
    /// mqrpmt: only how many); and with mqrpmt: sum (the sender holds --value; both learn
    /// the cardinality, the sender the sum of its values over the intersection, or with
    /// --sum-to receiver the receiver learns both and the sender nothing), shares
    /// (both write XOR shares of the intersection), union (the receiver learns X ∪ Y),
    /// private-id (both get an ID per row and the IDs of the union).
    #[arg(long = "op", default_value = "intersection")]
    pub operation: Operation,
    #[command(flatten)]
    pub options: OptionArgs,
    // Which protocols reveal what comes from the registry.
    #[arg(long, default_value = "receiver", help = reveal_help())]
    pub reveal: Reveal,
    // Which protocols withstand malicious peers comes from the registry.
    #[arg(long, default_value = "semi-honest", help = security_help())]
    pub security: Security,
    /// sum: who learns the sum: sender (the value holder; both learn the cardinality) or
    /// receiver (reverse PSI-card-sum: the receiver learns the cardinality and the sum of
    /// the sender's values over the intersection, the sender nothing; a receiver that
    /// deviates can learn other sums of the values, docs/protocols/mqrpmt.md). Both sides
    /// must agree.
    #[arg(long, default_value = "sender")]
    pub sum_to: SumTo,
    /// Refuse a peer that announces more items than this (a server's cap on what one
    /// peer can ask of it; default: 2^32).
    #[arg(long)]
    pub max_peer_items: Option<u64>,
}

impl JobArgs {
    /// The job for items of `key_columns` key columns, with the protocol's own options
    /// from `named` (this command's flags and `--rpmt`, `--last-move`).
    pub fn job(&self, key_columns: usize, named: Named) -> setwise::Result<Job> {
        let mut job = Job::new(self.protocol, self.operation)
            .with_key_columns(key_columns)
            .with_reveal(self.reveal)
            .with_security(self.security)
            .with_sum_to(self.sum_to)
            .with_options(&self.options.named(named))?;
        if let Some(n) = self.max_peer_items {
            job = job.with_max_peer_size(n);
        }
        Ok(job)
    }
}

/// Options of one protocol's own, passed to it by name (its spec says which it takes and
/// refuses the others): today mqrpmt's membership test.
#[derive(Args)]
pub struct OptionArgs {
    /// mqrpmt: the membership test's construction: cwprf (from a commutative weak PRF,
    /// 2 scalar multiplications per item on each side; the default) or poprf (from a
    /// permuted OPRF: 1 multiplication and a ~10-byte tag per sender item, 3
    /// multiplications per receiver item; the cheaper one when the sender holds the
    /// larger set). Both sides must agree.
    #[arg(long)]
    pub rpmt: Option<String>,
    /// mqrpmt: how the sender returns the receiver's keyed items: bloom (a Bloom filter,
    /// 58 bits per item, false positives 2^-40; the default with cwprf) or shuffle (32
    /// bytes per item; poprf's only one). Both sides must agree.
    #[arg(long)]
    pub last_move: Option<String>,
}

impl OptionArgs {
    /// `named` with the options given here.
    pub fn named(&self, named: Named) -> Named {
        named.with("rpmt", self.rpmt.as_deref()).with("last_move", self.last_move.as_deref())
    }
}

/// How to reach the peer.
#[derive(Args)]
#[command(group(ArgGroup::new("peer").required(true).args(["listen", "connect"])))]
pub struct NetArgs {
    /// Address to listen on for the peer (e.g. 0.0.0.0:7700).
    #[arg(long)]
    pub listen: Option<String>,
    /// Address of the listening peer; retried until --connect-timeout.
    #[arg(long)]
    pub connect: Option<String>,
    /// Seconds to keep retrying --connect.
    #[arg(long, default_value_t = 30)]
    pub connect_timeout: u64,
    /// Seconds a whole frame from or to the peer may take (however slowly it trickles).
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
    /// Largest frame accepted from the peer, in bytes.
    #[arg(long, default_value_t = DEFAULT_MAX_FRAME)]
    pub max_frame: usize,
    #[command(flatten)]
    pub tls: TlsArgs,
    #[command(flatten)]
    pub admission: AdmissionArgs,
}

/// What a listener asks of a connection before it counts as a peer: connections that
/// do not complete TLS and send a hello in time are dropped, and cannot hold a session's
/// place or the listener.
#[derive(Args, Clone)]
pub struct AdmissionArgs {
    /// Listening: seconds a connection may take to complete its TLS handshake and send
    /// its hello; slower ones are dropped.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub hello_timeout: u64,
    /// Listening: connections still without a hello, at most; the oldest is dropped for a
    /// new one.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=65536))]
    pub max_pending: u64,
    /// Listening: connections still without a hello after a second from one IP address,
    /// at most; its oldest is dropped for a new one (a burst of connections opened at
    /// once passes).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=65536))]
    pub max_pending_per_address: u64,
}

impl AdmissionArgs {
    /// The library's admission with these limits (a well-formed hello required).
    pub fn admission(&self) -> Admission {
        Admission {
            max_pending: self.max_pending as usize,
            max_pending_per_source: self.max_pending_per_address as usize,
            ..setwise::session::admission(Duration::from_secs(self.hello_timeout))
        }
    }
}

impl NetArgs {
    /// The channel settings (TLS as the flags say; plain TCP only as `TlsArgs` allows).
    pub fn config(&self) -> Result<TcpConfig, Failure> {
        let addr = self.listen.as_deref().or(self.connect.as_deref()).unwrap_or_default();
        Ok(TcpConfig {
            max_frame: self.max_frame,
            io_timeout: Some(Duration::from_secs(self.timeout)),
            session_timeout: None,
            connect_timeout: Duration::from_secs(self.connect_timeout),
            tls: self.tls.config(addr, self.listen.is_some())?,
        })
    }
}

/// TLS 1.3 (rustls) around the connection. The listening side is the TLS server and
/// needs a certificate and key; the connecting side needs the CA that signed the
/// listener. A CA on the listener makes client certificates mandatory (mutual TLS).
#[derive(Args, Default, Clone)]
pub struct TlsArgs {
    /// This party's certificate chain (PEM).
    #[arg(long, env = "SETWISE_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// This party's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, env = "SETWISE_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// The CA certificate(s) that must have signed the peer (PEM). On a listener: mutual
    /// TLS, every client must present a certificate from this CA.
    #[arg(long, env = "SETWISE_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
    /// The name the listener's certificate must carry, when connecting by address or by
    /// another name than its certificate's.
    #[arg(long, env = "SETWISE_TLS_SERVER_NAME")]
    pub tls_server_name: Option<String>,
    /// Refuse a peer whose TLS certificate is not valid for this name.
    #[arg(long, env = "SETWISE_PEER_NAME")]
    pub peer_name: Option<String>,
    /// Allow plain TCP to or from a non-loopback address: anyone on the path reads the
    /// outputs that travel and anyone who reaches the listener can run a session.
    #[arg(long, conflicts_with_all = ["tls_cert", "tls_key", "tls_ca", "tls_server_name", "peer_name"])]
    pub insecure_no_tls: bool,
}

impl TlsArgs {
    /// The TLS settings for a channel on `addr` (listened on when `listening`, else
    /// connected to), by the library's policy ([`TlsOptions::resolve`]): plain TCP only on
    /// loopback or with --insecure-no-tls.
    pub fn config(&self, addr: &str, listening: bool) -> Result<Option<Arc<TlsConfig>>, Failure> {
        let options = TlsOptions {
            cert: self.tls_cert.clone(),
            key: self.tls_key.clone(),
            ca: self.tls_ca.clone(),
            server_name: self.tls_server_name.clone(),
            peer_name: self.peer_name.clone(),
            insecure_no_tls: self.insecure_no_tls,
        };
        options.resolve(addr, listening).map_err(|e| Failure::usage(anyhow::Error::new(e)))
    }
}

/// Limits of a server: the unbalanced sender with `--sessions` other than 1, the judge.
#[derive(Args)]
pub struct ServeArgs {
    /// Server: sessions served at once; further connections wait their turn.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub max_concurrent: u64,
    /// Server: seconds a whole session may take (0: no limit), so that a slow peer
    /// cannot hold its place for ever.
    #[arg(long, default_value_t = 3600)]
    pub session_timeout: u64,
    /// Server: on SIGTERM or SIGINT, seconds the running sessions may take to finish
    /// before the process exits (0 on either path); no new session starts.
    #[arg(long, default_value_t = 30)]
    pub grace: u64,
    /// Server: serve Prometheus metrics at http://ADDR/metrics (sessions by result,
    /// refusals by reason, durations, bytes, items) and a health check at /health; a
    /// bare port listens on 127.0.0.1. Off by default.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
}

impl ServeArgs {
    /// The metrics endpoint `--metrics` asks for, for a server described by `labels`
    /// (and the database it serves): `None` without the flag. It listens once the
    /// server does ([`crate::net::serve_many`]).
    pub fn metrics(
        &self,
        labels: &[(&str, &str)],
        database: Option<(usize, &[(&str, &str)])>,
    ) -> Option<crate::metrics::Endpoint> {
        let addr = self.metrics.as_ref()?;
        Some(crate::metrics::Endpoint::new(addr, crate::metrics::Metrics::new(labels, database)))
    }

    /// Refuses `--metrics` where nothing is served (one session, or connecting out).
    pub fn no_metrics(&self) -> Result<(), crate::Failure> {
        match &self.metrics {
            Some(_) => Err(crate::Failure::usage(anyhow::anyhow!(
                "--metrics is for a server: give --listen with --sessions other than 1"
            ))),
            None => Ok(()),
        }
    }

    /// How long running sessions may take to finish after SIGTERM.
    pub fn grace(&self) -> Duration {
        Duration::from_secs(self.grace)
    }

    /// The server settings around each connection's channel settings `tcp`, admitting
    /// connections as `admission` says.
    pub fn config(&self, tcp: TcpConfig, admission: &AdmissionArgs, sessions: usize) -> ServeConfig {
        let session_timeout = (self.session_timeout > 0).then(|| Duration::from_secs(self.session_timeout));
        ServeConfig {
            tcp: TcpConfig { session_timeout, ..tcp },
            admission: admission.admission(),
            max_concurrent: self.max_concurrent as usize,
            sessions,
            stop: None,
            events: None,
        }
    }
}

/// What a party of a two-party run gives: the job, the peer, the report, its items.
#[derive(Args)]
pub struct PartyArgs {
    #[command(flatten)]
    pub job: JobArgs,
    #[command(flatten)]
    pub net: NetArgs,
    #[command(flatten)]
    pub report: ReportArgs,
    #[command(flatten)]
    pub input: InputArgs,
}

/// What to tell about the run.
#[derive(Args)]
pub struct ReportArgs {
    /// Write the run report as JSON to this file: phases, times, bytes, set sizes and
    /// parameters, not what this party learned, so that it can go to the partner.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Also record what this party learned (result counts, the sum) in the report, in a
    /// `private` section; the file is then readable by its owner only and is not for the
    /// partner (`setwise report --share` strips the section).
    #[arg(long, requires = "report")]
    pub report_results: bool,
    /// Also print each phase's time and traffic.
    #[arg(long, short, conflicts_with = "quiet")]
    pub verbose: bool,
    /// No progress display and no summary line (errors are still printed). Progress is
    /// drawn only when stderr is a terminal anyway.
    #[arg(long, short)]
    pub quiet: bool,
}

/// A size in bytes: a number, or one with a unit (KiB, MiB, GiB, TiB, K, M, G, T and, as
/// Spark and the JVM write them, k, m, g, t are powers of 1024; kB, MB, GB, TB of 1000).
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(t.len());
    if split == 0 {
        return Err(format!("{s:?} is not a size in bytes (e.g. 4GiB)"));
    }
    let (number, unit) = t.split_at(split);
    let scale: f64 = match unit.trim() {
        "" | "B" => 1.0,
        // Lower case as Spark and the JVM read `8g`.
        "K" | "k" | "KiB" => 1024.0,
        "M" | "m" | "MiB" => 1024f64.powi(2),
        "G" | "g" | "GiB" => 1024f64.powi(3),
        "T" | "t" | "TiB" => 1024f64.powi(4),
        "kB" | "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        u => {
            return Err(format!(
                "unknown unit {u:?}: use bytes, KiB, MiB, GiB, TiB (or K, M, G, T, or k, m, g, t) or kB, MB, GB, TB"
            ));
        }
    };
    let n: f64 = number.parse().map_err(|_| format!("{s:?} is not a size in bytes (e.g. 4GiB)"))?;
    let bytes = n * scale;
    if !bytes.is_finite() || bytes >= usize::MAX as f64 {
        return Err(format!("{s:?} is too large"));
    }
    Ok(bytes as usize)
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_read_with_or_without_units() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4GiB"), Ok(4 << 30));
        assert_eq!(parse_size("8g"), Ok(8 << 30));
        assert_eq!(parse_size("4G"), Ok(4 << 30));
        assert_eq!(parse_size("1.5 MiB"), Ok(3 << 19));
        assert_eq!(parse_size("2GB"), Ok(2_000_000_000));
        assert!(parse_size("4 parsecs").unwrap_err().contains("unknown unit"));
        assert!(parse_size("-1").unwrap_err().contains("not a size"));
        assert!(parse_size("GiB").is_err() && parse_size("").is_err() && parse_size("1e400").is_err());
    }
}
