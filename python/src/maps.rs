//! The program's maps from Python, as the syscall side (`bpf(BPF_MAP_*)`, what bpftool and
//! libbpf's `bpf_map_*_elem` use) reaches them: lookups, updates and deletes of raw keys and
//! values, with the kernel's errno; and the conversion of keys and values to and from their
//! BTF types, in the JSON form `bpftool -j map dump` prints (`bpfemu::mapio` reads and writes
//! map files in the same form).

use crate::errors::map_error;
use crate::program::Program;
use crate::values::json_to_py;
use bpfemu::isa::uapi::map_type_short_name;
use bpfemu::loader::MapSpec;
use bpfemu::loader::btf::json;
use bpfemu::mapio::MapIo;
use bpfemu::vm::maps::Errno;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

/// `BPF_ANY`: the update creates or replaces, as `prog.maps[m][k] = v` means.
const BPF_ANY: u64 = 0;

impl Program {
    /// The map named `name`: its index (the runtime's too) and spec.
    fn map_spec(&self, name: &str) -> PyResult<(usize, &MapSpec)> {
        self.prepared
            .object()
            .maps
            .iter()
            .enumerate()
            .find(|(_, m)| m.name == name)
            .ok_or_else(|| PyValueError::new_err(format!("no map named {name}")))
    }

    /// The BTF type of a map's `part` (`key` or `value`), when the object's BTF gives one.
    fn part_type(&self, name: &str, part: &str) -> PyResult<Option<u32>> {
        let (_, spec) = self.map_spec(name)?;
        match part {
            "key" => Ok(spec.key_type),
            "value" => Ok(spec.value_type),
            _ => Err(PyValueError::new_err(format!(
                "{part}: a map entry has a key and a value"
            ))),
        }
    }

    /// Refuses a key or value of the wrong size before it reaches the map.
    fn check_size(&self, name: &str, part: &str, bytes: &[u8], size: usize) -> PyResult<()> {
        if bytes.len() == size {
            return Ok(());
        }
        Err(PyValueError::new_err(format!(
            "map {name}: the {part} has {} bytes, the map's has {size}",
            bytes.len()
        )))
    }

    /// The size of a value as the syscall side has it: per-CPU maps hold one copy per CPU,
    /// each padded to 8 bytes.
    fn sys_value_size(&self, spec: &MapSpec) -> usize {
        let size = spec.value_size as usize;
        match json::is_per_cpu(spec.map_type) {
            true => size.div_ceil(8) * 8 * self.cpus as usize,
            false => size,
        }
    }
}

