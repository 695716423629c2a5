//! The unbalanced sender's database from Python: built from keys and label columns,
//! saved, loaded, updated in place and served (through [`crate::run`]).

use crate::errors::{input_error, to_py};
use crate::keys::{Keys, Store};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use setwise::protocols::unbalanced::db::Open;
use setwise::protocols::unbalanced::{BuildInto, SenderDb, auto, encode_label};
use std::path::PathBuf;
use std::sync::{Arc, RwLock, RwLockWriteGuard};

/// One label column per entry: its name and one value per input row (None: empty).
type LabelColumns = Vec<(String, Vec<Option<String>>)>;

/// The serialised label of each distinct item, from the label columns' values on the
/// item's first row (as the CLI takes them from a CSV file).
fn item_labels(store: &Store, columns: &LabelColumns) -> PyResult<Vec<Vec<u8>>> {
    let rows = store.row_items().len();
    if let Some((name, values)) = columns.iter().find(|(_, v)| v.len() != rows) {
        return Err(input_error(format!("label column {name} has {} rows, the keys {rows}", values.len())));
    }
    Ok(store
        .first_rows()
        .iter()
        .map(|&row| {
            let fields: Vec<&str> = columns.iter().map(|(_, v)| v[row].as_deref().unwrap_or("")).collect();
            encode_label(&fields)
        })
        .collect())
}

/// A sender database: its OPRF key and the encoded polynomials of its items (and
/// labels). Queries share it; an update or a save waits for the queries under way and
/// holds back new ones until it is done.
#[pyclass(module = "setwise._setwise", name = "SenderDb", frozen)]
pub struct PyDb {
    /// The database, shared with the sessions serving it.
    pub db: Arc<RwLock<SenderDb>>,
}

impl PyDb {
    /// The database alone: waits for queries under way to end (queries arriving
    /// meanwhile wait for the change), so a served database can be updated live.
    fn alone(&self) -> PyResult<RwLockWriteGuard<'_, SenderDb>> {
        Ok(self.db.write().unwrap_or_else(|e| e.into_inner()))
    }
}

#[pymethods]
impl PyDb {
    /// Builds a database from `keys`, with `labels` (one column per label field) if
    /// given, under `params` (`auto`, a preset name or a JSON file) for queries of up to
    /// `receiver_max` items, `auto` charging bytes at `link` (`auto::Link::parse`) and
    /// assuming the database serves on a machine like this one; with `key_file` its OPRF
    /// key is kept apart (0600). With `out`, built into that directory as `setwise db
    /// build` does (`SenderDb::build_into`: bundles written as they are computed, a
    /// killed build continued with `resume`, on the parameters it started with).
    #[staticmethod]
    #[pyo3(signature = (keys, labels, params="auto", receiver_max=256, key_file=None, link="1000", out=None, resume=false))]
    #[allow(clippy::too_many_arguments)] // Python keyword arguments
    fn build(
        py: Python<'_>,
        keys: &Keys,
        labels: LabelColumns,
        params: &str,
        receiver_max: usize,
        key_file: Option<PathBuf>,
        link: &str,
        out: Option<PathBuf>,
        resume: bool,
    ) -> PyResult<Self> {
        let link = auto::Link::parse(link).map_err(to_py)?;
        let store = keys.store.clone();
        let kc = keys.key_columns;
        let db = py.detach(|| {
            if let (Some(dir), false) = (&out, resume) {
                SenderDb::refuse_unfinished_build(dir).map_err(to_py)?;
            }
            let items = store.items();
            let records = if labels.is_empty() { None } else { Some(item_labels(&store, &labels)?) };
            let label_bytes = records.iter().flatten().map(Vec::len).max().unwrap_or(0);
            let unfinished = out.as_deref().filter(|_| resume).and_then(SenderDb::unfinished_build);
            let (params, name) = match unfinished {
                Some(found) => found,
                None => {
                    let r = auto::resolve(params, items.len(), receiver_max, label_bytes, auto::Serving::here(link))
                        .map_err(to_py)?;
                    (r.params, r.name)
                }
            };
            if let Some(dir) = &out {
                let to = BuildInto { dir, resume, key_columns: kc, key_file: key_file.as_deref() };
                let names = labels.iter().map(|(n, _)| n.clone()).collect();
                let labelled = records.as_deref().map(|r| (r, names));
                return SenderDb::build_into(to, &items, labelled, params, &name, None).map_err(to_py);
            }
            let mut db = match records {
                None => SenderDb::build(&items, params, &name),
                Some(records) => {
                    let names = labels.iter().map(|(n, _)| n.clone()).collect();
                    SenderDb::build_labelled(&items, &records, names, params, &name)
                }
            }
            .map_err(to_py)?
            .with_key_columns(kc);
            if let Some(k) = &key_file {
                db.keep_key_apart(k).map_err(to_py)?;
            }
            Ok::<_, PyErr>(db)
        })?;
        Ok(Self { db: Arc::new(RwLock::new(db)) })
    }

