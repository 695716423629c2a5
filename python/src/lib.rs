//! `setwise._setwise`: the native half of the `setwise` Python package. Every run goes
//! through the library's one entry point (`setwise::run`); the typed Python layer in
//! `python/setwise/` turns pandas and Arrow inputs into [`keys::Keys`] and results into
//! Python objects.

mod authorized;
mod cluster;
mod db;
mod errors;
mod keys;
mod registry;
mod run;
mod staged;
mod steps;
mod worker;

use pyo3::prelude::*;

#[pymodule]
fn _setwise(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<errors::Error>())?;
    m.add("InputError", py.get_type::<errors::InputError>())?;
    // `field` names the parameter at fault when parameters are invalid; None otherwise.
    py.get_type::<errors::InputError>().setattr("field", py.None())?;
    m.add("PeerError", py.get_type::<errors::PeerError>())?;
    m.add("NetworkError", py.get_type::<errors::NetworkError>())?;
    m.add_class::<keys::Keys>()?;
    m.add_class::<steps::EcdhReceiver>()?;
    m.add_class::<db::PyDb>()?;
    m.add_class::<authorized::PyJudge>()?;
    m.add_class::<authorized::PyCredentials>()?;
    m.add_function(wrap_pyfunction!(run::run, m)?)?;
    m.add_function(wrap_pyfunction!(run::serve, m)?)?;
    m.add_function(wrap_pyfunction!(steps::ecdh_respond, m)?)?;
    m.add_class::<staged::StagedPlan>()?;
    m.add_class::<cluster::StagedDriver>()?;
    m.add_class::<cluster::StagedWorker>()?;
    m.add_function(wrap_pyfunction!(cluster::staged_read_rows, m)?)?;
    m.add_function(wrap_pyfunction!(cluster::staged_read_ids, m)?)?;
    m.add_function(wrap_pyfunction!(cluster::staged_exchange_read, m)?)?;
    m.add_function(wrap_pyfunction!(staged::staged_hello, m)?)?;
    m.add_function(wrap_pyfunction!(staged::staged_new_seed, m)?)?;
    m.add_function(wrap_pyfunction!(staged::staged_fingerprint, m)?)?;
    m.add_function(wrap_pyfunction!(staged::staged_fingerprint_combine, m)?)?;
    m.add_function(wrap_pyfunction!(staged::staged_read_marker, m)?)?;
    m.add_function(wrap_pyfunction!(staged::staged_seal_marker, m)?)?;
    m.add_function(wrap_pyfunction!(staged::staged_abort_note, m)?)?;
    m.add_function(wrap_pyfunction!(staged::staged_read_abort, m)?)?;
    m.add_function(wrap_pyfunction!(staged::staged_new_exchange_key, m)?)?;
    m.add_function(wrap_pyfunction!(staged::staged_exchange_key_fingerprint, m)?)?;
    m.add_function(wrap_pyfunction!(staged::staged_shown, m)?)?;
    m.add_function(wrap_pyfunction!(staged::staged_read_local, m)?)?;
    m.add_function(wrap_pyfunction!(staged::staged_write_local, m)?)?;
    m.add_function(wrap_pyfunction!(staged::staged_part_digest, m)?)?;
    m.add_function(wrap_pyfunction!(staged::staged_split_values, m)?)?;
    m.add_function(wrap_pyfunction!(staged::staged_count_matches, m)?)?;
    m.add_function(wrap_pyfunction!(registry::protocol_bringing, m)?)?;
    m.add_function(wrap_pyfunction!(registry::protocol_spec, m)?)?;
    m.add("DEFAULT_PROTOCOL", setwise::protocols::registry::DEFAULT.name)?;
    m.add("STAGED_DEFAULT_PROTOCOL", setwise::protocols::registry::STAGED_DEFAULT.name)?;
    m.add("PROTOCOLS", setwise::protocols::registry::ALL.iter().map(|s| s.name).collect::<Vec<_>>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
