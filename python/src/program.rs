//! `load` and the native `Program`: the object opened and its program picked as every command
//! does ([`Prepared`]), judged before anything runs, and run through a [`Replayer`].

use crate::errors::{LoadError, RunError, load_error, verifier_error};
use crate::values::{json_to_py, packet_result};
use bpfemu::jit::Engine;
use bpfemu::load_args::LoadArgs;
use bpfemu::pcap::{Packet, PcapReader};
use bpfemu::prepare::{Prepared, RefusalKind};
use bpfemu::replay::{PacketResult, ReplayOptions, Replayer, Summary};
use bpfemu::verify::{self, ProgramVerdict, Report};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// An XDP program loaded from an object, ready for packets unless the verifier rejects it.
/// Unsendable: its runtime (JIT code, map memory) stays on the thread that loaded it, which
/// the Python half enforces with an error before PyO3 would panic.
#[pyclass(unsendable, module = "bpfemu._native")]
pub struct Program {
    pub(crate) prepared: Arc<Prepared>,
    /// The runtime, when the program may run.
    pub(crate) replayer: Option<Replayer>,
    /// Why it may not: the command line's text and the rejected program's verdict (as
    /// `bpfemu verify --json` shows it).
    refused: Option<(String, Value)>,
    pub(crate) cpus: u32,
    /// Whether `record_types` types some map's records (`--record-type`).
    typed_records: bool,
    /// Packets run so far, which numbers the next one.
    packets_run: usize,
}

/// Loads `path` and picks its program, as `bpfemu replay` does (the options are its flags).
#[pyfunction]
#[pyo3(signature = (
    path, prog=None, maps=None, *, engine="jit", cpus=1, seed=0, fib=None, sockets=None,
    ifindex=1, rxq=None, no_verify=false, btf=None, map_sizes=None, record_types=None
))]
#[allow(clippy::too_many_arguments)] // Python's keyword arguments, each a command-line flag.
pub fn load(
    py: Python<'_>,
    path: PathBuf,
    prog: Option<String>,
    maps: Option<PathBuf>,
    engine: &str,
    cpus: u32,
    seed: u64,
    fib: Option<PathBuf>,
    sockets: Option<PathBuf>,
    ifindex: u32,
    rxq: Option<u32>,
    no_verify: bool,
    btf: Option<PathBuf>,
    map_sizes: Option<HashMap<String, u32>>,
    record_types: Option<HashMap<String, String>>,
) -> PyResult<Program> {
    let engine: Engine = engine.parse().map_err(PyValueError::new_err)?;
    if !(1..=256).contains(&cpus) {
        return Err(PyValueError::new_err(format!(
            "cpus={cpus}: a run has 1 to 256 CPUs"
        )));
    }
    let mut args = LoadArgs::default();
    args.object.map_sizes = map_sizes.unwrap_or_default().into_iter().collect();
    args.object.btf = btf;
    let opts = ReplayOptions {
        object: path,
        program: prog,
        engine,
        ifindex,
        rxq,
        cpus,
        seed,
        fib,
        sockets,
        maps,
        no_verify,
        record_types: record_types.unwrap_or_default().into_iter().collect(),
        load: args.options(),
        ..ReplayOptions::default()
    };
    let prepared = Prepared::open(&opts.object, opts.program.as_deref(), &opts.load)
        .map_err(|e| load_error(&anyhow::Error::from(e)))?;
    warn_about(py, &prepared)?;
    Program::admitted(Arc::new(prepared), &opts)
}

impl Program {
    /// The program as [`Prepared::admit`] lets it run: with its runtime, or (rejected by the
    /// verifier) with the refusal to raise when something would run. An engine that cannot
    /// run the program, or a runtime that cannot be built, fails the load.
    fn admitted(prepared: Arc<Prepared>, opts: &ReplayOptions) -> PyResult<Program> {
        let (replayer, refused) = match prepared.admit(opts.engine, opts.no_verify) {
            Ok(_) => {
                let replayer =
                    Replayer::with(prepared.clone(), opts).map_err(|e| load_error(&e))?;
                (Some(replayer), None)
            }
            Err(refusal) if refusal.kind == RefusalKind::Rejected => {
                (None, Some((refusal.text, rejected_program(&prepared))))
            }
            Err(refusal) => return Err(LoadError::new_err(refusal.text)),
        };
        Ok(Program {
            prepared,
            replayer,
            refused,
            cpus: opts.cpus,
            typed_records: !opts.record_types.is_empty(),
            packets_run: 0,
        })
    }
}

/// The loader's warnings about the object, as Python warnings (the command line prints them
/// on standard error).
fn warn_about(py: Python<'_>, prepared: &Prepared) -> PyResult<()> {
    let mut seen = std::collections::BTreeSet::new();
    let category = py.get_type::<pyo3::exceptions::PyUserWarning>();
    for warning in &prepared.object().warnings {
        if seen.insert(warning.as_str()) {
            let text = format!("{}: warning: {warning}", prepared.path().display());
            let text = std::ffi::CString::new(text.replace('\0', " "))?;
            PyErr::warn(py, &category, &text, 1)?;
        }
    }
    Ok(())
}