    /// Loads the database directory `path` to serve and update it (`compact`: keep only
    /// the coefficients and encode per query, with less memory; `memory`: hold at most
    /// that many bytes of plaintexts, the rest read per query from an encoded copy on disk).
    #[staticmethod]
    #[pyo3(signature = (path, key_file=None, compact=false, memory=None))]
    fn load(
        py: Python<'_>,
        path: PathBuf,
        key_file: Option<PathBuf>,
        compact: bool,
        memory: Option<usize>,
    ) -> PyResult<Self> {
        let how = match (compact, memory) {
            (true, Some(_)) => return Err(PyValueError::new_err("give compact or memory, not both")),
            (true, None) => Open::Compact,
            (false, Some(bytes)) => Open::ServeWithin(bytes),
            (false, None) => Open::Serve,
        };
        let db = py.detach(|| SenderDb::open(&path, how, key_file.as_deref())).map_err(to_py)?;
        Ok(Self { db: Arc::new(RwLock::new(db)) })
    }

    /// Saves the database as the directory `path` (created 0700; only changed bundles
    /// are written, the manifest last and atomically).
    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        py.detach(|| self.alone()?.save(&path).map_err(to_py))
    }

    /// Adds `keys` (or gives existing ones new labels); a JSON summary of the change.
    fn insert(&self, py: Python<'_>, keys: &Keys, labels: LabelColumns) -> PyResult<String> {
        let store = keys.store.clone();
        let kc = keys.key_columns;
        let stats = py.detach(|| {
            let mut db = self.alone()?;
            same_keys(&db, kc)?;
            let records = if labels.is_empty() { None } else { Some(item_labels(&store, &labels)?) };
            db.insert(&store.items(), records.as_deref()).map_err(to_py)
        })?;
        Ok(serde_json::to_string(&stats).expect("stats serialise"))
    }

    /// Removes `keys`; a JSON summary of the change.
    fn remove(&self, py: Python<'_>, keys: &Keys) -> PyResult<String> {
        let store = keys.store.clone();
        let kc = keys.key_columns;
        let stats = py.detach(|| {
            let mut db = self.alone()?;
            same_keys(&db, kc)?;
            db.remove(&store.items()).map_err(to_py)
        })?;
        Ok(serde_json::to_string(&stats).expect("stats serialise"))
    }

    /// Moves the OPRF key to `key_file` (0600); the next save leaves none in the directory.
    fn keep_key_apart(&self, key_file: PathBuf) -> PyResult<()> {
        self.alone()?.keep_key_apart(&key_file).map_err(to_py)
    }

    /// Sizes, parameters and memory as JSON (`setwise db info`'s facts).
    fn info(&self) -> String {
        let db = self.db.read().unwrap_or_else(|e| e.into_inner());
        let mut info = serde_json::to_value(db.info()).expect("info serialises");
        info["key_columns"] = db.key_columns().into();
        info["key_kept_apart"] = db.key_kept_apart().into();
        info["label_columns"] = db.label_layout().map_or(Vec::new(), |l| l.columns.clone()).into();
        info.to_string()
    }

    /// Distinct items in the database.
    fn __len__(&self) -> usize {
        self.db.read().unwrap_or_else(|e| e.into_inner()).info().sender_size
    }
}

/// Refuses keys joined from another number of columns than the database's.
fn same_keys(db: &SenderDb, key_columns: usize) -> PyResult<()> {
    if db.key_columns() != key_columns {
        return Err(input_error(format!("the database's keys join {} columns, these {key_columns}", db.key_columns())));
    }
    Ok(())
}
