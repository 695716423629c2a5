//! The sender database: OPRF outputs hashed into bins, cut into bundles, each bundle's
//! matching (and label) polynomials kept as plaintexts ready for products. Built once,
//! saved as a directory (a checksummed manifest and one hashed segment file per bundle),
//! loaded without recomputing anything but the plaintexts' NTT form, shared read-only by
//! concurrent sessions. Inserts and removes edit only the bundles they change, point by
//! point, and write only those segments and the manifest (docs/protocols/unbalanced.md).
//!
//! The jobs are split by file: this module is the API and the update logic;
//! `placement` puts items into bins and bundles; `coefficients` interpolates bundles
//! and edits them point by point; `encoding` turns coefficients into plaintexts (or
//! keeps only the coefficients, in compact mode); `storage` is the on-disk format.

mod build_memory;
mod coefficients;
mod encoding;
mod journal;
mod placement;
mod rows;
mod storage;

use super::labels::{LABEL_NONCE, LabelLayout, MAX_LABEL_BYTES, record_to_felts, seal_label, seal_label_into};
use super::params::UnbalancedParams;
use super::{Digest, digest, locate};
use crate::crypto::dst;
use crate::crypto::oprf::OprfKey;
use crate::crypto::ristretto::SecretScalar;
use crate::crypto::rng::PerIndex;
use crate::error::{Error, Result};
use crate::he::{HeContext, PlainRows};
pub(crate) use crate::io::memory::available_memory;
use crate::protocols::{Meter, PhaseObserver, Progress, WORK_PIECE};
use coefficients::{apply_edits, interpolate_bundle};
use journal::Journal;
use placement::{Layouts, place, place_index, placing};
use rayon::prelude::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;
pub use storage::Open;
use storage::{DirLock, KeyPlace, Segment, read_segment};
pub(crate) use storage::{fits, plaintext_budget, resident_bytes};
use zeroize::{Zeroize, Zeroizing};

/// One change to one bin of a bundle whose coefficients are known, applied in
/// O(B) per polynomial ([`add_point`], [`remove_point`]) instead of re-interpolating.
#[derive(Debug)]
struct Edit {
    /// The bin within the bundle.
    bin: u32,
    /// Add the item (else remove it).
    add: bool,
    /// The item's felts.
    felts: Vec<u64>,
    /// Labelled add: the label felts, `parts` chunks of `felts_per_item`.
    values: Vec<u64>,
}

/// One bundle: up to `max_items_per_bin` items in each of its bins, and the
/// coefficients of each slot's matching (and label) polynomials.
#[derive(Debug)]
struct Bundle {
    /// Item ids per bin.
    bins: Vec<Vec<u32>>,
    /// `(1 + parts) × (B + 1) × N` coefficients: the matching polynomial, then each label
    /// part; polynomial-major, then coefficient-major. `None` when not loaded (an update
    /// reads only the bundles it changes) or dropped once encoded.
    coeffs: Option<Vec<u32>>,
    /// The coefficients as plaintexts at the evaluation level, in the same order (empty
    /// until encoded, or when they are read from the encoded copy on disk).
    plaintexts: PlainRows,
    /// Served from the encoded copy on disk ([`rows::RowsFile`]): the bundle's place in it.
    on_disk: Option<usize>,
    /// Where the coefficients are saved, while they are unchanged since.
    saved: Option<Segment>,
    /// New, or its coefficients are unknown: interpolate every bin anew.
    rebuild: bool,
    /// Changes since the coefficients were computed, in order.
    edits: Vec<Edit>,
}

impl Bundle {
    fn empty(bpb: usize) -> Self {
        Self {
            bins: vec![Vec::new(); bpb],
            coeffs: None,
            plaintexts: PlainRows::default(),
            on_disk: None,
            saved: None,
            rebuild: true,
            edits: Vec::new(),
        }
    }

    fn dirty(&self) -> bool {
        self.rebuild || !self.edits.is_empty()
    }

    /// Records a change to bin `bin` (nothing to record if it is rebuilt anyway).
    fn edit(&mut self, bin: usize, add: bool, felts: &[u64], values: impl FnOnce() -> Vec<u64>) {
        if !self.rebuild {
            let values = if add { values() } else { Vec::new() };
            self.edits.push(Edit { bin: bin as u32, add, felts: felts.to_vec(), values });
        }
    }
}

/// Facts about a database, for `db info` and reports.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct DbInfo {
    /// Distinct sender items.
    pub sender_size: usize,
    /// Preset the parameters came from, if any.
    pub preset: String,
    /// Parameter fingerprint.
    pub fingerprint: String,
    /// Bundles in all.
    pub bundles: usize,
    /// Most bundles at one bundle index.
    pub max_bundles_per_index: usize,
    /// Build time, milliseconds.
    pub build_ms: u64,
    /// Bytes of the loaded plaintexts (the database's memory when served encoded).
    pub plaintext_bytes: usize,
    /// Bytes of the coefficients alone (the database's memory in compact mode).
    pub compact_bytes: usize,
    /// Served in compact mode (plaintexts encoded per query).
    pub compact: bool,
    /// Served encoded with this many bytes of the plaintexts read per query from the
    /// encoded copy on disk (what did not fit in memory); 0 when all are in memory.
    pub on_disk_bytes: usize,
    /// The encoded copy the load used, and whether it was written, reused or replaced
    /// (empty if none).
    pub encoded_copy: String,
    /// The most receiver items per query.
    pub receiver_max: usize,
    /// Labelled: the longest label in bytes (0 if unlabelled).
    pub label_bytes: usize,
    /// Labelled: label polynomials per bundle slot.
    pub label_parts: usize,
    /// Per-query false-match probability at the receiver maximum, log2.
    pub false_match_log2: f64,
    /// A resumed build ([`SenderDb::build_into`]): bundles it found written and
    /// reused (0 otherwise).
    pub resumed_bundles: usize,
    /// A resumed build: what it reused, or why it built from the start (empty otherwise).
    pub resumed: String,
}

/// What an insert or remove changed.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct UpdateStats {
    /// New items.
    pub added: usize,
    /// Existing items given a new label.
    pub relabelled: usize,
    /// Items removed.
    pub removed: usize,
    /// Items asked for that were already there (insert) or absent (remove).
    pub unchanged: usize,
    /// Bundles recomputed.
    pub bundles_touched: usize,
    /// Of those, bundles interpolated anew (new ones, or ones whose coefficients were
    /// not at hand); the others were edited point by point.
    pub bundles_new: usize,
    /// Bundles in the database afterwards.
    pub bundles_total: usize,
}