#[pymethods]
impl Program {
    /// Every map of the object: name, bpftool's type name, sizes, flags, whether it is
    /// per-CPU, and the BTF type names of its key and value (`None` without BTF).
    fn map_specs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let object = self.prepared.object();
        let type_name = |id: Option<_>| {
            let btf = object.btf.as_ref()?;
            Some(btf.type_name(id?))
        };
        let list = PyList::empty(py);
        for spec in &object.maps {
            let dict = PyDict::new(py);
            dict.set_item("name", &spec.name)?;
            let kind = map_type_short_name(spec.map_type)
                .unwrap_or_else(|| format!("type {}", spec.map_type));
            dict.set_item("type", kind)?;
            dict.set_item("key_size", spec.key_size)?;
            dict.set_item("value_size", spec.value_size)?;
            dict.set_item("max_entries", spec.max_entries)?;
            dict.set_item("flags", spec.map_flags)?;
            dict.set_item("per_cpu", json::is_per_cpu(spec.map_type))?;
            dict.set_item("key_type", type_name(spec.key_type))?;
            dict.set_item("value_type", type_name(spec.value_type))?;
            list.append(dict)?;
        }
        Ok(list)
    }

    /// `BPF_MAP_LOOKUP_ELEM`: the value's bytes (per-CPU maps: every CPU's, padded to 8
    /// bytes), `None` when the key is absent.
    fn map_lookup<'py>(
        &mut self,
        py: Python<'py>,
        name: &str,
        key: Vec<u8>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let (index, spec) = self.map_spec(name)?;
        self.check_size(name, "key", &key, spec.key_size as usize)?;
        let (maps, mem) = self.runnable(py)?.runtime.maps_mut();
        match maps.sys_lookup(mem, index, &key, 0) {
            Ok(value) => Ok(Some(PyBytes::new(py, &value))),
            Err(Errno::ENOENT) => Ok(None),
            Err(errno) => Err(map_error(py, name, "lookup", errno)),
        }
    }

    /// `BPF_MAP_UPDATE_ELEM` with `flags` (`BPF_ANY` by default).
    #[pyo3(signature = (name, key, value, flags=BPF_ANY))]
    fn map_update(
        &mut self,
        py: Python<'_>,
        name: &str,
        key: Vec<u8>,
        value: Vec<u8>,
        flags: u64,
    ) -> PyResult<()> {
        let (index, spec) = self.map_spec(name)?;
        self.check_size(name, "key", &key, spec.key_size as usize)?;
        self.check_size(name, "value", &value, self.sys_value_size(spec))?;
        let (maps, mem) = self.runnable(py)?.runtime.maps_mut();
        maps.sys_update(mem, index, &key, &value, flags)
            .map_err(|errno| map_error(py, name, "update", errno))
    }

    /// `BPF_MAP_DELETE_ELEM`: whether the key was there (an absent key is `ENOENT`).
    fn map_delete(&mut self, py: Python<'_>, name: &str, key: Vec<u8>) -> PyResult<bool> {
        let (index, spec) = self.map_spec(name)?;
        self.check_size(name, "key", &key, spec.key_size as usize)?;
        let (maps, _) = self.runnable(py)?.runtime.maps_mut();
        match maps.sys_delete(index, &key) {
            Ok(()) => Ok(true),
            Err(Errno::ENOENT) => Ok(false),
            Err(errno) => Err(map_error(py, name, "delete", errno)),
        }
    }

    /// Every (key, value) of the map, in `get_next_key` order, as `bpftool map dump` lists
    /// them.
    fn map_items<'py>(&mut self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyList>> {
        let (index, _) = self.map_spec(name)?;
        let (maps, mem) = self.runnable(py)?.runtime.maps_mut();
        let entries = maps
            .dump(mem, index)
            .map_err(|errno| map_error(py, name, "dump", errno))?;
        let list = PyList::empty(py);
        for (key, value) in entries {
            list.append((PyBytes::new(py, &key), PyBytes::new(py, &value)))?;
        }
        Ok(list)
    }

    /// A key or (one CPU's) value of map `name` from its bytes to its typed form, as
    /// `bpftool -j map dump` formats it; `None` when the object's BTF does not type it.
    fn map_decode<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        part: &str,
        bytes: Vec<u8>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let (Some(ty), Some(btf)) = (self.part_type(name, part)?, &self.prepared.object().btf)
        else {
            return Ok(None);
        };
        let value = json::value_to_json(btf, ty, &bytes)
            .map_err(|e| PyValueError::new_err(format!("map {name}: {part}: {e}")))?;
        json_to_py(py, &value).map(Some)
    }

    /// A key or (one CPU's) value of map `name` from its typed form (JSON text, as
    /// `bpfemu replay --maps` reads it) to its bytes; `None` when the BTF does not type it.
    fn map_encode<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        part: &str,
        typed: &str,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let (Some(ty), Some(btf)) = (self.part_type(name, part)?, &self.prepared.object().btf)
        else {
            return Ok(None);
        };
        let doc: serde_json::Value = serde_json::from_str(typed)
            .map_err(|e| PyValueError::new_err(format!("map {name}: {part}: {e}")))?;
        let bytes = json::value_from_json(btf, ty, &doc)
            .map_err(|e| PyValueError::new_err(format!("map {name}: {part}: {e}")))?;
        Ok(Some(PyBytes::new(py, &bytes)))
    }

    /// Every map as `bpfemu replay --dump-maps` writes them (bpftool's JSON, typed by BTF).
    fn dump_maps<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let prepared = self.prepared.clone();
        let replayer = self.runnable(py)?;
        let doc = MapIo::new(prepared.object(), &mut replayer.runtime)
            .dump()
            .map_err(|e| crate::errors::load_error(&e))?;
        json_to_py(py, &doc)
    }
}
