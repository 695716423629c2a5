//! `setwise demo`: both roles over loopback TCP on generated data, checked item by item
//! against the plain set computation.

use crate::args::OptionArgs;
use crate::net::loopback;
use crate::params::resolve;
use crate::sets::{input_for, sets, values};
use crate::{EXIT_WRONG, Failure};
use clap::Args;
use setwise::protocols::human_bytes;
use setwise::protocols::spec::Takes;
use setwise::protocols::unbalanced::{SenderDb, auto};
use setwise::protocols::{Named, registry};
use setwise::session::{Job, run};
use setwise::{Operation, Outcome, Protocol, Role};
use std::collections::{BTreeSet, HashMap, HashSet};

/// `setwise demo`.
#[derive(Args)]
pub struct DemoArgs {
    /// Protocol to run.
    #[arg(long, default_value = registry::DEFAULT.name)]
    protocol: Protocol,
    /// Operation to run.
    #[arg(long = "op", default_value = "intersection")]
    operation: Operation,
    #[command(flatten)]
    options: OptionArgs,
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

/// Runs `setwise demo`.
pub fn run_demo(a: DemoArgs) -> Result<(), Failure> {
    let spec = a.protocol.spec();
    if spec.takes(a.operation, Role::Receiver) == Takes::Credentials || a.operation == Operation::Authorize {
        return Err(Failure::usage(anyhow::anyhow!(
            "the demo runs two parties; authorised PSI needs a judge too (see `setwise bench {}`)",
            a.protocol
        )));
    }
    let job = Job::new(a.protocol, a.operation).with_options(&a.options.named(Named::none()))?;
    job.validate(Role::Sender)?;
    let (x_set, y_set) = sets(a.sender_size.unwrap_or(a.size), a.size, a.overlap);
    let (x, y) = (x_set.items(), y_set.items());
    let db = match spec.takes(a.operation, Role::Sender) {
        Takes::Database => {
            let (name, params) = resolve("auto", x.len(), y.len().max(256), 0, auto::Link::GIGABIT)?;
            let mut db = SenderDb::build(&x, params, &name)?;
            db.prepare()?;
            println!(
                "sender database: {} items, preset {name}, built in {:.2} s",
                x.len(),
                db.info().build_ms as f64 / 1e3
            );
            Some(db)
        }
        _ => None,
    };
    let (mut a_ch, mut b_ch) = loopback()?;
    println!(
        "setwise demo: {} {} between two parties over loopback TCP, sender {} items, receiver {} items",
        a.protocol,
        a.operation,
        x.len(),
        y.len()
    );
    let vals = values(&x);
    let (sender, receiver) = std::thread::scope(|s| {
        let sender = s.spawn(|| {
            let r = run(&mut a_ch, &job, Role::Sender, input_for(&job, Role::Sender, &x, &vals, db.as_ref()));
            drop(a_ch);
            r
        });
        let receiver = run(&mut b_ch, &job, Role::Receiver, input_for(&job, Role::Receiver, &y, &[], None));
        drop(b_ch);
        (sender.join().expect("sender thread"), receiver)
    });
    let ((s_out, s_rep), (r_out, r_rep)) = (sender?, receiver?);
    if let Some(why) = r_rep.details.get("protocol") {
        println!("  protocol: {why}");
    }
    for (who, rep) in [("sender", &s_rep), ("receiver", &r_rep)] {
        println!(
            "  {who:<8} {:>8.3} s   sent {:>10}   received {:>10}",
            rep.total_ms / 1e3,
            human_bytes(rep.traffic.bytes_sent),
            human_bytes(rep.traffic.bytes_received)
        );
    }
    let check = compare(&x, &y, s_out, r_out);
    println!(
        "  {}: {} (plain computation: {}) {}",
        check.what,
        check.got,
        check.plain,
        if check.equal { "✓" } else { "✗ MISMATCH" }
    );
    if !check.equal {
        return Err(Failure {
            code: EXIT_WRONG,
            error: anyhow::anyhow!("the protocol's result differs from the plain computation: a bug in setwise"),
        });
    }
    Ok(())
}

/// A protocol's result beside the plain computation.
struct Check {
    what: &'static str,
    got: String,
    plain: String,
    /// The outputs are equal item by item (not only in number).
    equal: bool,
}

fn check(what: &'static str, got: &BTreeSet<&[u8]>, plain: &BTreeSet<&[u8]>, extra: bool) -> Check {
    Check {
        what,
        got: format!("{} items", got.len()),
        plain: format!("{} items", plain.len()),
        equal: extra && got == plain,
    }
}

/// Compares the two roles' outcomes with the plain set computation on `x` (sender) and
/// `y` (receiver).
fn compare(x: &[&[u8]], y: &[&[u8]], s_out: Outcome, r_out: Outcome) -> Check {
    let xs: HashSet<&[u8]> = x.iter().copied().collect();
    let ys: HashSet<&[u8]> = y.iter().copied().collect();
    let common: BTreeSet<&[u8]> = y.iter().copied().filter(|i| xs.contains(i)).collect();
    let union: BTreeSet<&[u8]> = x.iter().chain(y).copied().collect();
    let rows = |idx: &[usize]| -> (BTreeSet<&[u8]>, bool) {
        let set: BTreeSet<&[u8]> = idx.iter().filter_map(|&i| y.get(i).copied()).collect();
        (set, idx.iter().all(|&i| i < y.len()))
    };
    match (s_out, r_out) {
        (_, Outcome::Intersection(v)) => {
            let (got, ok) = rows(&v);
            check("intersection", &got, &common, ok && got.len() == v.len())
        }
        (_, Outcome::Labelled { rows: r, .. }) => {
            let idx: Vec<usize> = r.iter().map(|(i, _)| *i).collect();
            let (got, ok) = rows(&idx);
            check("intersection", &got, &common, ok && got.len() == idx.len())
        }
        (Outcome::CardinalitySum { cardinality, sum }, Outcome::Cardinality(c)) => {
            let plain: u128 =
                x.iter().zip(values(x)).filter(|(i, _)| ys.contains(*i)).map(|(_, v)| u128::from(v)).sum();
            let n = common.len() as u64;
            Check {
                what: "sizes (sender/receiver) and sum",
                got: format!("{cardinality}/{c}, {sum}"),
                plain: format!("{n}/{n}, {plain}"),
                equal: cardinality == n && c == n && sum == plain,
            }
        }
        (_, Outcome::Cardinality(c)) => Check {
            what: "intersection size",
            got: c.to_string(),
            plain: common.len().to_string(),
            equal: c == common.len() as u64,
        },
        (_, Outcome::Union(extra)) => {
            let mut got: BTreeSet<&[u8]> = y.iter().copied().collect();
            let distinct = extra.iter().all(|e| got.insert(e));
            check("union", &got, &union, distinct)
        }
        (Outcome::Shares(s), Outcome::Shares(r)) => {
            let joined: Result<Vec<Option<Vec<u8>>>, _> = (0..s.rows()).map(|i| s.recombine(&r, i)).collect();
            let items: Vec<Vec<u8>> = joined.iter().flatten().flatten().cloned().collect();
            let got: BTreeSet<&[u8]> = items.iter().map(Vec::as_slice).collect();
            let ok = joined.is_ok() && got.len() == items.len() && s.rows() == x.len();
            check("items the shares recombine to", &got, &common, ok)
        }
        (Outcome::PrivateIds { own: sx, union: su }, Outcome::PrivateIds { own: ry, union: ru }) => {
            // Equal items get equal IDs, distinct items distinct IDs, and both parties hold the
            // union's IDs: then the IDs stand for the union item by item.
            let mut by_item: HashMap<&[u8], [u8; 32]> = x.iter().copied().zip(sx).collect();
            let agree = y.iter().zip(&ry).all(|(i, id)| *by_item.entry(i).or_insert(*id) == *id);
            let ids: BTreeSet<[u8; 32]> = by_item.values().copied().collect();
            let want: BTreeSet<[u8; 32]> = su.iter().copied().collect();
            Check {
                what: "IDs in the union",
                got: su.len().to_string(),
                plain: union.len().to_string(),
                equal: agree && su == ru && ids.len() == union.len() && ids == want,
            }
        }
        (s, r) => Check {
            what: "outcomes",
            got: format!("{s:?} / {r:?}"),
            plain: "the operation's outcome".into(),
            equal: false,
        },
    }
}