/// One packet's result for Python; with `typed_records`, its records typed as `record_types`
/// asks, by the same code as `replay --record-type` (under `formatted`).
fn result_dict<'py>(
    py: Python<'py>,
    replayer: &Replayer,
    typed_records: bool,
    result: &PacketResult,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = packet_result(py, result)?;
    if !typed_records {
        return Ok(dict);
    }
    let shown = replayer.packet_json(result);
    let events = shown["events"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    if let Some(records) = dict.get_item("records")? {
        for (i, event) in events.iter().enumerate() {
            if let Some(formatted) = event.get("formatted") {
                records
                    .get_item(i)?
                    .set_item("formatted", json_to_py(py, formatted)?)?;
            }
        }
    }
    Ok(dict)
}

/// The verdict of the program whose rejection refused the run, as `bpfemu verify --json`
/// shows it (the chosen program, or one it may tail-call).
fn rejected_program(prepared: &Prepared) -> Value {
    let object = prepared.object();
    let Some((index, verdict)) = prepared
        .verdicts()
        .iter()
        .find(|(_, v)| v.rejection().is_some())
    else {
        return Value::Null;
    };
    let report = Report {
        verdicts: vec![ProgramVerdict {
            program: &object.programs[*index],
            verdict: verdict.clone(),
            kernel: &object.kernel,
            explanation: None,
        }],
        not_verified: Vec::new(),
    };
    let name = prepared.path().display().to_string();
    verify::to_json(&name, &report, false, false)["programs"][0].take()
}

impl Program {
    /// The runtime, or the verifier's refusal as the command line says it.
    pub(crate) fn runnable(&mut self, py: Python<'_>) -> PyResult<&mut Replayer> {
        match (&mut self.replayer, &self.refused) {
            (Some(replayer), _) => Ok(replayer),
            (None, Some((text, rejected))) => Err(verifier_error(py, text.trim_end(), rejected)),
            (None, None) => Err(LoadError::new_err("the program has no runtime")),
        }
    }
}

#[pymethods]
impl Program {
    /// The program's (entry function's) name.
    #[getter]
    fn name(&self) -> &str {
        self.prepared.program_name()
    }

    /// Its ELF section.
    #[getter]
    fn section(&self) -> &str {
        &self.prepared.program().section
    }

    /// The object's path, as given.
    #[getter]
    fn path(&self) -> PathBuf {
        self.prepared.path().to_path_buf()
    }

    /// The virtual CPUs of the run.
    #[getter]
    fn cpus(&self) -> u32 {
        self.cpus
    }

    /// The program's verdict as `bpfemu verify --json --log-level N` gives it, with `text`
    /// (the error at its source line, as `bpfemu verify` prints it) and the log asked for.
    #[pyo3(signature = (log_level=0))]
    fn verify<'py>(&self, py: Python<'py>, log_level: u32) -> PyResult<Bound<'py, PyAny>> {
        if log_level > 2 {
            return Err(PyValueError::new_err(format!(
                "log_level={log_level}: the verifier log has levels 0, 1 and 2"
            )));
        }
        let object = self.prepared.object();
        let path = self.prepared.path().display().to_string();
        let report = verify::verify_object(object, Some(self.prepared.program_name()), log_level)
            .ok_or_else(|| LoadError::new_err(format!("{path}: no program to verify")))?;
        let Some(verdict) = report.verdicts.first() else {
            return Err(LoadError::new_err(format!(
                "{path}: no XDP program to verify"
            )));
        };
        let mut doc = verify::to_json(&path, &report, true, true)["programs"][0].take();
        doc["text"] = Value::String(verify::error_text(&path, verdict));
        json_to_py(py, &doc)
    }

    /// Runs one packet (its capture time `ts_ns`, for the program's clocks); a dict of what
    /// came out, or `RunError` when the kernel refuses the packet or the run stops.
    #[pyo3(signature = (data, ts_ns=0))]
    fn run<'py>(
        &mut self,
        py: Python<'py>,
        data: Vec<u8>,
        ts_ns: u64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let (index, typed_records) = (self.packets_run, self.typed_records);
        self.packets_run += 1;
        let replayer = self.runnable(py)?;
        let packet = Packet {
            index,
            ts_ns,
            orig_len: u32::try_from(data.len()).unwrap_or(u32::MAX),
            data,
        };
        let result = replayer.run(&packet);
        if let Err(why) = &result.outcome {
            return Err(RunError::new_err(why.clone()));
        }
        result_dict(py, replayer, typed_records, &result)
    }

    /// Every packet of a capture, as `bpfemu replay --json` runs them: a list of per-packet
    /// dicts (a packet the run could not finish has `error`) and the summary.
    fn replay<'py>(
        &mut self,
        py: Python<'py>,
        capture: PathBuf,
    ) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyAny>)> {
        let typed_records = self.typed_records;
        let replayer = self.runnable(py)?;
        let mut reader =
            PcapReader::open(&capture).map_err(|e| LoadError::new_err(e.to_string()))?;
        let results = PyList::empty(py);
        let mut summary = Summary::default();
        let start = Instant::now();
        while let Some(item) = reader.next_ref() {
            let packet = item.map_err(|e| {
                LoadError::new_err(format!(
                    "{e} ({} packets before it were replayed)",
                    summary.packets
                ))
            })?;
            let result = replayer.run_ref(&packet);
            summary.add(&result);
            results.append(result_dict(py, replayer, typed_records, &result)?)?;
        }
        summary.elapsed = start.elapsed();
        let summary = json_to_py(py, &summary.to_json()["summary"])?;
        Ok((results, summary))
    }
}