/// Encrypted labels of a database: one record of `layout.record_bytes` per item, end to
/// end (one allocation, written and read as one slice).
#[derive(Debug)]
struct Labels {
    layout: LabelLayout,
    records: Vec<u8>,
}

impl Labels {
    fn record(&self, id: u32) -> &[u8] {
        let rb = self.layout.record_bytes;
        &self.records[id as usize * rb..][..rb]
    }

    fn set(&mut self, id: u32, record: &[u8]) {
        let rb = self.layout.record_bytes;
        self.records[id as usize * rb..][..rb].copy_from_slice(record);
    }
}

/// The preprocessed sender database.
#[derive(Debug)]
pub struct SenderDb {
    params: UnbalancedParams,
    ctx: HeContext,
    /// The level its plaintexts are encoded and multiplied at
    /// ([`UnbalancedParams::eval_level`]).
    level: usize,
    /// The OPRF key; `None` when the database was opened without its key (to inspect).
    oprf: Option<OprfKey>,
    /// Each item's digest (not its OPRF output, which would open its label).
    items: Vec<Digest>,
    /// Bundles per bundle index.
    indices: Vec<Vec<Bundle>>,
    labels: Option<Labels>,
    /// The database directory the saved segments are in.
    dir: Option<PathBuf>,
    /// Key columns joined into each item (receivers must join as many).
    key_columns: usize,
    /// Where the OPRF key is kept.
    key_place: KeyPlace,
    /// The key's check value from the manifest (a wrong key file is refused).
    key_check: Option<[u8; 32]>,
    /// The directory's lock, held while the database is open for an update.
    lock: Option<DirLock>,
    /// The encoded copy on disk, when some bundles are served from it.
    rows: Option<rows::RowsFile>,
    info: DbInfo,
}

/// Where [`SenderDb::build_into`] writes, and what it does with an unfinished build
/// there.
#[derive(Debug, Clone, Copy)]
pub struct BuildInto<'a> {
    /// The database directory (created 0700 if new).
    pub dir: &'a Path,
    /// Continue the unfinished build found in `dir`; without it, one there is refused.
    pub resume: bool,
    /// Key columns joined into each item (see [`SenderDb::with_key_columns`]).
    pub key_columns: usize,
    /// Keep the OPRF key in this file instead of the directory (see
    /// [`SenderDb::keep_key_apart`]).
    pub key_file: Option<&'a Path>,
}

/// What [`SenderDb::build_into`] found to resume.
enum Resumable {
    /// The journal and the build's key.
    Yes(Box<Journal>, OprfKey),
    /// A build stopped after its manifest (whose key this is) and before deleting its
    /// files.
    Finished(OprfKey),
    /// Nothing to resume, and why.
    No(String),
}

/// Tells `observer` a build's next step.
fn step(observer: &Option<PhaseObserver>, name: &'static str) {
    if let Some(o) = observer {
        o(Progress::Phase(name));
    }
}

/// Checks a build's input and parameters before any work, and makes their context.
fn check_build(items: usize, labels: Option<&[Vec<u8>]>, params: &UnbalancedParams) -> Result<HeContext> {
    if let Some(labels) = labels {
        if labels.len() != items {
            return Err(Error::params("labels", format!("{} labels for {} items", labels.len(), items)));
        }
        if let Some(l) = labels.iter().find(|l| l.len() > MAX_LABEL_BYTES) {
            return Err(Error::params("labels", format!("a label has {} bytes; at most {MAX_LABEL_BYTES}", l.len())));
        }
    }
    params.validate()?;
    // Parameters that too many items would break are refused before any work.
    params.check_false_matches(params.likely_bundles_per_index(items), "at least ")?;
    HeContext::new(&params.he()).map_err(|e| Error::params("he_params", e.to_string()))
}

/// The label layout of a build's labels, if any.
fn label_layout(params: &UnbalancedParams, labels: &Option<(&[Vec<u8>], Vec<String>)>) -> Option<LabelLayout> {
    labels
        .as_ref()
        .map(|(l, columns)| LabelLayout::new(params, columns.clone(), l.iter().map(Vec::len).max().unwrap_or(0)))
}

/// The items' OPRF digests and, with `layout`, their labels sealed under their OPRF
/// outputs. Piece by piece ([`WORK_PIECE`] items): a piece's outputs, which would open
/// its labels, are hashed, used to seal and wiped before the next piece, so the build
/// never holds every output (32 bytes an item) and leaves none in freed memory (the
/// database keeps only digests).
fn oprf_items<I: AsRef<[u8]> + Sync>(
    oprf: &OprfKey,
    items: &[I],
    labels: Option<&[Vec<u8>]>,
    layout: Option<LabelLayout>,
    observer: &Option<PhaseObserver>,
) -> (Vec<Digest>, Option<Labels>) {
    let meter = Meter::new(observer.clone(), items.len());
    let mut digests = Vec::with_capacity(items.len());
    let mut sealed = labels.zip(layout).map(|(l, layout)| {
        let records = vec![0u8; items.len() * layout.record_bytes];
        (l, Labels { layout, records })
    });
    // Nonces from one keyed stream per item instead of a system call each.
    let nonces = PerIndex::draw();
    for (k, piece) in items.chunks(WORK_PIECE).enumerate() {
        let start = k * WORK_PIECE;
        let outputs = Zeroizing::new(oprf.evaluate_items(piece));
        digests.par_extend(outputs.par_iter().map(digest));
        if let Some((labels, sealed)) = &mut sealed {
            let rb = sealed.layout.record_bytes;
            let records = &mut sealed.records[start * rb..(start + piece.len()) * rb];
            let labels = &labels[start..start + piece.len()];
            records.par_chunks_mut(rb).zip(outputs.par_iter().zip(labels)).enumerate().for_each(
                |(i, (r, (o, label)))| {
                    let (mut stream, mut nonce) = (nonces.stream((start + i) as u64), [0u8; LABEL_NONCE]);
                    stream.fill(&mut nonce);
                    stream.zeroize();
                    seal_label_into(o, label, &nonce, r);
                },
            );
        }
        meter.add(piece.len());
    }
    (digests, sealed.map(|(_, labels)| labels))
}

