//! The protocol registry as Python sees it: what each protocol is
//! ([`protocol_spec`]), which one a database or a judge serves ([`protocol_bringing`]),
//! and the default ([`setwise::protocols::registry::DEFAULT`], `DEFAULT_PROTOCOL`), so
//! the Python layer asks rather than naming protocols.

use crate::errors::input_error;
use crate::run::{parse, role_of};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use setwise::Role;
use setwise::error::UnknownName;
use setwise::protocols::registry::{self, ALL};
use setwise::protocols::spec::Takes;
use setwise::protocols::{Operation, Spec};

/// The name of the protocol whose `role` brings `what` (`database`, `judge`: what the
/// registry's `Takes` calls `a database`, `a judge's key and policy`) to `operation`:
/// the protocol a database or a judge serves.
#[pyfunction]
pub fn protocol_bringing(what: &str, operation: &str, role: &str) -> PyResult<&'static str> {
    let (operation, role): (Operation, Role) = (parse(operation)?, role_of(role)?);
    let takes = match what {
        "database" => Takes::Database,
        "judge" => Takes::Judge,
        other => return Err(input_error(format!("what a role brings: database or judge, not {other:?}"))),
    };
    ALL.iter()
        .find(|s| s.operations.contains(&operation) && s.takes(operation, role) == takes)
        .map(|s| s.name)
        .ok_or_else(|| input_error(format!("no protocol's {role} brings {} to {operation}", takes.name())))
}

/// What the protocol `name` is: its `name`, `operations`, the operations it stages
/// (`staged`), whether it stages by steps of its own (`own_stages`: on any storage Spark
/// writes) rather than by replay, its `options`, and whether it is the `default`.
#[pyfunction]
pub fn protocol_spec<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyDict>> {
    let spec = Spec::named(name)
        .ok_or_else(|| input_error(UnknownName::one_of("protocol", name, ALL.iter().map(|s| s.name)).to_string()))?;
    let names = |ops: &[Operation]| ops.iter().map(|o| o.name()).collect::<Vec<_>>();
    let d = PyDict::new(py);
    d.set_item("name", spec.name)?;
    d.set_item("operations", names(spec.operations))?;
    d.set_item("staged", names(spec.staged))?;
    d.set_item("own_stages", spec.own_stages)?;
    d.set_item("options", spec.options.iter().map(|o| o.name).collect::<Vec<_>>())?;
    d.set_item("default", std::ptr::eq(spec, registry::DEFAULT))?;
    Ok(d)
}
