//! `setwise judge` and `setwise authorize`: the judge of authorised PSI and the client
//! asking it to sign its items.

use crate::Failure;
use crate::role::{InputArgs, read_items, serve_many};
use clap::Args;
use setwise::Protocol;
use setwise::io::{Format, ItemSet};
use setwise::net::{TcpChannel, TcpConfig};
use setwise::pairing::G2Affine;
use setwise::protocols::Outcome;
use setwise::protocols::authorized::{self, AllowList, Credentials, JudgeConfig, JudgeKey, Mode};
use setwise::session::{self, Role, human_bytes};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `setwise judge`.
#[derive(Args)]
pub struct JudgeArgs {
    /// Address to listen on for clients.
    #[arg(long)]
    listen: String,
    /// Allow-list of the items the judge authorises (CSV with header, or .txt).
    #[arg(long)]
    allow: PathBuf,
    /// Key columns of the allow-list.
    #[arg(long, value_delimiter = ',')]
    key: Vec<String>,
    /// The allow-list CSV has no header.
    #[arg(long)]
    no_header: bool,
    /// Partial mode: the fraction p of commitments opened (⌈p·n⌉).
    #[arg(long, default_value_t = 0.1)]
    fraction: f64,
    /// Full mode: sign nothing unless every item is allowed (the paper's answer);
    /// default: sign the allowed items and report the refused ones.
    #[arg(long)]
    strict: bool,
    /// Where to write the public key (hex) for clients and servers.
    #[arg(long)]
    public_key: PathBuf,
    /// The secret key file: loaded if present, created (mode 0600) otherwise.
    #[arg(long, default_value = "judge.key")]
    secret_key: PathBuf,
    /// Sessions to serve before exiting (0: until stopped).
    #[arg(long, default_value_t = 0)]
    sessions: usize,
}

/// `setwise authorize`.
#[derive(Args)]
pub struct AuthorizeArgs {
    /// The judge's address.
    #[arg(long)]
    connect: String,
    #[command(flatten)]
    input: InputArgs,
    /// The client identity the signatures are bound to.
    #[arg(long)]
    client_id: String,
    /// Partial-APSI: show the judge only the fraction of items it challenges.
    #[arg(long)]
    partial: bool,
    /// Where to save the credentials.
    #[arg(long)]
    credentials: PathBuf,
    /// Seconds to keep retrying --connect.
    #[arg(long, default_value_t = 30)]
    connect_timeout: u64,
}

/// The authorisation mode of an intersection protocol, if it is one.
pub fn mode_of(p: Protocol) -> Option<Mode> {
    match p {
        Protocol::Authorized => Some(Mode::Full),
        Protocol::Partial => Some(Mode::Partial),
        _ => None,
    }
}

/// The server's judge key and client identity.
pub fn server_identity(key: Option<&Path>, client: Option<&str>) -> Result<(G2Affine, String), Failure> {
    let usage = |m: &str| Failure::usage(anyhow::anyhow!("{m}"));
    let path = key.ok_or_else(|| usage("the authorized/partial sender needs --judge-key FILE"))?;
    let id = client.ok_or_else(|| usage("the authorized/partial sender needs --client-id ID"))?;
    let text = std::fs::read_to_string(path).map_err(|e| usage(&format!("{}: {e}", path.display())))?;
    let pk = authorized::public_key_from_hex(&text).map_err(|e| usage(&format!("{}: {e}", path.display())))?;
    Ok((pk, id.to_string()))
}

/// Loads credentials and checks they are for `mode`.
pub fn load_credentials(path: Option<&Path>, mode: Mode) -> Result<Credentials, Failure> {
    let path = path
        .ok_or_else(|| Failure::usage(anyhow::anyhow!("the authorized/partial receiver needs --credentials FILE")))?;
    let creds = Credentials::load(path).map_err(|e| Failure::usage(anyhow::anyhow!(e)))?;
    if creds.mode != mode {
        return Err(Failure::usage(anyhow::anyhow!(
            "{} holds {:?} credentials; use --protocol {}",
            path.display(),
            creds.mode,
            creds.mode.protocol_name()
        )));
    }
    Ok(creds)
}