/// A bundle's coefficients interpolated from its bins.
fn interpolate(
    p: &UnbalancedParams,
    parts: usize,
    bins: &[Vec<u32>],
    items: &[Digest],
    labels: &Option<Labels>,
) -> Result<Vec<u32>> {
    interpolate_bundle(p, parts, bins, items, labels).ok_or_else(|| {
        Error::usage("database", "two items of a bundle's bin share a field element: placement was bypassed")
    })
}

fn oprf_key(scalar: SecretScalar) -> OprfKey {
    OprfKey::from_scalar(scalar, dst::UNBALANCED_OPRF, dst::UNBALANCED_OPRF_OUT)
}

impl SenderDb {
    /// Builds a database from distinct `items` under `params` (`preset` names where
    /// they came from).
    pub fn build<I: AsRef<[u8]> + Sync>(items: &[I], params: UnbalancedParams, preset: &str) -> Result<Self> {
        Self::build_observed(items, None, params, preset, None)
    }

    /// Builds a labelled database: `labels[i]` (at most 1 KiB, the serialised label
    /// columns named `columns`) is returned to a receiver that holds `items[i]`.
    pub fn build_labelled<I: AsRef<[u8]> + Sync>(
        items: &[I],
        labels: &[Vec<u8>],
        columns: Vec<String>,
        params: UnbalancedParams,
        preset: &str,
    ) -> Result<Self> {
        Self::build_observed(items, Some((labels, columns)), params, preset, None)
    }

    /// [`build`](Self::build), or [`build_labelled`](Self::build_labelled) with
    /// `labels`, telling `observer` of its steps: each step's name as a
    /// [`Progress::Phase`], then items or bundles done as [`Progress::Work`] (a 2^20
    /// build takes 15–30 s on two cores).
    pub fn build_observed<I: AsRef<[u8]> + Sync>(
        items: &[I],
        labels: Option<(&[Vec<u8>], Vec<String>)>,
        params: UnbalancedParams,
        preset: &str,
        observer: Option<PhaseObserver>,
    ) -> Result<Self> {
        let start = Instant::now();
        let ctx = check_build(items.len(), labels.as_ref().map(|l| l.0), &params)?;
        let layout = label_layout(&params, &labels);
        build_memory::refuse_if_short(&params, items.len(), layout.as_ref().map_or(0, |l| l.record_bytes))?;
        let oprf = OprfKey::random(dst::UNBALANCED_OPRF, dst::UNBALANCED_OPRF_OUT);
        step(&observer, "OPRF of the items");
        let (digests, labels) = oprf_items(&oprf, items, labels.map(|l| l.0), layout, &observer);
        let mut db = Self::assemble(params, ctx, oprf, digests, labels)?;
        step(&observer, "place the items in bundles");
        db.place_all()?;
        step(&observer, "interpolate each bundle's polynomials");
        db.compute_coefficients(observer)?;
        db.info.preset = preset.to_string();
        db.info.build_ms = start.elapsed().as_millis() as u64;
        db.refresh_info();
        Ok(db)
    }

