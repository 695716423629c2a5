//! `setwise demo`: both roles over loopback TCP on generated data.

use crate::Failure;
use clap::Args;
use setwise::io::ItemSet;
use setwise::net::{TcpChannel, TcpConfig};
use setwise::protocols::mqrpmt::{self, Values};
use setwise::protocols::unbalanced::{self, SenderDb};
use setwise::session::{self, human_bytes};
use setwise::{Job, Operation, Outcome, Protocol, Role};
use std::collections::{HashMap, HashSet};
use std::net::TcpListener;

/// `setwise demo`.
#[derive(Args)]
pub struct DemoArgs {
    /// Protocol to run.
    #[arg(long, default_value = "ecdh")]
    protocol: Protocol,
    /// Operation to run.
    #[arg(long = "op", default_value = "intersection")]
    operation: Operation,
    /// mqrpmt: the last move of the membership test, bloom or shuffle.
    #[arg(long, default_value = "bloom")]
    last_move: mqrpmt::LastMove,
    /// Items per party.
    #[arg(long, default_value_t = 10_000)]
    size: usize,
    /// Items of the sender, if different from --size (e.g. unbalanced: 65536).
    #[arg(long)]
    sender_size: Option<usize>,
    /// Fraction of the smaller set that the other party also holds.
    #[arg(long, default_value_t = 0.25)]
    overlap: f64,
}

/// Generated e-mail-like addresses: the sender's `sender_size` and the receiver's
/// `receiver_size`, of which a fraction `overlap` of the smaller set is common.
pub fn sets(sender_size: usize, receiver_size: usize, overlap: f64) -> (ItemSet, ItemSet) {
    let common = ((sender_size.min(receiver_size) as f64) * overlap.clamp(0.0, 1.0)).round() as usize;
    let mut salt = [0u8; 4];
    setwise::rng::fill_os(&mut salt);
    let tag = u32::from_le_bytes(salt) % 100_000;
    let sender = (0..sender_size).map(|i| format!("user{i:07}.{tag}@example.org"));
    let receiver = (0..receiver_size).map(|i| {
        if i < common { format!("user{i:07}.{tag}@example.org") } else { format!("member{i:07}.{tag}@example.net") }
    });
    (ItemSet::from_keys(sender), ItemSet::from_keys(receiver))
}

/// Bound of the generated values of `sum`: amounts in cents up to 1000.00.
pub const DEMO_VALUE_BOUND: u64 = 100_000;

/// A generated value per item for `sum` (think: purchase amounts in cents), derived
/// from the item so a check can recompute it.
pub fn demo_values(items: &[Vec<u8>]) -> Vec<u64> {
    items
        .iter()
        .map(|i| {
            u64::from_le_bytes(blake3::hash(i).as_bytes()[..8].try_into().expect("8 bytes")) % (DEMO_VALUE_BOUND + 1)
        })
        .collect()
}

/// Runs one role in-process: the unbalanced sender serves `db`, every other role runs
/// on its items.
pub fn run_role<C: setwise::net::Channel>(
    ch: &mut C,
    job: &Job,
    role: Role,
    items: &[Vec<u8>],
    db: Option<&SenderDb>,
) -> setwise::Result<(Outcome, setwise::Report)> {
    match (job.protocol, role, db) {
        (Protocol::Unbalanced, Role::Sender, Some(db)) => {
            session::run_with(ch, job, role, db.info().sender_size, None, |ch, s, r| {
                unbalanced::sender(ch, s, db, r).map(|()| Outcome::Nothing)
            })
        }
        (Protocol::Unbalanced, Role::Receiver, _) => {
            session::run_with(ch, job, role, items.len(), None, |ch, s, r| unbalanced::receiver(ch, s, items, None, r))
        }
        (Protocol::Mqrpmt, Role::Sender, _) if job.operation == Operation::Sum => {
            let values = demo_values(items);
            let v = Values { values: &values, bound: DEMO_VALUE_BOUND };
            session::run_with(ch, job, role, items.len(), None, |ch, s, r| {
                mqrpmt::sender(ch, s, job.operation, items, Some(v), job.last_move, r)
            })
        }
        _ => session::run(ch, job, role, items, None),
    }
}

