//! `setwise bench`: both roles in one process over loopback TCP (optionally shaped as a
//! LAN or WAN link) on generated sets; prints one row per size and operation.

use crate::Failure;
use crate::net::loopback;
use crate::params::resolve;
use crate::sets::{input_for, sets, values};
use clap::Args;
use setwise::net::{Channel, NetProfile, Shaped};
use setwise::protocols::authorized::{AllowList, JudgeConfig, JudgeKey};
use setwise::protocols::spec::Takes;
use setwise::protocols::unbalanced::{SenderDb, auto};
use setwise::protocols::{Named, Reveal, human_bytes};
use setwise::session::{Input, Job, run};
use setwise::{Operation, Outcome, Protocol, Report, Role, Security, SumTo};

/// `setwise bench`.
#[derive(Args)]
pub struct BenchArgs {
    /// Protocol to time.
    protocol: Protocol,
    /// Set sizes as powers of two, e.g. 12,16,20 (both parties the same size unless
    /// --receiver-sizes is given).
    #[arg(long, value_delimiter = ',', default_value = "12,16")]
    sizes: Vec<u32>,
    /// Receiver sizes as powers of two, paired with --sizes (for unbalanced runs).
    #[arg(long, value_delimiter = ',')]
    receiver_sizes: Vec<u32>,
    /// Operations to time (default: every operation of the protocol).
    #[arg(long = "ops", value_delimiter = ',')]
    operations: Vec<Operation>,
    /// mqrpmt: the membership test's constructions to time, each in its own row
    /// (e.g. cwprf,poprf; default: the protocol's default).
    #[arg(long, value_delimiter = ',')]
    rpmt: Vec<String>,
    /// mqrpmt: the last move of the membership test, bloom or shuffle (default: each
    /// construction's own, bloom for cwprf, shuffle for poprf).
    #[arg(long)]
    last_move: Option<String>,
    /// Network model: lan (10 Gbit/s, 0.1 ms RTT), wan (50 Mbit/s, 80 ms RTT) or none.
    #[arg(long, default_value = "none")]
    net: String,
    /// Exact set sizes as SENDERxRECEIVER pairs (e.g. 50x100,100x100), instead of --sizes.
    #[arg(long, value_delimiter = ',')]
    pairs: Vec<String>,
    /// Fraction of the smaller set the other party also holds.
    #[arg(long, default_value_t = 0.5)]
    overlap: f64,
    /// Exact number of common items, instead of --overlap.
    #[arg(long)]
    common: Option<usize>,
    /// Unbalanced: `auto` (default), a preset name, or a parameter file.
    #[arg(long)]
    params: Option<std::path::PathBuf>,
    /// Unbalanced: receiver items the parameters must allow.
    #[arg(long, default_value_t = 256)]
    receiver_max: usize,
    /// Partial: fraction of the client's items the judge opens.
    #[arg(long, default_value_t = 0.1)]
    fraction: f64,
    /// Who learns the result: receiver, or both (the reveal step's time is printed).
    #[arg(long, default_value = "receiver")]
    reveal: Reveal,
    /// The adversary to withstand: semi-honest, or malicious (vole, compact).
    #[arg(long, default_value = "semi-honest")]
    security: Security,
    /// sum: who learns the sum, sender or receiver (the reverse sum; its rows are named
    /// `sum … to receiver`).
    #[arg(long, default_value = "sender")]
    sum_to: SumTo,
    /// Also write every run's two reports as JSON lines to this file.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

/// Runs `setwise bench`.
pub fn run_bench(a: BenchArgs) -> Result<(), Failure> {
    let profile = NetProfile::by_name(&a.net)
        .ok_or_else(|| Failure::usage(anyhow::anyhow!("--net must be lan, wan or none, not '{}'", a.net)))?;
    println!("setwise bench {} — {} threads, network {}", a.protocol, rayon::current_num_threads(), a.net);
    // `auto` parameters are chosen for the link the run is shaped as.
    let link = profile.map_or(auto::Link::GIGABIT, auto::Link::from);
    if a.protocol.operations().contains(&Operation::Authorize) {
        let (hash, pairing) = unit_costs();
        println!("one thread: hash to G1 {hash:.3} ms, pairing (prepared G2) {pairing:.3} ms");
        println!(
            "{:<10} {:<4} {:<6} {:>9} {:>10} {:>9} {:>9} {:>10} {:>10} {:>7}",
            "protocol", "n", "m", "judge s", "client s", "auth KB", "server s", "client s", "inter. KB", "found"
        );
        for (_, m, n) in workloads(&a)? {
            println!("{}", authorized_row(a.protocol, m, n, a.fraction)?);
            println!(
                "{:>35} server floor m·(hash + pairing)/2 cores = {:.3} s",
                "",
                m as f64 * (hash + pairing) / 2.0 / 1e3
            );
        }
        return Ok(());
    }
    println!(
        "{:<14} {:<25} {:>10} {:>10} {:>12} {:>12} {:>10}",
        "sizes (S×R)", "operation", "sender s", "receiver s", "S→R MB", "R→S MB", "result"
    );
    let mut json = String::new();
    for (label, s_n, r_n) in workloads(&a)? {
        let overlap = a.common.map_or(a.overlap, |c| c as f64 / s_n.min(r_n).max(1) as f64);
        let (x, y) = sets(s_n, r_n, overlap);
        let db = match a.protocol.spec().takes(Operation::Intersection, Role::Sender) {
            Takes::Database => {
                let spec = a.params.as_ref().map_or("auto".to_string(), |p| p.display().to_string());
                let (name, params) = resolve(&spec, s_n, a.receiver_max.max(r_n), 0, link)?;
                let mut db = SenderDb::build(&x.items(), params, &name)?;
                db.prepare()?;
                println!(
                    "  database {label}: preset {name}, built in {:.2} s, {} bundles, plaintexts {}",
                    db.info().build_ms as f64 / 1e3,
                    db.info().bundles,
                    human_bytes(db.info().plaintext_bytes as u64)
                );
                Some(db)
            }
            _ => None,
        };
        let ops = if a.operations.is_empty() { a.protocol.operations() } else { &a.operations[..] };
        let jobs = ops.iter().filter(|&&op| op != Operation::Authorize).map(|&op| jobs(&a, op));
        for (name, job) in jobs.collect::<setwise::Result<Vec<_>>>()?.into_iter().flatten() {
            job.validate(Role::Sender)?;
            let (s, r) = run_once(&job, &x.items(), &y.items(), db.as_ref(), profile)?;
            println!(
                "{:<14} {:<25} {:>10.3} {:>10.3} {:>12.3} {:>12.3} {:>10}",
                label,
                name,
                s.total_ms / 1e3,
                r.total_ms / 1e3,
                s.traffic.bytes_sent as f64 / 1e6,
                r.traffic.bytes_sent as f64 / 1e6,
                r.results.get("intersection_size").or(r.results.get("union_size")).copied().unwrap_or(0)
            );
            for (k, v) in &r.details {
                println!("    {k}: {v}");
            }
            if let Some(kib) = peak_rss_kib() {
                println!(
                    "    peak memory of this process so far (both parties and the generated sets): {:.2} GiB",
                    kib as f64 / (1u64 << 20) as f64
                );
            }
            let phase = |r: &Report, name: &str| r.phases.iter().find(|p| p.name == name).map(|p| p.wall_ms / 1e3);
            if let (Some(told), Some(learned)) = (phase(&r, "reveal to the sender"), phase(&s, "learn the result")) {
                println!(
                    "    reveal both: receiver {told:.3} s to tell, sender {learned:.3} s from its last message to the result"
                );
            }
            json.push_str(&serde_json::json!({"sender": s, "receiver": r, "net": a.net}).to_string());
            json.push('\n');
        }
    }
    if let Some(p) = &a.json {
        std::fs::write(p, json).map_err(|e| Failure::usage(anyhow::anyhow!("{}: {e}", p.display())))?;
    }
    Ok(())
}

/// The jobs timed for `op`, each with its row's name: one per `--rpmt` construction
/// (named with its last move), else one.
fn jobs(a: &BenchArgs, op: Operation) -> setwise::Result<Vec<(String, Job)>> {
    let mut job = Job::new(a.protocol, op).with_reveal(a.reveal).with_security(a.security);
    // Only the sum has a recipient to choose; the other operations keep the default.
    if op == Operation::Sum {
        job = job.with_sum_to(a.sum_to);
    }
    let to = if job.sum_to == SumTo::Receiver { " to receiver" } else { "" };
    let rpmt: Vec<Option<&str>> = match a.rpmt.is_empty() {
        true => vec![None],
        false => a.rpmt.iter().map(|c| Some(c.as_str())).collect(),
    };
    rpmt.into_iter()
        .map(|c| {
            let job =
                job.clone().with_options(&Named::none().with("rpmt", c).with("last_move", a.last_move.as_deref()))?;
            let name = match (job.params.label(), a.security) {
                (Some(label), _) => format!("{op} {label}{to}"),
                (None, Security::SemiHonest) => format!("{op}{to}"),
                (None, Security::Malicious) => format!("{op} (malicious){to}"),
            };
            Ok((name, job))
        })
        .collect()
}

/// (label, sender size, receiver size) of each row.
fn workloads(a: &BenchArgs) -> Result<Vec<(String, usize, usize)>, Failure> {
    if !a.pairs.is_empty() {
        return a
            .pairs
            .iter()
            .map(|p| {
                let parsed = p.split_once('x').and_then(|(s, r)| Some((s.parse().ok()?, r.parse().ok()?)));
                let (s, r): (usize, usize) =
                    parsed.ok_or_else(|| Failure::usage(anyhow::anyhow!("--pairs: '{p}' is not SENDERxRECEIVER")))?;
                Ok((format!("{s}×{r}"), s, r))
            })
            .collect();
    }
    Ok(a.sizes
        .iter()
        .enumerate()
        .map(|(i, &log_s)| {
            let log_r = a.receiver_sizes.get(i).copied().unwrap_or(log_s);
            (format!("2^{log_s}×2^{log_r}"), 1usize << log_s, 1usize << log_r)
        })
        .collect())
}

fn run_once(
    job: &Job,
    x: &[&[u8]],
    y: &[&[u8]],
    db: Option<&SenderDb>,
    profile: Option<NetProfile>,
) -> Result<(Report, Report), Failure> {
    let (a, b) = loopback()?;
    let (mut a, mut b): (Box<dyn Channel>, Box<dyn Channel>) = match profile {
        Some(p) => (Box::new(Shaped::new(a, p)), Box::new(Shaped::new(b, p))),
        None => (Box::new(a), Box::new(b)),
    };
    let vals = values(x);
    let (s, r) = std::thread::scope(|sc| {
        let t = sc.spawn(|| {
            let r = run(&mut a, job, Role::Sender, input_for(job, Role::Sender, x, &vals, db));
            drop(a); // a failed side hangs up so the other cannot wait forever
            r
        });
        let r = run(&mut b, job, Role::Receiver, input_for(job, Role::Receiver, y, &[], None));
        drop(b);
        (t.join().expect("sender thread"), r)
    });
    Ok((s?.1, r?.1))
}

/// One row of `setwise bench authorized|partial`: authorise `n` client items (all
/// allowed), then intersect with `m` server items (half common), over loopback TCP.
fn authorized_row(protocol: Protocol, m: usize, n: usize, fraction: f64) -> Result<String, Failure> {
    let (y, x) = sets(m, n, 0.5);
    let key = JudgeKey::generate();
    let policy = AllowList::new(x.items());
    let config = JudgeConfig { fraction, strict: false };
    let client = "bench-client";
    let judge_job = Job::new(protocol, Operation::Authorize);
    let client_job = judge_job.clone().with_options(&Named::none().with("client_id", Some(client)))?;
    let (mut a, mut b) = loopback()?;
    let (judged, authorized) = std::thread::scope(|s| {
        let judge = s.spawn(|| {
            let input: Input = Input::Judge { key: &key, policy: &policy, config };
            run(&mut a, &judge_job, Role::Judge, input)
        });
        let r = run(&mut b, &client_job, Role::Receiver, Input::Items(&x.items()));
        (judge.join().expect("judge thread"), r)
    });
    let (judge_rep, (outcome, auth_rep)) = (judged?.1, authorized?);
    let Outcome::Credentials { credentials, .. } = outcome else {
        unreachable!("an authorisation ends with credentials")
    };
    let job = Job::authorized(protocol, client.as_bytes(), *key.public());
    let (mut a, mut b) = loopback()?;
    let (server, client) = std::thread::scope(|s| {
        let server = s.spawn(|| run(&mut a, &job, Role::Sender, Input::Items(&y.items())));
        let input = Input::Credentials { items: &x.items(), credentials: &credentials };
        let r = run(&mut b, &job, Role::Receiver, input);
        (server.join().expect("server thread"), r)
    });
    let (server, (outcome, client)) = (server?.1, client?);
    let found = match outcome {
        Outcome::Intersection(v) => v.len(),
        _ => 0,
    };
    let kb = |b: u64| b as f64 / 1e3;
    Ok(format!(
        "{:<10} 2^{:<2} 2^{:<4} {:>9.3} {:>10.3} {:>9.1} {:>9.3} {:>10.3} {:>10.1} {:>7}",
        protocol.name(),
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

/// Single-thread cost of one hash to G1 and one pairing with a prepared G2 element, in ms.
fn unit_costs() -> (f64, f64) {
    use setwise::crypto::bls12_381::{G2Prepared, g2_generator, hash_to_g1, pair, to_affine};
    use setwise::crypto::dst::Domain;
    let d = Domain::fixed("setwise/bench/v1/unit-costs");
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

/// The process's peak resident memory (Linux `VmHWM`), if the platform tells.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