    /// Builds a database into the directory `to.dir` as [`build_observed`](Self::build_observed)
    /// does, but writes each bundle's segment as soon as it is interpolated (memory then
    /// holds a bundle's coefficients per thread, not the database's) and keeps a journal
    /// there, so that a build killed at any point resumes (`to.resume`): its key and OPRF
    /// results are read back, and the bundles it wrote are reused once their segments
    /// check (module `journal`). The last step saves the manifest, as
    /// [`save`](Self::save) does; a database already in `dir` stays whole until then.
    /// Without `to.resume`, an unfinished build in `dir` is refused; a resumed build
    /// must be given the same parameters and input. [`DbInfo::resumed`] says what was
    /// reused; `build_ms` is this run's time.
    pub fn build_into<I: AsRef<[u8]> + Sync>(
        to: BuildInto<'_>,
        items: &[I],
        labels: Option<(&[Vec<u8>], Vec<String>)>,
        params: UnbalancedParams,
        preset: &str,
        observer: Option<PhaseObserver>,
    ) -> Result<Self> {
        let start = Instant::now();
        let dir = to.dir;
        let ctx = check_build(items.len(), labels.as_ref().map(|l| l.0), &params)?;
        let layout = label_layout(&params, &labels);
        let record_bytes = layout.as_ref().map_or(0, |l| l.record_bytes);
        // Before the directory is touched: a build that cannot fit leaves nothing behind.
        // A resume is checked once it is known to place items (one that finds its build
        // finished only writes the key).
        if !to.resume {
            build_memory::refuse_if_short(&params, items.len(), record_bytes)?;
        }
        storage::check_build_dir(dir)?;
        storage::private_dir(dir).map_err(|e| Error::file(dir, e))?;
        let lock = DirLock::take(dir, true)?;
        // Checked under the lock: a build that held it before may have left a journal.
        if !to.resume {
            storage::refuse_unfinished_build(dir)?;
        }
        let key_columns = to.key_columns.max(1);
        let input = journal::input_fingerprint(items, labels.as_ref().map(|(l, c)| (*l, c.as_slice())), key_columns);
        // Why a resume built from the start.
        let mut why_not = String::new();
        let mut found = None;
        if to.resume {
            match Self::resumable(dir, &params, input, items.len())? {
                Resumable::Yes(journal, key) => found = Some((*journal, key)),
                Resumable::Finished(key) => {
                    // Stopped after its manifest: its key is written where the manifest
                    // says, then its files are deleted.
                    let manifest = dir.join(storage::MANIFEST);
                    let bytes = std::fs::read(&manifest).map_err(|e| Error::file(&manifest, e))?;
                    let mut db = Self::decode_manifest(&bytes, dir)?;
                    match (db.key_kept_apart(), to.key_file) {
                        (false, _) => storage::write_key(&dir.join(storage::KEY), &key)?,
                        (true, Some(file)) => storage::write_key(file, &key)?,
                        (true, None) => {
                            return Err(Error::usage(
                                "key_file",
                                "the finished build keeps its key apart: give its key file (--key-file) to finish it",
                            ));
                        }
                    }
                    journal::remove_build_files(dir)?;
                    drop(lock);
                    db.info.resumed =
                        "the build had finished; its key is written and its leftover files deleted".into();
                    return Ok(db);
                }
                Resumable::No(why) => why_not = why,
            }
            build_memory::refuse_if_short(&params, items.len(), record_bytes)?;
        }
        let dropped_tail = found.as_ref().is_some_and(|(j, _)| j.dropped_tail);
        let found_journal = found.is_some();
        let (mut journal, oprf, spilled) = match found {
            Some((mut journal, key)) => {
                journal.cut_tail()?;
                let spilled = journal::read_items(dir, &journal, record_bytes)?;
                (journal, key, spilled)
            }
            None => {
                let key = OprfKey::random(dst::UNBALANCED_OPRF, dst::UNBALANCED_OPRF_OUT);
                let header = journal::Header {
                    params_json: params.to_json(),
                    preset: preset.to_string(),
                    key_check: storage::key_check(&key),
                    input,
                    items: items.len() as u64,
                };
                // The journal first: a kill before the key is written leaves a journal
                // whose key does not check, which a resume builds anew.
                let journal = Journal::create(dir, header)?;
                storage::write_key(&dir.join(storage::BUILD_KEY), &key)?;
                (journal, key, None)
            }
        };
        let oprf_reused = spilled.is_some();
        let (digests, labels) = match spilled {
            Some((digests, records)) => (digests, layout.map(|layout| Labels { layout, records })),
            None => {
                // Sealed labels draw nonces: the bundles recorded so far are forgotten
                // (the journal starts again under the same header and key).
                if !journal.done.is_empty() {
                    journal = Journal::create(dir, journal.header.clone())?;
                }
                step(&observer, "OPRF of the items");
                let (digests, labels) = oprf_items(&oprf, items, labels.map(|l| l.0), layout, &observer);
                journal::write_items(dir, &journal, &digests, labels.as_ref().map_or(&[], |l| &l.records))?;
                (digests, labels)
            }
        };
        let mut db = Self::assemble(params, ctx, oprf, digests, labels)?;
        db.key_columns = key_columns;
        db.dir = Some(dir.to_path_buf());
        step(&observer, "place the items in bundles");
        if let Err(e) = db.place_all() {
            // These parameters cannot hold these items, now or on a resume: the build's
            // files go, so the directory is as it was (its database, if any, untouched).
            drop(journal);
            journal::remove_build_files(dir)?;
            return Err(e);
        }
        let done = std::mem::take(&mut journal.done);
        let reused = if done.is_empty() {
            0
        } else {
            step(&observer, "check the bundles already written");
            db.reuse_written(dir, &done)
        };
        // What a resumed build reused, or why it built from the start.
        let resumed = if found_journal {
            let total = db.indices.iter().map(Vec::len).sum::<usize>();
            let what = if oprf_reused { "reused the OPRF results and" } else { "reused" };
            let cut = if dropped_tail { " (the journal's last record was cut short or damaged)" } else { "" };
            format!("{what} {reused} of {total} bundles{cut}")
        } else {
            why_not
        };
        step(&observer, "interpolate and write each bundle's polynomials");
        db.write_bundles(dir, &journal, observer)?;
        drop(journal);
        db.lock = Some(lock);
        if to.key_file.is_some() {
            db.key_place = KeyPlace::Apart;
        }
        db.info.preset = preset.to_string();
        db.info.build_ms = start.elapsed().as_millis() as u64;
        // The manifest's rename is the step that replaces a database in `dir`; until
        // `KEY` (or the key file) is written after it, a load finds the key in BUILD-KEY.
        db.save(dir)?;
        if let Some(k) = to.key_file {
            storage::write_key(k, db.key()?)?;
        }
        journal::remove_build_files(dir)?;
        // Released, so that this thread may open the database again.
        db.lock = None;
        db.info.resumed_bundles = reused;
        db.info.resumed = resumed;
        db.refresh_info();
        Ok(db)
    }

    /// Refuses `dir` if it holds an unfinished build, naming `--resume`: a frontend
    /// checks this before it reads the input or chooses parameters.
    pub fn refuse_unfinished_build(dir: &Path) -> Result<()> {
        storage::refuse_unfinished_build(dir)
    }

    /// The parameters and preset of the unfinished build in `dir`, if its journal is
    /// there and reads: `setwise db build --resume` builds with them rather than
    /// choosing anew (`auto` may choose otherwise on another run).
    pub fn unfinished_build(dir: &Path) -> Option<(UnbalancedParams, String)> {
        let header = Journal::header(dir)?;
        UnbalancedParams::from_json(&header.params_json).ok().map(|p| (p, header.preset))
    }

    /// Whether the unfinished build in `dir` can be resumed with `params` and `input`
    /// of `items` items (called under the directory's lock). Other parameters or another input are
    /// refused: resuming them would mix two databases.
    fn resumable(dir: &Path, params: &UnbalancedParams, input: [u8; 32], items: usize) -> Result<Resumable> {
        let journal = match Journal::open(dir) {
            Ok(Some(j)) => j,
            Ok(None) => return Ok(Resumable::No("no unfinished build to resume: built from the start".into())),
            Err(e) => return Ok(Resumable::No(format!("{e}: built from the start"))),
        };
        if storage::manifest_key_check(dir) == Some(journal.header.key_check) {
            let key = storage::read_key(&dir.join(storage::BUILD_KEY), &journal.header.key_check)?;
            return Ok(Resumable::Finished(key));
        }
        let theirs = UnbalancedParams::from_json(&journal.header.params_json).map(|p| p.fingerprint());
        if theirs.as_ref().ok() != Some(&params.fingerprint()) {
            return Err(Error::params(
                "params",
                format!(
                    "the unfinished build in {} used other parameters (fingerprint {}): resume it with them \
                     (`setwise db build --resume` reads them from its journal), or delete its BUILD file to \
                     build anew",
                    dir.display(),
                    theirs.unwrap_or_else(|_| "unreadable".into())
                ),
            ));
        }
        if journal.header.input != input || journal.header.items != items as u64 {
            return Err(Error::usage(
                "input",
                format!(
                    "the unfinished build in {} was started from another input (items, labels or key columns): \
                     give it the same input, or delete its BUILD file to build anew",
                    dir.display()
                ),
            ));
        }
        Ok(match storage::read_key(&dir.join(storage::BUILD_KEY), &journal.header.key_check) {
            Ok(key) => Resumable::Yes(Box::new(journal), key),
            Err(e) => Resumable::No(format!("{e}: built from the start")),
        })
    }

