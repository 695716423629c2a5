//! DH-PSI message by message (`setwise::protocols::ecdh::steps`): the caller moves the
//! bytes itself, and the receiver's state pickles so a step can run in another process.

use crate::errors::{input_error, to_py};
use crate::keys::Keys;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use setwise::Operation;
use setwise::protocols::Outcome;
use setwise::protocols::ecdh::messages::{Request, Response};
use setwise::protocols::ecdh::steps::{self, ReceiverState};
use setwise::wire::msg::Message;

fn operation(op: &str) -> PyResult<Operation> {
    op.parse().map_err(|e: setwise::error::UnknownName| input_error(e.to_string()))
}

/// The receiver's side of DH-PSI between its request and the sender's response. It holds
/// the receiver's secret key: pickle it only to storage the receiver controls.
#[pyclass(module = "setwise._setwise")]
pub struct EcdhReceiver {
    state: Option<ReceiverState>,
}

#[pymethods]
impl EcdhReceiver {
    /// Step 1: a fresh state and the request (bytes) for `keys` (`op`: intersection or
    /// cardinality).
    #[staticmethod]
    #[pyo3(signature = (keys, op="intersection"))]
    fn request<'py>(py: Python<'py>, keys: &Keys, op: &str) -> PyResult<(Self, Bound<'py, PyBytes>)> {
        let op = operation(op)?;
        let store = keys.store.clone();
        let (state, request) = py.detach(|| steps::request(op, &store.items())).map_err(to_py)?;
        Ok((Self { state: Some(state) }, PyBytes::new(py, &request.encode())))
    }

    /// Step 3: the result from the sender's response: the matching item indices
    /// (intersection) or their number (cardinality). The state is used up.
    fn finish(&mut self, py: Python<'_>, response: &[u8]) -> PyResult<Py<PyAny>> {
        let items = self.state.as_ref().ok_or_else(|| input_error("this receiver state has already finished"))?.items();
        // A damaged response leaves the state as it was, for the right response later.
        let response = py.detach(|| Response::from_frame(response, items)).map_err(to_py)?;
        let state = self.state.take().expect("checked above");
        let outcome = py.detach(|| steps::finish(state, &response)).map_err(to_py)?;
        Ok(match outcome {
            Outcome::Intersection(items) => items.into_pyobject(py)?.into_any().unbind(),
            Outcome::Cardinality(c) => c.into_pyobject(py)?.into_any().unbind(),
            other => return Err(input_error(format!("unexpected outcome {other:?}"))),
        })
    }

    /// The state as bytes (its secret key included), for pickling.
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let state = self.state.as_ref().ok_or_else(|| input_error("this receiver state has already finished"))?;
        Ok(PyBytes::new(py, &state.to_bytes()))
    }

    /// A state saved with `to_bytes`.
    #[staticmethod]
    fn from_bytes(bytes: &[u8]) -> PyResult<Self> {
        Ok(Self { state: Some(ReceiverState::from_bytes(bytes).map_err(to_py)?) })
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyBytes>,))> {
        let from_bytes = slf.get_type().getattr("from_bytes")?;
        Ok((from_bytes, (slf.borrow().to_bytes(slf.py())?,)))
    }
}

/// Step 2, the sender: the response (bytes) to a receiver's `request` from the sender's
/// `keys`; `op` is what the sender agrees to.
#[pyfunction]
#[pyo3(signature = (keys, request, op="intersection"))]
pub fn ecdh_respond<'py>(py: Python<'py>, keys: &Keys, request: &[u8], op: &str) -> PyResult<Bound<'py, PyBytes>> {
    let op = operation(op)?;
    let store = keys.store.clone();
    let response = py
        .detach(|| Request::from_frame(request, ()).and_then(|r| steps::respond(op, &store.items(), &r)))
        .map_err(to_py)?;
    Ok(PyBytes::new(py, &response.encode()))
}
