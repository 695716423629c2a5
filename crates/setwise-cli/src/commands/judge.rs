//! `setwise judge`: the judge of authorised PSI signs clients' allowed items.

use crate::Failure;
use crate::args::{AdmissionArgs, ServeArgs, TlsArgs};
use crate::log::observer;
use crate::net::serve_many;
use clap::Args;
use setwise::Role;
use setwise::io::{Format, ItemSet, write_atomic};
use setwise::net::TcpConfig;
use setwise::protocols::authorized::{self, AllowList, JudgeConfig, JudgeKey};
use setwise::session::{Input, Job, run_observed};
use std::path::PathBuf;
use std::time::Duration;

/// `setwise judge`.
#[derive(Args)]
pub struct JudgeArgs {
    /// Address to listen on for clients.
    #[arg(long)]
    listen: String,
    /// Allow-list of the items the judge authorises (CSV with header, .txt, Parquet or
    /// Arrow IPC).
    #[arg(long)]
    allow: PathBuf,
    /// Key columns of the allow-list.
    #[arg(long, value_delimiter = ',')]
    key: Vec<String>,
    /// The allow-list CSV has no header.
    #[arg(long)]
    no_header: bool,
    /// A column of the allow-list naming the client each row is allowed to: the identity
    /// in its TLS certificate, so this needs mutual TLS (--tls-ca); without it every
    /// listed item is allowed to every client.
    #[arg(long)]
    client_column: Option<String>,
    /// Partial mode: the fraction p of commitments opened (⌈p·n⌉), in (0, 1].
    #[arg(long, default_value_t = 0.1)]
    fraction: f64,
    /// Full mode: sign nothing unless every item is allowed (the paper's answer);
    /// default: sign the allowed items and report the refused ones.
    #[arg(long)]
    strict: bool,
    /// Where to write the public key (hex) for clients and servers.
    #[arg(long)]
    public_key: PathBuf,
    /// The secret key file: loaded if present, created (mode 0600) otherwise. Required:
    /// a judge's key is its identity, so it is never put in the working directory unasked.
    #[arg(long)]
    secret_key: PathBuf,
    /// Sessions to serve before exiting (0: until stopped).
    #[arg(long, default_value_t = 0)]
    sessions: usize,
    /// Seconds a whole frame from or to a client may take.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    /// Refuse a client that asks about more items than this (each costs the judge a
    /// signature; default: 2^32).
    #[arg(long)]
    max_peer_items: Option<u64>,
    #[command(flatten)]
    serve: ServeArgs,
    #[command(flatten)]
    admission: AdmissionArgs,
    #[command(flatten)]
    tls: TlsArgs,
}

/// Runs `setwise judge`.
pub fn run_judge(a: JudgeArgs) -> Result<(), Failure> {
    // A stated client ID is whatever the client says: a policy that names clients must
    // learn who they are from verified certificates.
    if a.client_column.is_some() && a.tls.tls_ca.is_none() {
        return Err(Failure::usage(anyhow::anyhow!(
            "--client-column needs mutual TLS: give --tls-ca (with --tls-cert and --tls-key) so each client's identity comes from its certificate, not from what it states"
        )));
    }
    let key = JudgeKey::load_or_create(&a.secret_key)?;
    write_atomic(&a.public_key, format!("{}\n", authorized::public_key_hex(key.public())).as_bytes(), false)
        .map_err(|e| Failure::usage(anyhow::anyhow!("{}: {e}", a.public_key.display())))?;
    let allow = ItemSet::read(&a.allow, Format::guess(&a.allow, a.no_header), &a.key)?;
    let policy = match &a.client_column {
        Some(column) => AllowList::per_client(
            allow.row_values(column)?.into_iter().map(|(item, client)| (client, allow.item(item))),
        ),
        None => AllowList::new(allow.items()),
    };
    eprintln!(
        "judge: key {} ({}), {} allowed items, public key written to {}",
        authorized::key_fingerprint(key.public()),
        a.secret_key.display(),
        allow.len(),
        a.public_key.display()
    );
    let mut job = Job::judge().with_key_columns(allow.key_columns());
    if let Some(n) = a.max_peer_items {
        job = job.with_max_peer_size(n);
    }
    let config = JudgeConfig::new(a.fraction, a.strict).map_err(|e| Failure::usage(anyhow::Error::new(e)))?;
    let tcp = TcpConfig {
        io_timeout: Some(Duration::from_secs(a.timeout)),
        tls: a.tls.config(&a.listen, true)?,
        ..TcpConfig::default()
    };
    let metrics = a.serve.metrics(&[("role", "judge"), ("protocol", &job.protocol.to_string())], None);
    serve_many(&a.listen, a.serve.config(tcp, &a.admission, a.sessions), a.serve.grace(), metrics, |ch| {
        let input: Input = Input::Judge { key: &key, policy: &policy, config };
        run_observed(ch, &job, Role::Judge, input, observer(Role::Judge))
    })
}