/// Runs `setwise demo`.
pub fn run(a: DemoArgs) -> Result<(), Failure> {
    let job = Job { last_move: a.last_move, ..Job::new(a.protocol, a.operation) };
    job.validate()?;
    let (x, y) = sets(a.sender_size.unwrap_or(a.size), a.size, a.overlap);
    let db = match a.protocol {
        Protocol::Unbalanced => {
            let (name, params) = crate::db::resolve_params("auto", x.items().len(), y.items().len().max(256), 0)?;
            let db = SenderDb::build(x.items(), params, &name)
                .and_then(|mut db| db.prepare().map(|()| db))
                .map_err(Failure::usage)?;
            println!(
                "sender database: {} items, preset {name}, built in {:.2} s",
                x.items().len(),
                db.info().build_ms as f64 / 1e3
            );
            Some(db)
        }
        _ => None,
    };
    let listener = TcpListener::bind("127.0.0.1:0").map_err(Failure::usage)?;
    let addr = listener.local_addr().map_err(Failure::usage)?.to_string();
    println!(
        "setwise demo: {} {} between two parties over loopback TCP ({addr}), sender {} items, receiver {} items",
        a.protocol,
        a.operation,
        x.items().len(),
        y.items().len()
    );
    let (sender, receiver) = std::thread::scope(|s| {
        let sender = s.spawn(|| {
            let mut ch = TcpChannel::accept(&listener, TcpConfig::default())
                .map_err(|e| setwise::Error::Net { phase: "accepting", source: e })?;
            run_role(&mut ch, &job, Role::Sender, x.items(), db.as_ref())
        });
        let receiver = TcpChannel::connect(&addr, TcpConfig::default())
            .map_err(|e| setwise::Error::Net { phase: "connecting", source: e })
            .and_then(|mut ch| run_role(&mut ch, &job, Role::Receiver, y.items(), None));
        (sender.join().expect("sender thread"), receiver)
    });
    let ((s_out, s_rep), (r_out, r_rep)) = (sender?, receiver?);
    for (who, rep) in [("sender", &s_rep), ("receiver", &r_rep)] {
        println!(
            "  {who:<8} {:>8.3} s   sent {:>10}   received {:>10}",
            rep.total_ms / 1e3,
            human_bytes(rep.traffic.bytes_sent),
            human_bytes(rep.traffic.bytes_received)
        );
    }
    let (what, got, plain) = compare(x.items(), y.items(), s_out, r_out)?;
    println!("  {what}: {got} (plain computation: {plain}) {}", if got == plain { "✓" } else { "✗ MISMATCH" });
    if got != plain {
        return Err(Failure::usage(anyhow::anyhow!("the protocol's result differs from the plain computation")));
    }
    Ok(())
}

/// What is compared, what the protocol gave and what the plain set computation gives.
fn compare(
    x: &[Vec<u8>],
    y: &[Vec<u8>],
    s_out: Outcome,
    r_out: Outcome,
) -> Result<(&'static str, String, String), Failure> {
    let xs: HashSet<&Vec<u8>> = x.iter().collect();
    let common = y.iter().filter(|i| xs.contains(i)).count();
    let union = x.len() + y.len() - common;
    Ok(match (s_out, r_out) {
        (_, Outcome::Intersection(v)) => ("intersection size", v.len().to_string(), common.to_string()),
        (Outcome::CardinalitySum { cardinality, sum }, Outcome::Cardinality(c)) => {
            let ys: HashSet<&Vec<u8>> = y.iter().collect();
            let values = demo_values(x);
            let plain: u128 = x.iter().zip(&values).filter(|(i, _)| ys.contains(i)).map(|(_, &v)| u128::from(v)).sum();
            (
                "sizes (sender/receiver) and sum",
                format!("{cardinality}/{c}, {sum}"),
                format!("{common}/{common}, {plain}"),
            )
        }
        (_, Outcome::Cardinality(c)) => ("intersection size", c.to_string(), common.to_string()),
        (_, Outcome::Union(extra)) => {
            let got: HashSet<&Vec<u8>> = y.iter().chain(&extra).collect();
            let ok = extra.iter().all(|e| xs.contains(e));
            ("union size", format!("{}{}", got.len(), if ok { "" } else { " (foreign items)" }), union.to_string())
        }
        (Outcome::Shares(s), Outcome::Shares(r)) => {
            let items: HashSet<Vec<u8>> = (0..s.rows()).filter_map(|i| s.recombine(&r, i).ok().flatten()).collect();
            let ok = items.iter().all(|i| xs.contains(i) && y.contains(i));
            let tag = if ok { "" } else { " (wrong ones)" };
            ("items the shares recombine to", format!("{}{tag}", items.len()), common.to_string())
        }
        (Outcome::PrivateIds { own: sx, union: su }, Outcome::PrivateIds { own: ry, union: ru }) => {
            let ids: HashMap<&Vec<u8>, [u8; 32]> = x.iter().zip(sx).collect();
            let agree = y.iter().zip(&ry).filter(|(i, _)| xs.contains(i)).all(|(i, id)| ids[i] == *id);
            let same = if su == ru && agree { "" } else { " (parties disagree)" };
            ("IDs in the union", format!("{}{same}", su.len()), union.to_string())
        }
        (s, r) => return Err(Failure::usage(anyhow::anyhow!("unexpected outcomes {s:?} / {r:?}"))),
    })
}