    /// Marks as saved each bundle that `done` records with the same bins and whose
    /// segment still checks; returns how many.
    fn reuse_written(&mut self, dir: &Path, done: &HashMap<(u32, u32), journal::Done>) -> usize {
        let (p, len) = (&self.params, self.segment_len());
        self.indices
            .par_iter_mut()
            .enumerate()
            .map(|(bi, bundles)| {
                bundles
                    .par_iter_mut()
                    .enumerate()
                    .map(|(pos, b)| match done.get(&(bi as u32, pos as u32)) {
                        Some(d)
                            if d.bins == journal::bins_hash(&b.bins)
                                && read_segment(dir, d.segment, len, p).is_ok() =>
                        {
                            b.saved = Some(d.segment);
                            b.rebuild = false;
                            1
                        }
                        _ => 0,
                    })
                    .sum::<usize>()
            })
            .sum()
    }

    /// Interpolates each bundle not yet saved and writes it to a segment in `dir` at
    /// once, recorded in `journal`; its coefficients are dropped once written.
    fn write_bundles(&mut self, dir: &Path, journal: &Journal, observer: Option<PhaseObserver>) -> Result<()> {
        let todo = self.indices.iter().flatten().filter(|b| b.saved.is_none()).count();
        let meter = Meter::new(observer, todo).counting("bundles");
        let (items, labels, p) = (&self.items, &self.labels, &self.params);
        let parts = labels.as_ref().map_or(0, |l| l.layout.parts);
        self.indices.par_iter_mut().enumerate().try_for_each(|(bi, bundles)| {
            bundles.par_iter_mut().enumerate().filter(|(_, b)| b.saved.is_none()).try_for_each(|(pos, b)| {
                let coeffs = interpolate(p, parts, &b.bins, items, labels)?;
                let seg = storage::write_segment(dir, &coeffs).map_err(|e| Error::file(dir, e))?;
                journal
                    .append(bi, pos, journal::bins_hash(&b.bins), seg)
                    .map_err(|e| Error::file(&dir.join(storage::JOURNAL), e))?;
                b.saved = Some(seg);
                b.rebuild = false;
                b.coeffs = None;
                meter.add(1);
                Ok(())
            })
        })
    }

    /// A database of `digests` (and `labels`) under `params`, with no bundles yet.
    fn assemble(
        params: UnbalancedParams,
        ctx: HeContext,
        oprf: OprfKey,
        digests: Vec<Digest>,
        labels: Option<Labels>,
    ) -> Result<Self> {
        Ok(Self {
            level: params.eval_level()?,
            params,
            ctx,
            oprf: Some(oprf),
            items: digests,
            indices: Vec::new(),
            labels,
            dir: None,
            key_columns: 1,
            key_place: KeyPlace::Directory,
            key_check: None,
            lock: None,
            rows: None,
            info: DbInfo::default(),
        })
    }

    /// Places every item, then checks the false-match bound on the bundles they fill,
    /// before any interpolation.
    fn place_all(&mut self) -> Result<()> {
        self.fill_bundles()?;
        self.refresh_info();
        self.check_false_matches()
    }

    /// Places every item (see [`place`]), one bundle index per task.
    fn fill_bundles(&mut self) -> Result<()> {
        let layout = Layouts::of(&self.params, &self.items, None);
        let (p, n) = (&self.params, self.items.len());
        self.indices =
            (0..p.bundle_indices()).into_par_iter().map(|bi| place_index(p, bi, n, &layout)).collect::<Result<_>>()?;
        Ok(())
    }

    /// Label felts of a sealed record: `parts` chunks of `felts_per_item`.
    fn label_felts(labels: &Option<Labels>, p: &UnbalancedParams, id: u32) -> Vec<u64> {
        labels.as_ref().map_or_else(Vec::new, |l| {
            record_to_felts(l.record(id), l.layout.parts * p.item_params.felts_per_item, p.felt_bits())
        })
    }

    /// Adds `items` (with `labels` in a labelled database); an item already present gets
    /// the new label. Only the bundles that change are recomputed, and only their
    /// changed points (O(B) per point and polynomial).
    pub fn insert<I: AsRef<[u8]> + Sync>(&mut self, items: &[I], labels: Option<&[Vec<u8>]>) -> Result<UpdateStats> {
        match (&self.labels, labels) {
            (Some(_), None) => {
                return Err(Error::params("labels", "this database is labelled: give the new items' labels".into()));
            }
            (None, Some(_)) => {
                return Err(Error::params("labels", "this database has no labels: rebuild it with labels".into()));
            }
            (_, Some(l)) if l.len() != items.len() => {
                return Err(Error::params("labels", format!("{} labels for {} items", l.len(), items.len())));
            }
            _ => {}
        }
        if let (Some(l), Some(new)) = (&self.labels, labels) {
            let max = l.layout.record_bytes - LABEL_NONCE - 2;
            if let Some(x) = new.iter().find(|x| x.len() > max) {
                return Err(Error::params(
                    "labels",
                    format!("a label of {} bytes exceeds this database's label size of {max}; rebuild it", x.len()),
                ));
            }
        }
        // The outputs open labels: wiped when dropped, on every path.
        let outputs = Zeroizing::new(self.key()?.evaluate_items(items));
        let digests: Vec<Digest> = outputs.par_iter().map(digest).collect();
        let index = self.find(&digests);
        // Placing an item compares its felts only with the items of bins that have room,
        // so only those items' layouts are computed.
        let cap = self.params.table_params.max_items_per_bin;
        let mut open = vec![false; self.items.len()];
        for bin in self.indices.iter().flatten().flat_map(|b| &b.bins).filter(|bin| bin.len() < cap) {
            bin.iter().for_each(|&id| open[id as usize] = true);
        }
        let mut layout = Layouts::of(&self.params, &self.items, Some(&open));
        let mut stats = UpdateStats::default();
        let bpb = self.params.bins_per_bundle();
        let mut seen = std::collections::HashSet::new();
        let mut placing = placing(&self.params);
        for (j, (o, d)) in outputs.iter().zip(&digests).enumerate() {
            // An item given twice in one insert keeps its first label.
            if let Some(&id) = index.get(d).or_else(|| seen.contains(d).then_some(&u32::MAX)) {
                match (&mut self.labels, labels) {
                    (Some(l), Some(new)) if id != u32::MAX => l.set(id, &seal_label(o, &new[j], &l.layout)),
                    _ => {
                        stats.unchanged += 1;
                        continue;
                    }
                }
                let values = Self::label_felts(&self.labels, &self.params, id);
                layout.ensure(&self.params, id, d);
                // A new label is the same point with a new value: remove it, then add it.
                let felts = layout.felts(id);
                for &bin in layout.bins(id) {
                    let (bi, lb) = (bin as usize / bpb, bin as usize % bpb);
                    for b in self.indices[bi].iter_mut().filter(|b| b.bins[lb].contains(&id)) {
                        b.edit(lb, false, felts, Vec::new);
                        b.edit(lb, true, felts, || values.clone());
                    }
                }
                stats.relabelled += 1;
                continue;
            }
            let id = self.items.len() as u32;
            self.items.push(*d);
            seen.insert(*d);
            if let (Some(l), Some(new)) = (&mut self.labels, labels) {
                l.records.extend_from_slice(&seal_label(o, &new[j], &l.layout));
            }
            layout.push(&self.params, d);
            let (params, lab) = (&self.params, &self.labels);
            place(
                &self.params,
                &mut self.indices,
                id,
                &layout,
                &|id| Self::label_felts(lab, params, id),
                &mut placing,
            )?;
            stats.added += 1;
        }
        self.finish_update(stats)
    }

