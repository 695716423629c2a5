//! `setwise db build|insert|remove|info`: the unbalanced sender's preprocessed database.

use crate::Failure;
use crate::args::InputArgs;
use crate::input::read_items;
use crate::params::{parse_link, resolve};
use crate::progress::progress;
use clap::{Args, Subcommand};
use setwise::protocols::human_bytes;
use setwise::protocols::unbalanced::db::Open;
use setwise::protocols::unbalanced::{BuildInto, SenderDb, auto, encode_label};
use std::path::PathBuf;

/// `setwise db`.
#[derive(Subcommand)]
pub enum DbCommand {
    /// Build a sender database from a file of items.
    Build(BuildArgs),
    /// Add rows (or give existing keys new labels); only the bundles that change are
    /// read, edited point by point and written, and the manifest is replaced atomically.
    Insert(EditArgs),
    /// Remove rows by key; only the bundles that held them are recomputed.
    Remove(EditArgs),
    /// Print a database's sizes, parameters, build time and memory.
    Info {
        /// The database directory.
        #[arg(long)]
        db: PathBuf,
    },
    /// Move the OPRF key out of the database directory into a key file of its own
    /// (0600): the directory alone then lets no one test items or open labels, and
    /// serving or updating it needs `--key-file`.
    Strip {
        /// The database directory.
        #[arg(long)]
        db: PathBuf,
        /// Where to keep the key (a path outside the directory).
        #[arg(long)]
        key_file: PathBuf,
    },
}

/// `setwise db build`.
#[derive(Args)]
pub struct BuildArgs {
    #[command(flatten)]
    input: InputArgs,
    /// Parameters: `auto` (search under a cost model calibrated on this machine), a
    /// shipped preset name (e.g. 1M-256), or an APSI-style JSON file.
    #[arg(long, default_value = "auto")]
    params: String,
    /// Most receiver items per query the parameters must allow.
    #[arg(long, default_value_t = 256)]
    receiver_max: usize,
    /// The link queries cross, for `--params auto` (a preset or file is used as it is):
    /// `lan` (10 Gbit/s), `wan` (50 Mbit/s) or a bandwidth in Mbit/s. A slow link makes auto send fewer bytes per query for more
    /// sender work.
    #[arg(long, default_value = "1000", value_parser = parse_link)]
    link: auto::Link,
    /// Label columns returned with each match (labelled mode), e.g. name,city.
    #[arg(long, value_delimiter = ',')]
    label: Vec<String>,
    /// Output database directory (created readable by its owner only). Each bundle is
    /// written there as soon as it is computed, with a journal, so a build that is killed
    /// or fails can be resumed (`--resume`); a database already there is replaced only
    /// when the build is done.
    #[arg(long)]
    out: PathBuf,
    /// Continue the unfinished build in `--out` with the same input: its parameters, key
    /// and OPRF results are read from the directory, the bundles it wrote are checked and
    /// kept, and only the rest are computed (with nothing to resume, builds from the start).
    #[arg(long)]
    resume: bool,
    /// Keep the OPRF key in this file (0600) instead of the database directory; serving
    /// and updating then need it (`--key-file`).
    #[arg(long)]
    key_file: Option<PathBuf>,
    /// No progress display (it is drawn only when stderr is a terminal anyway).
    #[arg(long, short)]
    quiet: bool,
}

/// `setwise db insert|remove`.
#[derive(Args)]
pub struct EditArgs {
    /// The database directory (changed bundles are written as new segment files, then the
    /// manifest is replaced atomically by a rename).
    #[arg(long)]
    db: PathBuf,
    #[command(flatten)]
    input: InputArgs,
    /// Insert into a labelled database: the label columns.
    #[arg(long, value_delimiter = ',')]
    label: Vec<String>,
    /// The key file of a database that keeps its OPRF key apart.
    #[arg(long)]
    key_file: Option<PathBuf>,
}

