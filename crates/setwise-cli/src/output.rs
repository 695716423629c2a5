//! Writing what a role learned: matching rows, the union's keys, share files, ID files.

use crate::Failure;
use clap::Args;
use setwise::error::Deviation;
use setwise::io::{AtomicFile, Format, ItemSet, hex, split_key};
use setwise::protocols::mqrpmt::Shares;
use setwise::protocols::unbalanced;
use setwise::{Operation, Outcome, Role};
use std::io::Write;
use std::path::{Path, PathBuf};

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
    /// Layout of the rows written: csv, parquet, arrow (an Arrow IPC file) or arrows (an
    /// Arrow IPC stream). Default: from --output's extension (.csv, .parquet, .arrow,
    /// .arrows), else the input's own (CSV on standard output for a Parquet or Arrow
    /// input). Rows of a Parquet or Arrow input keep their columns' types.
    #[arg(long, value_name = "FORMAT", value_parser = ["csv", "parquet", "arrow", "arrows"])]
    output_format: Option<String>,
    /// private-id: write the IDs of the union, one per line, here.
    #[arg(long)]
    union_ids: Option<PathBuf>,
    /// Permissions of the files written (--output, --union-ids), in octal. They hold
    /// what the protocol protects, so by default only their owner may read them.
    #[arg(long, value_name = "MODE", default_value = "0600", value_parser = octal_mode)]
    output_mode: u32,
}

/// File permissions in octal (`0600`, `640`, `0o644`), at most `0777`.
fn octal_mode(s: &str) -> Result<u32, String> {
    let digits = s.strip_prefix("0o").unwrap_or(s);
    u32::from_str_radix(digits, 8)
        .ok()
        .filter(|m| *m <= 0o777 && !digits.is_empty())
        .ok_or_else(|| "give permissions in octal, such as 0600 or 0640".to_string())
}

impl OutputArgs {
    /// Whether any output destination was given.
    pub fn any(&self) -> bool {
        self.output.is_some() || self.stdout || self.union_ids.is_some()
    }

    /// Writes through `f` to the destination, if one was given: a file appears only once
    /// it is complete ([`AtomicFile`]). Returns `f`'s value and how the summary names the
    /// destination.
    fn emit<T>(
        &self,
        f: impl FnOnce(&mut (dyn Write + Send)) -> Result<T, Failure>,
    ) -> Result<Option<(T, String)>, Failure> {
        match (&self.output, self.stdout) {
            (Some(p), _) => Ok(Some((to_file(p, self.output_mode, f)?, format!("written to {}", p.display())))),
            (None, true) => {
                let mut out = std::io::stdout();
                let v = f(&mut out)?;
                out.flush().map_err(io)?;
                Ok(Some((v, "written to standard output".into())))
            }
            (None, false) => Ok(None),
        }
    }
}

impl OutputArgs {
    /// The layout `--output-format` or `--output`'s extension names, if either does.
    fn named_format(&self) -> Option<Format> {
        let named = self.output_format.as_deref().and_then(|f| Format::by_name(f, false));
        named.or_else(|| self.output.as_deref().and_then(Format::by_extension))
    }

    /// The layout of the rows written from `set` (see `--output-format`).
    fn rows_format(&self, set: &ItemSet) -> Format {
        match self.named_format() {
            Some(f) => f,
            None if self.output.is_none() && set.format().is_columnar() => Format::Csv { header: true },
            None => set.format(),
        }
    }

    /// Checks before the run that what `operation` writes of `set` can be written as
    /// asked: rows in their layout, a union's keys and share files as CSV.
    pub fn check(&self, set: &ItemSet, operation: Operation) -> Result<(), Failure> {
        match operation {
            Operation::Union => self.csv_only("the union's keys"),
            Operation::Shares => self.csv_only("a share file"),
            // The operations that write rows.
            Operation::Intersection | Operation::PrivateId if self.output.is_some() || self.stdout => {
                Ok(set.check_output(self.rows_format(set))?)
            }
            _ => Ok(()),
        }
    }

    /// Refuses a Parquet or Arrow layout for `what`, which is written as CSV.
    fn csv_only(&self, what: &str) -> Result<(), Failure> {
        match self.named_format() {
            Some(f) if f.is_columnar() => Err(Failure::usage(anyhow::anyhow!(
                "{what} is written as CSV; give --output a .csv name (Parquet and Arrow are for rows)"
            ))),
            _ => Ok(()),
        }
    }
}

/// Writes `path` through `f`, atomically, with the permissions `mode`.
fn to_file<T>(
    path: &Path,
    mode: u32,
    f: impl FnOnce(&mut (dyn Write + Send)) -> Result<T, Failure>,
) -> Result<T, Failure> {
    let mut file =
        AtomicFile::with_mode(path, mode).map_err(|e| Failure::usage(anyhow::anyhow!("{}: {e}", path.display())))?;
    let v = f(&mut file)?;
    file.commit().map_err(|e| Failure::usage(anyhow::anyhow!("{}: {e}", path.display())))?;
    Ok(v)
}

