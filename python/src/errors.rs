//! setwise's errors as Python exceptions: `Error` and its subclasses `InputError` (this
//! side's input, options or files), `PeerError` (the peer deviated, aborted or wants
//! another job) and `NetworkError` (the connection, TLS or a timeout).

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(_setwise, Error, PyException, "Any setwise error.");
create_exception!(_setwise, InputError, Error, "This side's input, options or files are wrong.");
create_exception!(_setwise, PeerError, Error, "The peer deviated from the protocol, aborted, or runs another job.");
create_exception!(_setwise, NetworkError, Error, "The connection failed: network, TLS or a timeout.");

/// An `InputError` with `msg`.
pub fn input_error(msg: impl Into<String>) -> PyErr {
    InputError::new_err(msg.into())
}

/// The message with each cause once, as the CLI prints it.
fn explain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let c_text = c.to_string();
        if !text.contains(&c_text) {
            text = format!("{text}: {c_text}");
        }
        cause = c.source();
    }
    text
}

/// The exception for a library error.
pub fn to_py(e: setwise::Error) -> PyErr {
    let msg = explain(&e);
    match e {
        setwise::Error::Net { .. } => NetworkError::new_err(msg),
        e if e.kind() == setwise::error::ErrorKind::Network => NetworkError::new_err(msg),
        e if e.is_local() => match e.field() {
            // The parameter or piece of the run at fault, for a caller to point at (`err.field`).
            Some(field) => {
                let err = InputError::new_err(msg);
                Python::attach(|py| err.value(py).setattr("field", field)).map(|()| err).unwrap_or_else(|e| e)
            }
            None => InputError::new_err(msg),
        },
        _ => PeerError::new_err(msg),
    }
}

/// The exception for a transport error outside a run (connecting, listening).
pub fn net_to_py(phase: &'static str, e: setwise::net::NetError) -> PyErr {
    to_py(setwise::Error::Net { phase, source: e })
}
