//! Writing what a role learned: matching rows, the union's keys, share files, ID files.

use crate::Failure;
use clap::Args;
use setwise::io::{ItemSet, hex, split_key};
use setwise::protocols::mqrpmt::Shares;
use setwise::protocols::unbalanced;
use setwise::{Outcome, Role};
use std::io::Write;
use std::path::PathBuf;

/// Where a role writes what it learned.
#[derive(Args)]
pub struct OutputArgs {
    /// Write the output here: the receiver's rows in the intersection (header kept); the
    /// union's keys; this party's share file (shares); this party's rows with a
    /// `private_id` column (private-id).
    #[arg(long, conflicts_with = "stdout")]
    output: Option<PathBuf>,
    /// Write the output to standard output instead.
    #[arg(long)]
    stdout: bool,
    /// private-id: write the IDs of the union, one per line, here.
    #[arg(long)]
    union_ids: Option<PathBuf>,
}

/// An open destination and how the summary names it.
type Sink = (Box<dyn Write>, String);

impl OutputArgs {
    /// The destination, if any, and its description for the summary.
    fn sink(&self) -> Result<Option<Sink>, Failure> {
        Ok(match (&self.output, self.stdout) {
            (Some(p), _) => {
                Some((Box::new(std::io::BufWriter::new(create(p)?)), format!("written to {}", p.display())))
            }
            (None, true) => Some((Box::new(std::io::stdout().lock()), "written to standard output".into())),
            (None, false) => None,
        })
    }
}

fn create(p: &std::path::Path) -> Result<std::fs::File, Failure> {
    std::fs::File::create(p).map_err(|e| Failure::usage(anyhow::anyhow!("{}: {e}", p.display())))
}

fn io(e: impl std::fmt::Display) -> Failure {
    Failure::usage(anyhow::anyhow!("writing the output: {e}"))
}

const NO_DEST: &str = "(use --output FILE or --stdout to write it)";

/// Writes `outcome` as `out` asks; returns the line that summarises it.
pub fn write_outcome(set: &ItemSet, outcome: Outcome, out: &OutputArgs, role: Role) -> Result<String, Failure> {
    Ok(match outcome {
        Outcome::Nothing => "done, learned nothing".into(),
        Outcome::Cardinality(c) => {
            println!("{c}");
            format!("intersection size {c}")
        }
        Outcome::CardinalitySum { cardinality, sum } => {
            println!("{}", serde_json::json!({ "cardinality": cardinality, "sum": sum.to_string() }));
            format!("intersection size {cardinality}, sum of our values over it {sum}")
        }
        Outcome::Intersection(matched) => match out.sink()? {
            Some((w, dest)) => {
                let rows = set.write_rows(&matched, w)?;
                format!("intersection size {}, {rows} rows {dest}", matched.len())
            }
            None => format!("intersection size {} {NO_DEST}", matched.len()),
        },
        Outcome::Labelled { columns, rows } => {
            let decoded: Vec<(usize, Vec<String>)> = rows
                .iter()
                .map(|(i, bytes)| {
                    let fields = unbalanced::decode_label(bytes, columns.len());
                    (*i, fields.unwrap_or_else(|| vec![String::new(); columns.len()]))
                })
                .collect();
            let written = match out.sink()? {
                Some((w, _)) => set.write_rows_with(&decoded, &columns, w)?,
                None => 0,
            };
            format!("{} matches with labels ({}), {written} rows written", rows.len(), columns.join(","))
        }
        Outcome::Union(extra) => {
            if extra.iter().any(|e| split_key(e, set.key_columns()).is_none()) {
                return Err(setwise::Error::PeerMisbehaved("a union item is not a joined key".into()).into());
            }
            let total = set.items().len() + extra.len();
            match out.sink()? {
                Some((w, dest)) => {
                    write_union(set, &extra, w)?;
                    format!(
                        "union of {total} items ({} ours, {} only the peer's), {dest}",
                        set.items().len(),
                        extra.len()
                    )
                }
                None => format!("union of {total} items {NO_DEST}"),
            }
        }
        Outcome::Shares(shares) => {
            let members = shares.members.iter().filter(|&&m| m).count();
            let what = if shares.members.is_empty() {
                format!("{} share rows", shares.rows())
            } else {
                format!("{} share rows, intersection size {members}", shares.rows())
            };
            match out.sink()? {
                Some((w, dest)) => {
                    write_shares(set, &shares, role, w)?;
                    format!("{what}, {dest}")
                }
                None => format!("{what} {NO_DEST}"),
            }
        }
        Outcome::PrivateIds { own, union } => {
            let mut what = format!("IDs for our {} items, {} IDs in the union", own.len(), union.len());
            if let Some((w, dest)) = out.sink()? {
                let ids: Vec<(usize, Vec<String>)> = own.iter().enumerate().map(|(i, id)| (i, vec![hex(id)])).collect();
                set.write_rows_with(&ids, &["private_id".to_string()], w)?;
                what += &format!("; rows with IDs {dest}");
            }
            if let Some(p) = &out.union_ids {
                let mut w = std::io::BufWriter::new(create(p)?);
                writeln!(w, "private_id").map_err(io)?;
                for id in &union {
                    writeln!(w, "{}", hex(id)).map_err(io)?;
                }
                w.flush().map_err(io)?;
                what += &format!("; union IDs written to {}", p.display());
            }
            what
        }
        other => format!("{other:?}"),
    })
}

/// The union's keys, one row each: ours, then the peer's that we lack.
fn write_union(set: &ItemSet, extra: &[Vec<u8>], out: impl Write) -> Result<(), Failure> {
    let mut w = csv::WriterBuilder::new().flexible(true).from_writer(out);
    w.write_record(set.key_names()).map_err(io)?;
    for item in set.items().iter().chain(extra) {
        let fields = split_key(item, set.key_columns())
            .ok_or_else(|| Failure::from(setwise::Error::PeerMisbehaved("a union item is not a joined key".into())))?;
        w.write_record(&fields).map_err(io)?;
    }
    w.flush().map_err(io)
}

/// A share file: `row,member,share` for the receiver (it knows which rows are members),
/// `row,share` and the row's own key for the sender; shares in hex.
fn write_shares(set: &ItemSet, shares: &Shares, role: Role, out: impl Write) -> Result<(), Failure> {
    let mut w = csv::Writer::from_writer(out);
    let mut header = vec!["row".to_string()];
    if role == Role::Receiver {
        header.push("member".into());
    }
    header.push("share".into());
    if role == Role::Sender {
        header.extend(set.key_names());
    }
    w.write_record(&header).map_err(io)?;
    for i in 0..shares.rows() {
        let mut rec = vec![i.to_string()];
        if role == Role::Receiver {
            rec.push(u8::from(shares.members[i]).to_string());
        }
        rec.push(hex(shares.share(i)));
        if role == Role::Sender {
            rec.extend(split_key(&set.items()[shares.items[i]], set.key_columns()).unwrap_or_default());
        }
        w.write_record(&rec).map_err(io)?;
    }
    w.flush().map_err(io)
}