/// Runs `setwise judge`.
pub fn run_judge(a: JudgeArgs) -> Result<(), Failure> {
    let key = JudgeKey::load_or_create(&a.secret_key).map_err(|e| Failure::usage(anyhow::anyhow!(e)))?;
    let pk_hex = authorized::public_key_hex(key.public());
    std::fs::write(&a.public_key, format!("{pk_hex}\n"))
        .map_err(|e| Failure::usage(anyhow::anyhow!("{}: {e}", a.public_key.display())))?;
    let allow = ItemSet::read(&a.allow, Format::guess(&a.allow, a.no_header), &a.key)?;
    let policy = AllowList::new(allow.items());
    eprintln!(
        "judge: key {} ({}), {} allowed items, public key written to {}",
        authorized::key_fingerprint(key.public()),
        a.secret_key.display(),
        allow.items().len(),
        a.public_key.display()
    );
    let cfg = JudgeConfig { fraction: a.fraction, strict: a.strict };
    serve_many(&a.listen, TcpConfig::default(), a.sessions, |ch| {
        let mut outcome = None;
        let (_, report) =
            session::run_named(ch, ("judge", "authorize"), String::new(), Role::Judge, 0, None, |ch, s, r| {
                outcome = Some(authorized::judge(ch, s, &key, &policy, &cfg, r)?);
                Ok(Outcome::Nothing)
            })?;
        let o = outcome.expect("judged");
        Ok(format!(
            "client '{}' ({:?}): signed {}, refused {}{} in {:.2} s, sent {}",
            o.client_id,
            o.mode,
            o.signed,
            o.refused,
            if o.mode == Mode::Partial { format!(", opened {}", o.opened) } else { String::new() },
            report.total_ms / 1e3,
            human_bytes(report.traffic.bytes_sent)
        ))
    })
}

/// Runs `setwise authorize`.
pub fn run_authorize(a: AuthorizeArgs) -> Result<(), Failure> {
    let set = read_items(&a.input)?;
    let mode = if a.partial { Mode::Partial } else { Mode::Full };
    let config = TcpConfig { connect_timeout: Duration::from_secs(a.connect_timeout), ..TcpConfig::default() };
    let mut ch = TcpChannel::connect(&a.connect, config)
        .map_err(|e| Failure::from(setwise::Error::Net { phase: "connecting", source: e }))?;
    let mut got = None;
    let (_, report) = session::run_named(
        &mut ch,
        ("judge", "authorize"),
        String::new(),
        Role::Receiver,
        set.items().len(),
        None,
        |ch, _, r| {
            got = Some(authorized::authorize(ch, set.items(), a.client_id.as_bytes(), mode, r)?);
            Ok(Outcome::Nothing)
        },
    )?;
    let (creds, refused) = got.expect("authorized");
    creds.save(&a.credentials).map_err(|e| Failure::usage(anyhow::anyhow!(e)))?;
    eprintln!(
        "authorize: {} of {} items signed for '{}' ({:?}), credentials in {} — {:.2} s, sent {}, received {}",
        creds.entries.len(),
        set.items().len(),
        a.client_id,
        mode,
        a.credentials.display(),
        report.total_ms / 1e3,
        human_bytes(report.traffic.bytes_sent),
        human_bytes(report.traffic.bytes_received)
    );
    for &i in refused.iter().take(10) {
        eprintln!("  refused: {}", String::from_utf8_lossy(&set.items()[i]));
    }
    if refused.len() > 10 {
        eprintln!("  … and {} more refused", refused.len() - 10);
    }
    if creds.entries.is_empty() && !set.items().is_empty() {
        return Err(Failure::from(setwise::Error::PeerMisbehaved("the judge refused every item".into())));
    }
    Ok(())
}