    /// The ids of those `digests` already in the database: a set of the (few) digests
    /// asked for, scanned against every item in parallel, instead of an index of the
    /// whole database per update.
    fn find(&self, digests: &[Digest]) -> std::collections::HashMap<Digest, u32> {
        let wanted: std::collections::HashSet<&Digest> = digests.iter().collect();
        self.items.par_iter().enumerate().filter(|(_, o)| wanted.contains(o)).map(|(i, o)| (*o, i as u32)).collect()
    }

    /// Removes `items`; only the bundles that held them are recomputed (bundles left
    /// empty are dropped).
    pub fn remove<I: AsRef<[u8]> + Sync>(&mut self, items: &[I]) -> Result<UpdateStats> {
        // The outputs open labels: wiped when dropped, on every path.
        let outputs = Zeroizing::new(self.key()?.evaluate_items(items));
        let digests: Vec<Digest> = outputs.par_iter().map(digest).collect();
        let index = self.find(&digests);
        let mut gone = vec![false; self.items.len()];
        let mut stats = UpdateStats::default();
        for d in &digests {
            match index.get(d) {
                Some(&id) if !gone[id as usize] => {
                    gone[id as usize] = true;
                    stats.removed += 1;
                }
                _ => stats.unchanged += 1,
            }
        }
        // Ids stay dense: item `i` becomes `remap[i]`.
        let mut remap = vec![u32::MAX; self.items.len()];
        let mut next = 0u32;
        for (i, g) in gone.iter().enumerate() {
            if !g {
                remap[i] = next;
                next += 1;
            }
        }
        let (items, p) = (&self.items, &self.params);
        let (mut bins_buf, mut felts) = (Vec::new(), Vec::new());
        for bundles in &mut self.indices {
            for b in bundles.iter_mut() {
                for lb in 0..b.bins.len() {
                    for i in 0..b.bins[lb].len() {
                        let id = b.bins[lb][i];
                        if gone[id as usize] {
                            locate(p, &items[id as usize], &mut bins_buf, &mut felts);
                            b.edit(lb, false, &felts, Vec::new);
                        }
                    }
                    let bin = &mut b.bins[lb];
                    bin.retain(|&id| !gone[id as usize]);
                    bin.iter_mut().for_each(|id| *id = remap[*id as usize]);
                }
            }
            bundles.retain(|b| b.bins.iter().any(|bin| !bin.is_empty()));
        }
        let mut keep = gone.iter().map(|g| !g);
        self.items.retain(|_| keep.next().expect("one flag per item"));
        if let Some(l) = &mut self.labels {
            let rb = l.layout.record_bytes;
            l.records = l.records.chunks(rb).zip(&gone).filter(|(_, g)| !**g).flat_map(|(r, _)| r).copied().collect();
        }
        self.finish_update(stats)
    }

    fn finish_update(&mut self, mut stats: UpdateStats) -> Result<UpdateStats> {
        stats.bundles_touched = self.indices.iter().flatten().filter(|b| b.dirty()).count();
        let serving = self.indices.iter().flatten().any(|b| !b.plaintexts.is_empty() || b.on_disk.is_some());
        stats.bundles_new = self.compute_coefficients(None)?;
        if serving {
            self.encode()?;
        }
        self.refresh_info();
        self.check_false_matches()?;
        stats.bundles_total = self.info.bundles;
        Ok(stats)
    }

    /// Brings every changed bundle's coefficients up to date (in parallel): a new
    /// bundle, or one whose coefficients are unknown, is interpolated anew; an edited
    /// one reads its saved coefficients if they are not in memory and applies its
    /// edits point by point. Returns how many were interpolated anew.
    fn compute_coefficients(&mut self, observer: Option<PhaseObserver>) -> Result<usize> {
        let dirty = self.indices.iter().flatten().filter(|b| b.dirty()).count();
        let meter = Meter::new(observer, dirty).counting("bundles");
        let (items, labels, p, dir) = (&self.items, &self.labels, &self.params, self.dir.as_deref());
        let parts = labels.as_ref().map_or(0, |l| l.layout.parts);
        let len = (1 + parts) * (p.table_params.max_items_per_bin + 1) * p.seal_params.poly_modulus_degree;
        self.indices
            .par_iter_mut()
            .flatten()
            .filter(|b| b.dirty())
            .try_fold(
                || 0,
                |anew, bundle| {
                    // Its plaintexts, in memory or in the encoded copy, are no longer its own.
                    bundle.plaintexts = PlainRows::default();
                    bundle.on_disk = None;
                    if !bundle.rebuild && bundle.coeffs.is_none() {
                        match (bundle.saved, dir) {
                            (Some(seg), Some(dir)) => bundle.coeffs = Some(read_segment(dir, seg, len, p)?),
                            _ => bundle.rebuild = true,
                        }
                    }
                    if !bundle.rebuild {
                        let coeffs = bundle.coeffs.as_mut().expect("loaded above");
                        if apply_edits(p, parts, &bundle.edits, coeffs).is_none() {
                            // Not the points the coefficients were made from: interpolate anew.
                            bundle.rebuild = true;
                        }
                    }
                    let rebuilt = bundle.rebuild;
                    if rebuilt {
                        bundle.coeffs = Some(interpolate(p, parts, &bundle.bins, items, labels)?);
                    }
                    bundle.edits.clear();
                    bundle.rebuild = false;
                    bundle.saved = None;
                    meter.add(1);
                    Ok(anew + usize::from(rebuilt))
                },
            )
            .try_reduce(|| 0, |a, b| Ok(a + b))
    }

