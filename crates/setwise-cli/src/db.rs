//! `setwise db build|info`: the unbalanced sender's preprocessed database.

use crate::Failure;
use crate::role::{InputArgs, read_items};
use clap::{Args, Subcommand};
use setwise::protocols::unbalanced::{SenderDb, UnbalancedParams, encode_label};
use setwise::session::human_bytes;
use std::path::{Path, PathBuf};

/// `setwise db`.
#[derive(Subcommand)]
pub enum DbCommand {
    /// Build a sender database from a file of items.
    Build(BuildArgs),
    /// Add rows (or give existing keys new labels); only the bundles that change are
    /// recomputed, and the file is replaced atomically.
    Insert(EditArgs),
    /// Remove rows by key; only the bundles that held them are recomputed.
    Remove(EditArgs),
    /// Print a database's sizes, parameters, build time and memory.
    Info {
        /// The database file.
        #[arg(long)]
        db: PathBuf,
    },
}

/// `setwise db build`.
#[derive(Args)]
pub struct BuildArgs {
    #[command(flatten)]
    input: InputArgs,
    /// Parameter file (APSI-style JSON); default: the smallest shipped preset that
    /// covers the input and --receiver-max.
    #[arg(long)]
    params: Option<PathBuf>,
    /// Most receiver items per query the parameters must allow.
    #[arg(long, default_value_t = 256)]
    receiver_max: usize,
    /// Label columns returned with each match (labelled mode), e.g. name,city.
    #[arg(long, value_delimiter = ',')]
    label: Vec<String>,
    /// Output database file.
    #[arg(long)]
    out: PathBuf,
}

/// `setwise db insert|remove`.
#[derive(Args)]
pub struct EditArgs {
    /// The database file (rewritten in place: a new file, then a rename).
    #[arg(long)]
    db: PathBuf,
    #[command(flatten)]
    input: InputArgs,
    /// Insert into a labelled database: the label columns.
    #[arg(long, value_delimiter = ',')]
    label: Vec<String>,
}

fn edit(a: EditArgs, insert: bool) -> Result<(), Failure> {
    let t = std::time::Instant::now();
    let set = read_items(&a.input)?;
    let mut db = SenderDb::load_for_update(&a.db).map_err(Failure::usage)?;
    let stats = if insert {
        let labels = if a.label.is_empty() {
            None
        } else {
            Some(set.column_values(&a.label)?.iter().map(|v| encode_label(v)).collect::<Vec<_>>())
        };
        db.insert(set.items(), labels.as_deref())
    } else {
        db.remove(set.items())
    }
    .map_err(Failure::usage)?;
    db.save(&a.db).map_err(Failure::usage)?;
    eprintln!(
        "{}: added {}, relabelled {}, removed {}, unchanged {}; recomputed {} of {} bundles; {} items now — {:.2} s",
        a.db.display(),
        stats.added,
        stats.relabelled,
        stats.removed,
        stats.unchanged,
        stats.bundles_touched,
        stats.bundles_total,
        db.info().sender_size,
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Loads parameters from a file, or picks a preset.
pub fn choose_params(
    file: Option<&Path>,
    sender: usize,
    receiver_max: usize,
) -> Result<(String, UnbalancedParams), Failure> {
    match file {
        Some(f) => {
            let json =
                std::fs::read_to_string(f).map_err(|e| Failure::usage(anyhow::anyhow!("{}: {e}", f.display())))?;
            let p = UnbalancedParams::from_json(&json)
                .map_err(|e| Failure::usage(anyhow::anyhow!("{}: {e}", f.display())))?;
            if receiver_max > p.receiver_max() {
                eprintln!("note: {} allows at most {} receiver items per query", f.display(), p.receiver_max());
            }
            Ok((f.display().to_string(), p))
        }
        None => {
            let (name, p) =
                UnbalancedParams::preset_for(sender, receiver_max).map_err(|e| Failure::usage(anyhow::anyhow!(e)))?;
            Ok((name.to_string(), p))
        }
    }
}

/// Runs `setwise db …`.
pub fn run(cmd: DbCommand) -> Result<(), Failure> {
    match cmd {
        DbCommand::Build(a) => {
            let set = read_items(&a.input)?;
            let (name, params) = choose_params(a.params.as_deref(), set.items().len(), a.receiver_max)?;
            let db = if a.label.is_empty() {
                SenderDb::build(set.items(), params, &name)
            } else {
                let labels: Vec<Vec<u8>> = set.column_values(&a.label)?.iter().map(|v| encode_label(v)).collect();
                SenderDb::build_labelled(set.items(), &labels, a.label.clone(), params, &name)
            }
            .map_err(Failure::usage)?;
            db.save(&a.out).map_err(Failure::usage)?;
            eprintln!("built {} in {:.2} s", a.out.display(), db.info().build_ms as f64 / 1e3);
            print_info(&db);
            Ok(())
        }
        DbCommand::Insert(a) => edit(a, true),
        DbCommand::Remove(a) => edit(a, false),
        DbCommand::Info { db } => {
            let db = SenderDb::load(&db).map_err(Failure::usage)?;
            print_info(&db);
            Ok(())
        }
    }
}

fn print_info(db: &SenderDb) {
    let i = db.info();
    let p = db.params();
    println!("sender items:        {}", i.sender_size);
    println!("parameters:          {} (fingerprint {})", i.preset, i.fingerprint);
    println!(
        "  table:             {} bins, {} hash functions, ≤ {} items per bin and bundle",
        p.table_params.table_size, p.table_params.hash_func_count, p.table_params.max_items_per_bin
    );
    println!(
        "  items:             {} felts of {} bits ({} bits)",
        p.item_params.felts_per_item,
        p.felt_bits(),
        p.item_bits()
    );
    println!(
        "  query:             powers {:?}, Paterson–Stockmeyer low degree {}",
        p.query_params.query_powers, p.query_params.ps_low_degree
    );
    println!("  BFV:               {}", p.he().fingerprint());
    println!("bundles:             {} ({} at the fullest bundle index)", i.bundles, i.max_bundles_per_index);
    if let Some(l) = db.label_layout() {
        println!(
            "labels:              columns {}, up to {} bytes, {} polynomials per slot",
            l.columns.join(","),
            i.label_bytes,
            i.label_parts
        );
    }
    println!("receiver maximum:    {} items per query (cuckoo failure ≤ 2^-40)", i.receiver_max);
    println!("false matches:       ≤ 2^{:.1} per query at the receiver maximum", i.false_match_log2);
    println!("build time:          {:.2} s", i.build_ms as f64 / 1e3);
    println!("memory (plaintexts): {} served encoded (default)", human_bytes(i.plaintext_bytes as u64));
    println!(
        "memory (compact):    {} served with --compact (plaintexts encoded per query)",
        human_bytes(i.compact_bytes as u64)
    );
}