/// One row of `setwise bench authorized|partial`: authorise `n` client items (all
/// allowed), then intersect with `m` server items (half common), over loopback TCP.
pub fn bench_row(mode: Mode, m: usize, n: usize, fraction: f64) -> Result<String, Failure> {
    use setwise::protocols::authorized::intersect::usable;
    let (y, x) = crate::demo::sets(m, n, 0.5);
    let key = JudgeKey::generate();
    let policy = AllowList::new(x.items());
    let cfg = JudgeConfig { fraction, strict: false };
    let (a, b) = loopback()?;
    let (judge_rep, client) = std::thread::scope(|s| {
        let t = s.spawn(move || {
            let mut a = a;
            session::run_named(&mut a, ("judge", "authorize"), String::new(), Role::Judge, 0, None, |ch, sess, r| {
                authorized::judge(ch, sess, &key, &policy, &cfg, r).map(|_| Outcome::Nothing)
            })
        });
        let mut b = b;
        let mut got = None;
        let r =
            session::run_named(&mut b, ("judge", "authorize"), String::new(), Role::Receiver, n, None, |ch, _, r| {
                got = Some(authorized::authorize(ch, x.items(), b"bench-client", mode, r)?);
                Ok(Outcome::Nothing)
            });
        (t.join().expect("judge thread"), r.map(|(_, rep)| (rep, got.expect("authorized").0)))
    });
    let (judge_rep, (auth_rep, creds)) = (judge_rep?.1, client?);
    let params = authorized::intersect_params(&creds.client_id, &creds.judge_pk);
    let use_ = usable(&creds, x.items());
    let (a, b) = loopback()?;
    let (server, client) = std::thread::scope(|s| {
        let (params, creds) = (&params, &creds);
        let t = s.spawn(move || {
            let mut a = a;
            session::run_named(
                &mut a,
                (mode.protocol_name(), "intersection"),
                params.clone(),
                Role::Sender,
                m,
                None,
                |ch, sess, r| {
                    authorized::sender(ch, sess, mode, &creds.judge_pk, &creds.client_id, y.items(), r)
                        .map(|()| Outcome::Nothing)
                },
            )
        });
        let mut b = b;
        let r = session::run_named(
            &mut b,
            (mode.protocol_name(), "intersection"),
            params.clone(),
            Role::Receiver,
            use_.len(),
            None,
            |ch, sess, r| authorized::receiver(ch, sess, creds, &use_, r),
        );
        (t.join().expect("server thread"), r)
    });
    let (server, (outcome, client)) = (server?.1, client?);
    let found = match outcome {
        Outcome::Intersection(v) => v.len(),
        _ => 0,
    };
    let kb = |b: u64| b as f64 / 1e3;
    Ok(format!(
        "{:<9} 2^{:<2} 2^{:<4} {:>9.3} {:>10.3} {:>9.1} {:>9.3} {:>10.3} {:>10.1} {:>7}",
        format!("{mode:?}"),
        n.ilog2(),
        m.ilog2(),
        judge_rep.total_ms / 1e3,
        auth_rep.total_ms / 1e3,
        kb(auth_rep.traffic.bytes_sent + auth_rep.traffic.bytes_received),
        server.total_ms / 1e3,
        client.total_ms / 1e3,
        kb(client.traffic.bytes_sent + client.traffic.bytes_received),
        found
    ))
}

fn loopback() -> Result<(TcpChannel, TcpChannel), Failure> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(Failure::usage)?;
    let addr = listener.local_addr().map_err(Failure::usage)?.to_string();
    let net = |e| Failure::from(setwise::Error::Net { phase: "connecting", source: e });
    let acc = std::thread::spawn(move || TcpChannel::accept(&listener, TcpConfig::default()));
    let b = TcpChannel::connect(&addr, TcpConfig::default()).map_err(net)?;
    let a = acc.join().expect("accept thread").map_err(net)?;
    Ok((a, b))
}

/// Single-thread cost of one hash to G1 and one pairing with a prepared G2 element, in ms.
pub fn unit_costs() -> (f64, f64) {
    use setwise::hash::Domain;
    use setwise::pairing::{G2Prepared, g2_generator, hash_to_g1, pair, to_affine};
    let d = Domain::fixed("bench");
    let t = std::time::Instant::now();
    let pts: Vec<_> = (0..200u32).map(|i| to_affine(&hash_to_g1(&d, &i.to_le_bytes()))).collect();
    let hash = t.elapsed().as_secs_f64() * 1e3 / 200.0;
    let q = G2Prepared::from(g2_generator());
    let t = std::time::Instant::now();
    for p in &pts {
        std::hint::black_box(pair(p, &q));
    }
    (hash, t.elapsed().as_secs_f64() * 1e3 / 200.0)
}
