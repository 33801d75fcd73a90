//! Values handed to Python: JSON documents (verdicts, typed map entries, summaries) as
//! Python objects, and one packet's result as a dict.

use bpfemu::replay::{PacketResult, events};
use bpfemu::vm::xdp::{RedirectTarget, XdpOutcome};
use pyo3::IntoPyObjectExt;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use serde_json::Value;

/// A JSON value as the Python object `json.loads` would give.
pub fn json_to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    match value {
        Value::Null => Ok(py.None().into_bound(py)),
        Value::Bool(b) => b.into_bound_py_any(py),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => u.into_bound_py_any(py),
            (None, Some(i)) => i.into_bound_py_any(py),
            _ => n.as_f64().unwrap_or(f64::NAN).into_bound_py_any(py),
        },
        Value::String(s) => s.into_bound_py_any(py),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(json_to_py(py, item)?)?;
            }
            list.into_bound_py_any(py)
        }
        Value::Object(fields) => {
            let dict = PyDict::new(py);
            for (key, item) in fields {
                dict.set_item(key, json_to_py(py, item)?)?;
            }
            dict.into_bound_py_any(py)
        }
    }
}

/// One packet's result: `index`, `cpu`, and either `error` (why the kernel refuses the
/// packet or the run stopped) or what the run gave, as `bpfemu replay --json` shows it, with
/// bytes as bytes.
pub fn packet_result<'py>(py: Python<'py>, result: &PacketResult) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("index", result.index)?;
    dict.set_item("cpu", result.cpu)?;
    match &result.outcome {
        Ok(outcome) => add_outcome(&dict, outcome)?,
        Err(why) => dict.set_item("error", why)?,
    }
    Ok(dict)
}

fn add_outcome(dict: &Bound<'_, PyDict>, o: &XdpOutcome) -> PyResult<()> {
    let py = dict.py();
    let meta_len = o.meta_len.min(o.data_out.len());
    dict.set_item("retval", o.retval)?;
    dict.set_item("action", o.action.name().as_ref())?;
    // The frame as it leaves the program starts at `data`; the metadata stays behind.
    dict.set_item("data", PyBytes::new(py, &o.data_out[meta_len..]))?;
    dict.set_item("meta", PyBytes::new(py, &o.data_out[..meta_len]))?;
    dict.set_item("insns", o.insns_executed)?;
    dict.set_item("printk", o.printk.clone())?;
    let redirect = match &o.redirect {
        Some(target) => redirect(py, target)?.into_any(),
        None => py.None().into_bound(py),
    };
    dict.set_item("redirect", redirect)?;
    let records = PyList::empty(py);
    for event in events(o) {
        let record = PyDict::new(py);
        record.set_item("map", &event.map)?;
        record.set_item("slot", event.slot)?;
        record.set_item("data", PyBytes::new(py, &event.data))?;
        records.append(record)?;
    }
    dict.set_item("records", records)
}

/// Where an `XDP_REDIRECT` goes: `text` as `bpfemu replay` prints it, `kind` (`ifindex`,
/// `devmap`, `cpumap`, `xskmap`) and the fields of that kind.
fn redirect<'py>(py: Python<'py>, target: &RedirectTarget) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("text", target.to_string())?;
    let (kind, map, key, ifindex) = match target {
        RedirectTarget::Ifindex(i) => ("ifindex", None, None, Some(*i)),
        RedirectTarget::Dev {
            map,
            key,
            ifindex,
            broadcast,
            exclude_ingress,
        } => {
            dict.set_item("broadcast", broadcast)?;
            dict.set_item("exclude_ingress", exclude_ingress)?;
            ("devmap", Some(map.to_string()), Some(*key), *ifindex)
        }
        RedirectTarget::Cpu { map, cpu } => ("cpumap", Some(map.to_string()), Some(*cpu), None),
        RedirectTarget::Xsk { map, queue } => ("xskmap", Some(map.to_string()), Some(*queue), None),
    };
    dict.set_item("kind", kind)?;
    dict.set_item("map", map)?;
    dict.set_item("key", key)?;
    dict.set_item("ifindex", ifindex)?;
    Ok(dict)
}