    /// The false-match bound depends on how many bundles the items fill, so it is checked
    /// on the built database, not only on the parameters (before the build, only what
    /// the item count all but surely implies: [`UnbalancedParams::likely_bundles_per_index`]).
    fn check_false_matches(&self) -> Result<()> {
        self.params.check_false_matches(self.info.max_bundles_per_index, "")
    }

    fn refresh_info(&mut self) {
        let bundles: usize = self.indices.iter().map(Vec::len).sum();
        let max_bpi = self.indices.iter().map(Vec::len).max().unwrap_or(0);
        self.info.sender_size = self.items.len();
        self.info.fingerprint = self.params.fingerprint();
        self.info.bundles = bundles;
        self.info.max_bundles_per_index = max_bpi;
        let parts = self.labels.as_ref().map_or(0, |l| l.layout.parts);
        let polys = bundles * (1 + parts) * (self.params.table_params.max_items_per_bin + 1);
        (self.info.plaintext_bytes, self.info.compact_bytes) = self.params.serving_bytes(polys, self.level);
        let on_disk = self.indices.iter().flatten().filter(|b| b.on_disk.is_some()).count();
        self.info.on_disk_bytes = self.info.plaintext_bytes / bundles.max(1) * on_disk;
        self.info.label_parts = parts;
        self.info.label_bytes = self.labels.as_ref().map_or(0, |l| l.layout.record_bytes - LABEL_NONCE - 2);
        self.info.receiver_max = self.params.receiver_max();
        self.info.false_match_log2 = self.params.false_match_log2(self.info.receiver_max, max_bpi);
    }

    /// The parameters.
    pub fn params(&self) -> &UnbalancedParams {
        &self.params
    }

    /// Facts for `db info`.
    pub fn info(&self) -> &DbInfo {
        &self.info
    }

    /// Whether the OPRF key is kept apart from the data (see
    /// [`keep_key_apart`](Self::keep_key_apart)).
    pub fn key_kept_apart(&self) -> bool {
        self.key_place == KeyPlace::Apart
    }

    /// Key columns joined into each item (1 unless set by
    /// [`with_key_columns`](Self::with_key_columns)); a receiver must join as many.
    pub fn key_columns(&self) -> usize {
        self.key_columns
    }

    /// Records that each item joins `n` key columns (saved with the database; a query
    /// whose job names another number is refused in the hello).
    pub fn with_key_columns(mut self, n: usize) -> Self {
        self.key_columns = n.max(1);
        self
    }

    pub(crate) fn context(&self) -> &HeContext {
        &self.ctx
    }

    /// The level its plaintexts are encoded and multiplied at
    /// ([`UnbalancedParams::eval_level`]).
    pub fn eval_level(&self) -> usize {
        self.level
    }

    /// The OPRF key, or an error naming where it is when the database was opened
    /// without it.
    pub(crate) fn key(&self) -> Result<&OprfKey> {
        self.oprf.as_ref().ok_or_else(|| {
            Error::usage(
                "key_file",
                "this database was opened without its OPRF key: open it with its key file to serve or update it",
            )
        })
    }

    /// Number of bundles at each bundle index.
    pub(crate) fn bundle_counts(&self) -> Vec<usize> {
        self.indices.iter().map(Vec::len).collect()
    }

    /// The label layout, if the database is labelled.
    pub fn label_layout(&self) -> Option<&LabelLayout> {
        self.labels.as_ref().map(|l| &l.layout)
    }

