//! The exceptions the module raises, each with the text the command line prints for the same
//! failure (without its `bpfemu: ` prefix).

use crate::values::json_to_py;
use bpfemu::vm::maps::Errno;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use serde_json::Value;

create_exception!(
    bpfemu,
    Error,
    PyException,
    "The base of every error bpfemu raises."
);
create_exception!(
    bpfemu,
    LoadError,
    Error,
    "An object, program, map file, FIB file or capture that cannot be loaded."
);
create_exception!(
    bpfemu,
    VerifierError,
    Error,
    "A program bpfemu's verifier rejects (as the kernel would refuse to load it) was asked to run."
);
create_exception!(
    bpfemu,
    RunError,
    Error,
    "A packet the kernel refuses, or a run that stopped (a memory fault, the instruction budget)."
);
create_exception!(
    bpfemu,
    MapError,
    Error,
    "A map operation the kernel answers with an errno."
);

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("LoadError", py.get_type::<LoadError>())?;
    m.add("VerifierError", py.get_type::<VerifierError>())?;
    m.add("RunError", py.get_type::<RunError>())?;
    m.add("MapError", py.get_type::<MapError>())?;
    Ok(())
}

/// A [`LoadError`] with the command line's one-line text of `error`.
pub fn load_error(error: &anyhow::Error) -> PyErr {
    LoadError::new_err(bpfemu::errors::render_error(error))
}

/// A [`VerifierError`] with the command line's text (the error at its source line, the
/// instruction, the refusal) and, as attributes, the parts of the rejection: `program`,
/// `message`, `note`, `insn`, `insn_text`, `file`, `line`, `column`, `source`.
pub fn verifier_error(py: Python<'_>, text: &str, rejected: &Value) -> PyErr {
    let error = VerifierError::new_err(text.to_owned());
    if let Err(e) = set_rejection(error.value(py), rejected) {
        return e;
    }
    error
}

fn set_rejection(error: &Bound<'_, pyo3::exceptions::PyBaseException>, v: &Value) -> PyResult<()> {
    let py = error.py();
    let source = v.get("source").unwrap_or(&Value::Null);
    let field = |value: Option<&Value>| json_to_py(py, value.unwrap_or(&Value::Null));
    error.setattr("program", field(v.get("name"))?)?;
    error.setattr("message", field(v.get("message"))?)?;
    error.setattr("note", field(v.get("note"))?)?;
    error.setattr("insn", field(v.get("insn"))?)?;
    error.setattr("insn_text", field(v.get("insn_text"))?)?;
    error.setattr("file", field(source.get("file"))?)?;
    error.setattr("line", field(source.get("line"))?)?;
    error.setattr("column", field(source.get("column"))?)?;
    error.setattr("source", field(source.get("text"))?)?;
    Ok(())
}

/// A [`MapError`] for `operation` on map `map` answered with `errno`; its `errno` attribute
/// holds the number, `map` the map's name.
pub fn map_error(py: Python<'_>, map: &str, operation: &str, errno: Errno) -> PyErr {
    let error = MapError::new_err(format!("map {map}: the {operation} fails with {errno}"));
    let value = error.value(py);
    if let Err(e) = value
        .setattr("errno", errno.0)
        .and_then(|()| value.setattr("map", map))
    {
        return e;
    }
    error
}