fn edit(a: EditArgs, insert: bool) -> Result<(), Failure> {
    let t = std::time::Instant::now();
    let set = read_items(&a.input)?;
    let mut db = SenderDb::open(&a.db, Open::Update, a.key_file.as_deref())?;
    let loaded = t.elapsed().as_secs_f64();
    let stats = if insert {
        let labels = if a.label.is_empty() {
            None
        } else {
            Some(set.column_values(&a.label)?.iter().map(|v| encode_label(v)).collect::<Vec<_>>())
        };
        db.insert(&set.items(), labels.as_deref())
    } else {
        db.remove(&set.items())
    }?;
    let updated = t.elapsed().as_secs_f64();
    db.save(&a.db)?;
    eprintln!(
        "  read {loaded:.2} s, update {:.2} s, write {:.2} s",
        updated - loaded,
        t.elapsed().as_secs_f64() - updated
    );
    eprintln!(
        "{}: added {}, relabelled {}, removed {}, unchanged {}; recomputed {} of {} bundles ({} new); {} items now — {:.2} s",
        a.db.display(),
        stats.added,
        stats.relabelled,
        stats.removed,
        stats.unchanged,
        stats.bundles_touched,
        stats.bundles_total,
        stats.bundles_new,
        db.info().sender_size,
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Runs `setwise db …`.
pub fn run_db(cmd: DbCommand) -> Result<(), Failure> {
    match cmd {
        DbCommand::Build(a) => {
            if !a.resume {
                SenderDb::refuse_unfinished_build(&a.out)?;
            }
            // A resumed build keeps the parameters it started with (auto might choose otherwise now).
            let unfinished = if a.resume { SenderDb::unfinished_build(&a.out) } else { None };
            // A preset or a parameter file is resolved before the input is read, so that a
            // misspelt name is refused at once; auto needs the set's size and labels.
            let early = match (&unfinished, a.params.as_str()) {
                (Some(_), _) | (None, "auto") => None,
                (None, spec) => Some(resolve(spec, 0, a.receiver_max, 0, a.link)?),
            };
            let set = read_items(&a.input)?;
            let label_bytes = if a.label.is_empty() {
                0
            } else {
                set.column_values(&a.label)?.iter().map(|v| encode_label(v).len()).max().unwrap_or(0)
            };
            let (name, params) = match (unfinished, early) {
                (Some((params, name)), _) => {
                    eprintln!("resuming the build in {} with its parameters ({name})", a.out.display());
                    (name, params)
                }
                (None, Some(resolved)) => resolved,
                (None, None) => resolve(&a.params, set.len(), a.receiver_max, label_bytes, a.link)?,
            };
            let labels: Option<Vec<Vec<u8>>> = if a.label.is_empty() {
                None
            } else {
                Some(set.column_values(&a.label)?.iter().map(|v| encode_label(v)).collect())
            };
            let (bar, observer) = progress("db build", a.quiet);
            let labelled = labels.as_deref().map(|l| (l, a.label.clone()));
            let to = BuildInto {
                dir: &a.out,
                resume: a.resume,
                key_columns: set.key_columns(),
                key_file: a.key_file.as_deref(),
            };
            let built = SenderDb::build_into(to, &set.items(), labelled, params, &name, observer);
            if let Some(bar) = bar {
                bar.finish_and_clear();
            }
            let db = built?;
            if !db.info().resumed.is_empty() {
                eprintln!("resumed: {}", db.info().resumed);
            }
            eprintln!("built {} in {:.2} s", a.out.display(), db.info().build_ms as f64 / 1e3);
            print_info(&db);
            Ok(())
        }
        DbCommand::Insert(a) => edit(a, true),
        DbCommand::Remove(a) => edit(a, false),
        DbCommand::Info { db } => {
            let db = SenderDb::open(&db, Open::Inspect, None)?;
            print_info(&db);
            Ok(())
        }
        DbCommand::Strip { db: path, key_file } => {
            let mut db = SenderDb::open(&path, Open::Update, None)?;
            db.keep_key_apart(&key_file)?;
            db.save(&path)?;
            eprintln!("{}: the OPRF key is now in {} only", path.display(), key_file.display());
            Ok(())
        }
    }
}

fn print_info(db: &SenderDb) {
    let i = db.info();
    let p = db.params();
    println!("sender items:        {}", i.sender_size);
    println!("key columns:         {}", db.key_columns());
    println!(
        "OPRF key:            {}",
        if db.key_kept_apart() { "kept apart (serving and updates need --key-file)" } else { "in the directory (KEY)" }
    );
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
    println!("  BFV:               {}", p.he().describe());
    let (level, moduli) = (db.eval_level(), p.seal_params.coeff_modulus_bits.len());
    let query = p.query_level();
    if query > 0 {
        println!("  query at:          level {query}, the last modulus kept for key switching (special_modulus)");
    }
    match level {
        0 => println!("  products at:       level 0, over all {moduli} moduli"),
        _ if level == query => {
            println!("  products at:       level {level}, over {} of the {moduli} moduli", p.moduli_at(level))
        }
        _ => println!(
            "  products at:       level {level}, over {} of the {moduli} moduli (the powers are switched down to it)",
            p.moduli_at(level)
        ),
    }
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
    println!(
        "memory (plaintexts): {} served encoded (default; what does not fit, or --memory, is read per query from \
         an encoded copy on disk of that size)",
        human_bytes(i.plaintext_bytes as u64)
    );
    println!(
        "memory (compact):    {} served with --compact (plaintexts encoded per query)",
        human_bytes(i.compact_bytes as u64)
    );
}