    /// The OPRF key's bytes, for tests that look for it where it must not be.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn key_bytes(&self) -> Option<[u8; 32]> {
        self.oprf.as_ref().map(|k| k.scalar().to_bytes())
    }

    /// Edits the item ids of one bin in memory, for tests that need a database whose
    /// manifest lies (the next save writes it with a valid checksum).
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn tamper_bin(&mut self, index: usize, bundle: usize, bin: usize, f: impl FnOnce(&mut Vec<u32>)) {
        let b = &mut self.indices[index][bundle];
        f(&mut b.bins[bin]);
        b.saved = None;
        b.rebuild = true;
    }

    /// Drops the coefficient copies once the database is saved (memory then is the
    /// plaintexts').
    pub fn drop_coefficients(&mut self) {
        self.indices.iter_mut().flatten().for_each(|b| b.coeffs = None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> UnbalancedParams {
        crate::protocols::unbalanced::params::small_test_params()
    }

    fn keys(prefix: &str, range: std::ops::Range<u32>) -> Vec<Vec<u8>> {
        range.map(|i| format!("{prefix}{i}").into_bytes()).collect()
    }

    /// The bundle count refused before a build's OPRF is one that real builds reach.
    #[test]
    fn builds_fill_at_least_the_likely_bundles_per_index() {
        let p = params();
        for n in [300u32, 3000, 20000] {
            let db = SenderDb::build(&keys("b", 0..n), p.clone(), "t").unwrap();
            let likely = p.likely_bundles_per_index(n as usize);
            assert!(likely > p.min_bundles_per_index(n as usize) || n < 1000, "{n}: {likely}");
            // The argument's steps on the built database: its mean bin load, over B, is
            // at most the fullest index's bundles, and the estimate is at most that
            // (and not far below it).
            let slots: usize = db.indices.iter().flatten().flat_map(|b| &b.bins).map(Vec::len).sum();
            let (table, b) = (p.table_params.table_size, p.table_params.max_items_per_bin);
            let from_mean = slots.div_ceil(table * b);
            assert!(db.info.max_bundles_per_index >= from_mean, "{n}: {} < {from_mean}", db.info.max_bundles_per_index);
            assert!(likely <= from_mean && likely + 1 >= from_mean, "{n}: likely {likely}, from the mean {from_mean}");
        }
    }

    /// `auto`'s estimate of the fullest index's bundles is what placing these (fixed)
    /// items fills, with clashes on felts rare (20-bit felts, B = 32) and common (six
    /// 15-bit felts, B = 120: k·B²/2^16 ≈ 1.3 clashes expected as a bin fills), over a
    /// few set sizes. Without its clash term it is one short at 2^15 items with clashes
    /// common (2 for 3; checked).
    #[test]
    fn the_expected_bundles_are_what_placing_fills() {
        let set = |t: u64, bins: usize, b: usize, felts: usize| {
            let powers: Vec<usize> = (1..=b).collect();
            UnbalancedParams::from_json(&format!(
                r#"{{"table_params":{{"hash_func_count":3,"table_size":{bins},"max_items_per_bin":{b}}},
                    "item_params":{{"felts_per_item":{felts}}},
                    "query_params":{{"ps_low_degree":0,"query_powers":{powers:?}}},
                    "seal_params":{{"poly_modulus_degree":4096,"coeff_modulus_bits":[42,32],"plain_modulus":{t}}}}}"#
            ))
            .unwrap()
        };
        let (rare, common) = (set(2056193, 1024, 32, 4), set(40961, 682, 120, 6));
        for (p, n, want) in [(&rare, 1u32 << 14, 3), (&rare, 1 << 16, 8), (&common, 1 << 15, 3), (&common, 1 << 17, 7)]
        {
            let items: Vec<Digest> = (0..n).map(|i| *blake3::hash(&i.to_be_bytes()).as_bytes()).collect();
            let layout = Layouts::of(p, &items, None);
            let filled = place_index(p, 0, items.len(), &layout).unwrap().len();
            assert_eq!(filled, want, "{n} items: the placement changed");
            assert_eq!(
                p.expected_bundles_per_index(n as usize),
                filled,
                "{n} items, B = {}",
                p.table_params.max_items_per_bin
            );
        }
    }

    /// Every bundle's coefficients after point-by-point edits equal interpolating its
    /// bins anew, and edits were applied (not silently rebuilt).
    #[test]
    fn edited_bundles_equal_interpolating_anew() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.db");
        let sender = keys("s", 0..2500);
        let labels: Vec<Vec<u8>> = sender.iter().map(|k| [b"v0:", &k[..]].concat()).collect();
        let mut db = SenderDb::build_labelled(&sender, &labels, vec!["l".into()], params(), "t").unwrap();
        db.save(&path).unwrap();
        let mut db = SenderDb::load_for_update(&path).unwrap();
        let added = keys("n", 0..200);
        let relabel = keys("s", 100..140);
        let ins = [added, relabel].concat();
        let new_labels: Vec<Vec<u8>> = ins.iter().map(|k| [b"v1:", &k[..5.min(k.len())]].concat()).collect();
        let before = db.info.bundles;
        let st = db.insert(&ins, Some(&new_labels)).unwrap();
        assert_eq!(st.bundles_new, st.bundles_total - before, "only new bundles are interpolated anew: {st:?}");
        assert!(st.bundles_touched > st.bundles_new, "{st:?}");
        let st = db.remove(&keys("s", 1000..1300)).unwrap();
        assert!(st.bundles_touched > 0 && st.bundles_new == 0, "{st:?}");
        let parts = db.labels.as_ref().unwrap().layout.parts;
        for b in db.indices.iter().flatten().filter(|b| b.coeffs.is_some()) {
            let anew = interpolate_bundle(&db.params, parts, &b.bins, &db.items, &db.labels).unwrap();
            assert!(b.coeffs.as_ref().unwrap() == &anew, "an edited bundle differs from interpolating it anew");
        }
        // Applying the same edits twice cannot fit: the second add of a point is refused.
        let b = db.indices.iter().flatten().find(|b| b.coeffs.is_some()).unwrap();
        let (bin, id) = b.bins.iter().enumerate().find_map(|(i, ids)| ids.first().map(|&id| (i, id))).unwrap();
        let (mut bins, mut felts) = (Vec::new(), Vec::new());
        locate(&db.params, &db.items[id as usize], &mut bins, &mut felts);
        let values = SenderDb::label_felts(&db.labels, &db.params, id);
        let edit = Edit { bin: bin as u32, add: true, felts, values };
        let mut coeffs = b.coeffs.clone().unwrap();
        assert!(apply_edits(&db.params, parts, &[edit], &mut coeffs).is_none());
    }

    /// Bundle indices placed in parallel, with each bin's first open bundle remembered,
    /// give exactly the bundles of the rule applied item by item: the first bundle whose
    /// bin has room and no equal felt at the same position, scanned from the first.
    #[test]
    fn placing_indices_in_parallel_is_the_rule_item_by_item() {
        // 15-bit felts, 8 per item, 2 bundle indices: equal felts in a bin are common.
        let p = UnbalancedParams::from_json(
            r#"{"table_params":{"hash_func_count":3,"table_size":1024,"max_items_per_bin":8},
                "item_params":{"felts_per_item":8},
                "query_params":{"ps_low_degree":0,"query_powers":[1,2,3,4,5,6,7,8]},
                "seal_params":{"poly_modulus_degree":4096,"coeff_modulus_bits":[42,36,31],"plain_modulus":40961}}"#,
        )
        .unwrap();
        let items: Vec<Digest> = (0..6000u32).map(|i| *blake3::hash(&i.to_le_bytes()).as_bytes()).collect();
        let (bpb, cap) = (p.bins_per_bundle(), p.table_params.max_items_per_bin);
        let layout = Layouts::of(&p, &items, None);
        let mut want: Vec<Vec<Vec<Vec<u32>>>> = vec![Vec::new(); p.bundle_indices()];
        let mut clashes = 0;
        for id in 0..items.len() as u32 {
            for &bin in layout.bins(id) {
                let (bundles, lb) = (&mut want[bin as usize / bpb], bin as usize % bpb);
                let fits = |ids: &Vec<u32>| {
                    ids.len() < cap
                        && ids.iter().all(|&o| layout.felts(o).iter().zip(layout.felts(id)).all(|(a, b)| a != b))
                };
                clashes += bundles.iter().filter(|b| b[lb].len() < cap && !fits(&b[lb])).count();
                match bundles.iter().position(|b| fits(&b[lb])) {
                    Some(j) => bundles[j][lb].push(id),
                    None => {
                        bundles.push(vec![Vec::new(); bpb]);
                        bundles.last_mut().unwrap()[lb].push(id);
                    }
                }
            }
        }
        let got: Vec<Vec<Vec<Vec<u32>>>> = (0..p.bundle_indices())
            .into_par_iter()
            .map(|bi| place_index(&p, bi, items.len(), &layout).unwrap().into_iter().map(|b| b.bins).collect())
            .collect();
        assert!(want.len() == 2 && want.iter().all(|bundles| bundles.len() > 2), "several bundles at each index");
        assert!(clashes > 10, "bins with room passed over for an equal felt: {clashes}");
        assert!(got == want, "the placement differs from the rule applied item by item");
    }
}
