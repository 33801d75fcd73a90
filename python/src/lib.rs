//! `bpfemu._native`, the Rust half of the `bpfemu` Python module: an XDP program loaded,
//! verified and run through the root crate's one way in ([`bpfemu::prepare::Prepared`] and
//! [`bpfemu::replay::Replayer`]), with its maps read and written as the syscall side does.
//!
//! It hands Python plain values (dicts, lists, bytes); the pure-Python package
//! (`python/bpfemu/__init__.py`) shapes them into the classes users see (`XdpAction`,
//! `RunResult`, the maps as mutable mappings typed by BTF).

mod errors;
mod maps;
mod program;
mod values;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<program::Program>()?;
    m.add_function(wrap_pyfunction!(program::load, m)?)?;
    Ok(())
}