fn io(e: impl std::fmt::Display) -> Failure {
    Failure::usage(anyhow::anyhow!("writing the output: {e}"))
}

const NO_DEST: &str = "(use --output FILE or --stdout to write it)";

/// The line that summarises an outcome that needs no rows of the input (nothing learned,
/// a count, a sum, an intersection with no --output or --stdout), after printing what it
/// prints; `None` for one that needs them.
pub fn outcome_without_rows(outcome: &Outcome, out: &OutputArgs, role: Role) -> Option<String> {
    Some(match outcome {
        Outcome::Nothing => "done, learned nothing".into(),
        Outcome::Cardinality(c) => {
            println!("{c}");
            format!("intersection size {c}")
        }
        Outcome::CardinalitySum { cardinality, sum } => {
            println!("{}", serde_json::json!({ "cardinality": cardinality, "sum": sum.to_string() }));
            let whose = if role == Role::Sender { "our" } else { "the sender's" };
            format!("intersection size {cardinality}, sum of {whose} values over it {sum}")
        }
        Outcome::Intersection(matched) if out.output.is_none() && !out.stdout => {
            format!("intersection size {} {NO_DEST}", matched.len())
        }
        _ => return None,
    })
}

/// Writes `outcome` as `out` asks; returns the line that summarises it.
pub fn write_outcome(set: &ItemSet, outcome: Outcome, out: &OutputArgs, role: Role) -> Result<String, Failure> {
    if let Some(line) = outcome_without_rows(&outcome, out, role) {
        return Ok(line);
    }
    Ok(match outcome {
        Outcome::Intersection(matched) => match out.emit(|w| {
            let rows: Vec<(usize, Vec<String>)> = matched.iter().map(|&i| (i, vec![])).collect();
            Ok(set.write_rows_with(&rows, &[], Some(out.rows_format(set)), w)?)
        })? {
            Some((rows, dest)) => format!("intersection size {}, {rows} rows {dest}", matched.len()),
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
            let format = Some(out.rows_format(set));
            let written = out.emit(|w| Ok(set.write_rows_with(&decoded, &columns, format, w)?))?.map_or(0, |(n, _)| n);
            format!("{} matches with labels ({}), {written} rows written", rows.len(), columns.join(","))
        }
        Outcome::Union(extra) => {
            if let Some(index) = extra.iter().position(|e| split_key(e, set.key_columns()).is_none()) {
                return Err(
                    setwise::Error::from(Deviation::NotAnItem { what: "union item (a joined key)", index }).into()
                );
            }
            out.csv_only("the union's keys")?;
            let total = set.len() + extra.len();
            match out.emit(|w| write_union(set, &extra, w))? {
                Some(((), dest)) => {
                    format!("union of {total} items ({} ours, {} only the peer's), {dest}", set.len(), extra.len())
                }
                None => format!("union of {total} items {NO_DEST}"),
            }
        }
        Outcome::Shares(shares) => {
            out.csv_only("a share file")?;
            let members = shares.members.iter().filter(|&&m| m).count();
            let what = if shares.members.is_empty() {
                format!("{} share rows", shares.rows())
            } else {
                format!("{} share rows, intersection size {members}", shares.rows())
            };
            match out.emit(|w| write_shares(set, &shares, role, w))? {
                Some(((), dest)) => format!("{what}, {dest}"),
                None => format!("{what} {NO_DEST}"),
            }
        }
        Outcome::PrivateIds { own, union } => {
            let mut what = format!("IDs for our {} items, {} IDs in the union", own.len(), union.len());
            let ids: Vec<(usize, Vec<String>)> = own.iter().enumerate().map(|(i, id)| (i, vec![hex(id)])).collect();
            let (format, name) = (Some(out.rows_format(set)), ["private_id".to_string()]);
            if let Some((_, dest)) = out.emit(|w| Ok(set.write_rows_with(&ids, &name, format, w)?))? {
                what += &format!("; rows with IDs {dest}");
            }
            if let Some(p) = &out.union_ids {
                to_file(p, out.output_mode, |w| {
                    writeln!(w, "private_id").map_err(io)?;
                    union.iter().try_for_each(|id| writeln!(w, "{}", hex(id)).map_err(io))
                })?;
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
    for item in set.items().into_iter().chain(extra.iter().map(Vec::as_slice)) {
        let fields = split_key(item, set.key_columns()).ok_or_else(|| {
            Failure::from(setwise::Error::from(Deviation::NotAnItem { what: "union item (a joined key)", index: 0 }))
        })?;
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
            rec.extend(split_key(set.item(shares.items[i]), set.key_columns()).unwrap_or_default());
        }
        w.write_record(&rec).map_err(io)?;
    }
    w.flush().map_err(io)
}
