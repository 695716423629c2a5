//! Authorised PSI from Python: a judge's key and allow-list, and a client's credentials.

use crate::errors::{input_error, to_py};
use crate::keys::Keys;
use pyo3::prelude::*;
use setwise::protocols::authorized::{self, AllowList, Credentials, JudgeConfig, JudgeKey, Mode};
use std::path::PathBuf;
use std::sync::Arc;

/// What a judge needs in every session.
pub struct JudgeState {
    /// Its key pair.
    pub key: JudgeKey,
    /// What it signs for whom.
    pub policy: AllowList,
    /// Partial fraction and strictness.
    pub config: JudgeConfig,
}

/// A judge: its key (loaded from `secret_key`, or created there 0600) and its
/// allow-list (for every client, or per client when `clients` names each row's client).
#[pyclass(module = "setwise._setwise", name = "Judge", frozen)]
pub struct PyJudge {
    /// Shared with the sessions it serves.
    pub state: Arc<JudgeState>,
    /// Key columns of the allow-list (clients must join as many).
    pub key_columns: usize,
}

#[pymethods]
impl PyJudge {
    #[new]
    #[pyo3(signature = (allow, secret_key, clients=None, fraction=0.1, strict=false))]
    fn new(
        allow: &Keys,
        secret_key: PathBuf,
        clients: Option<Vec<Option<String>>>,
        fraction: f64,
        strict: bool,
    ) -> PyResult<Self> {
        let config = JudgeConfig::new(fraction, strict).map_err(to_py)?;
        let key = JudgeKey::load_or_create(&secret_key).map_err(to_py)?;
        let store = &allow.store;
        let policy = match clients {
            Some(clients) => {
                if clients.len() != store.row_items().len() {
                    return Err(input_error(format!(
                        "clients: {} values for {} rows",
                        clients.len(),
                        store.row_items().len()
                    )));
                }
                let pairs = store.row_items().zip(&clients).filter_map(|(item, client)| {
                    Some((client.as_deref()?.as_bytes(), store.item(item?).expect("a row's item exists")))
                });
                AllowList::per_client(pairs)
            }
            None => AllowList::new(store.items()),
        };
        let state = JudgeState { key, policy, config };
        Ok(Self { state: Arc::new(state), key_columns: allow.key_columns })
    }

    /// The public key (hex) servers check signatures with.
    #[getter]
    fn public_key(&self) -> String {
        authorized::public_key_hex(self.state.key.public())
    }

    /// A short fingerprint of the public key, for logs.
    #[getter]
    fn fingerprint(&self) -> String {
        authorized::key_fingerprint(self.state.key.public())
    }
}

/// A client's signatures from the judge, bound to its identity. Partial credentials hold
/// a secret: save them only where the client alone can read.
#[pyclass(module = "setwise._setwise", name = "Credentials", frozen)]
pub struct PyCredentials {
    /// The credentials.
    pub credentials: Arc<Credentials>,
}

#[pymethods]
impl PyCredentials {
    /// Reads and checks a credentials file.
    #[staticmethod]
    fn load(path: PathBuf) -> PyResult<Self> {
        Ok(Self { credentials: Arc::new(Credentials::load(&path).map_err(to_py)?) })
    }

    /// Writes the credentials file atomically, readable by its owner only.
    fn save(&self, path: PathBuf) -> PyResult<()> {
        self.credentials.save(&path).map_err(to_py)
    }

    /// The client identity the signatures are bound to.
    #[getter]
    fn client_id(&self) -> String {
        String::from_utf8_lossy(&self.credentials.client_id).into_owned()
    }

    /// `full` or `partial`.
    #[getter]
    fn mode(&self) -> &'static str {
        match self.credentials.mode {
            Mode::Full => "full",
            Mode::Partial => "partial",
        }
    }

    /// The judge's public key (hex).
    #[getter]
    fn judge_key(&self) -> String {
        authorized::public_key_hex(&self.credentials.judge_pk)
    }

    /// Items signed.
    fn __len__(&self) -> usize {
        self.credentials.entries.len()
    }
}
