//! Map contents in and out of a runtime: `--maps FILE` before a replay, `--dump-maps FILE` after
//! it, as JSON typed by the object's BTF in the shape `bpftool -j map dump` prints (raw hex
//! pairs are accepted too).
//!
//! Per-CPU values cross the boundary as the kernel's syscall side has them: each CPU's copy
//! padded to 8 bytes, CPU 0 first.

use anyhow::{Context, Result, anyhow};
use bpfemu_loader::Object;
use bpfemu_loader::btf::json::{self, MapContents, MapEntry, MapValue};
use bpfemu_vm::xdp::XdpRuntime;
use std::collections::BTreeMap;
use std::path::Path;

/// Reads and writes the maps of `runtime`, which was built from `object`.
pub struct MapIo<'a> {
    object: &'a Object,
    runtime: &'a mut XdpRuntime,
}

impl<'a> MapIo<'a> {
    pub fn new(object: &'a Object, runtime: &'a mut XdpRuntime) -> MapIo<'a> {
        MapIo { object, runtime }
    }

    /// Sets map contents from a `--maps` file.
    pub fn load_file(&mut self, path: &Path) -> Result<()> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let doc: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
        self.load_json(&doc, &path.display().to_string())
    }

    /// Sets map contents from a document in the `--maps` shape; `origin` names it in errors.
    pub fn load_json(&mut self, doc: &serde_json::Value, origin: &str) -> Result<()> {
        let contents = json::parse_map_contents(doc, &self.object.maps, self.object.btf.as_ref())
            .map_err(|e| anyhow!("{origin}: {e}"))?;
        for map in &contents {
            self.apply(map).with_context(|| origin.to_owned())?;
        }
        Ok(())
    }

    fn apply(&mut self, contents: &MapContents) -> Result<()> {
        let index = self.map_index(&contents.name)?;
        let slot = self.slot_size(index);
        let cpus = self.runtime.maps_mut().0.env().ncpus as usize;
        let (maps, mem) = self.runtime.maps_mut();
        for (i, entry) in contents.entries.iter().enumerate() {
            let value = match &entry.value {
                MapValue::Single(v) if slot.is_some() => {
                    per_cpu_bytes(&vec![v.clone(); cpus], slot)
                }
                MapValue::Single(v) => v.clone(),
                MapValue::PerCpu(values) => {
                    if values.len() != cpus {
                        return Err(anyhow!(
                            "map {}: entry {i} has {} per-CPU values, the replay has {cpus} CPUs",
                            contents.name,
                            values.len()
                        ));
                    }
                    per_cpu_bytes(values, slot)
                }
            };
            let map_type = self.object.maps[index].map_type;
            maps.sys_update(mem, index, &entry.key, &value, 0)
                .map_err(|errno| {
                    update_error(&contents.name, map_type, i, &entry.key, errno, cpus)
                })?;
        }
        Ok(())
    }

    /// The maps as `--dump-maps` writes them: every map with its entries.
    pub fn dump(&mut self) -> Result<serde_json::Value> {
        let mut contents = Vec::new();
        for (index, spec) in self.object.maps.iter().enumerate() {
            let slot = self.slot_size(index);
            let (maps, mem) = self.runtime.maps_mut();
            let entries = maps
                .dump(mem, index)
                .map_err(|e| anyhow!("map {}: {e}", spec.name))?;
            let entries = entries
                .into_iter()
                .map(|(key, value)| MapEntry {
                    key,
                    value: split_value(value, slot, spec.value_size),
                })
                .collect();
            contents.push(MapContents {
                name: spec.name.clone(),
                entries,
            });
        }
        json::dump_map_contents(&contents, &self.object.maps, self.object.btf.as_ref())
            .map_err(|e| anyhow!("{e}"))
    }

    /// Every map's entries as raw bytes, keyed by map name and key: what the expectations
    /// compare (cheap next to the typed dump, and exact).
    pub fn raw_snapshot(&mut self) -> Result<RawMaps> {
        let mut snapshot = RawMaps::new();
        for (index, spec) in self.object.maps.iter().enumerate() {
            let (maps, mem) = self.runtime.maps_mut();
            let entries = maps
                .dump(mem, index)
                .map_err(|e| anyhow!("map {}: {e}", spec.name))?;
            snapshot.insert(spec.name.clone(), entries.into_iter().collect());
        }
        Ok(snapshot)
    }

    fn map_index(&self, name: &str) -> Result<usize> {
        self.object
            .maps
            .iter()
            .position(|m| m.name == name)
            .ok_or_else(|| anyhow!("no map named {name}"))
    }

    /// The padded per-CPU slot size, for per-CPU maps.
    fn slot_size(&self, index: usize) -> Option<usize> {
        let spec = &self.object.maps[index];
        json::is_per_cpu(spec.map_type).then(|| (spec.value_size as usize).div_ceil(8) * 8)
    }
}

/// Map name -> key -> value, all raw bytes (per-CPU values as the syscall side has them).
pub type RawMaps = BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>;

/// One entry of map `name` as compact JSON typed by BTF (`{"key":..,"value":..}` as bpftool
/// formats it), or as hex when the object has no BTF for the map.
pub fn describe_entry(object: &Object, name: &str, key: &[u8], value: &[u8]) -> String {
    let typed = object
        .maps
        .iter()
        .find(|m| m.name == name)
        .and_then(|spec| {
            let slot =
                json::is_per_cpu(spec.map_type).then(|| (spec.value_size as usize).div_ceil(8) * 8);
            let contents = MapContents {
                name: name.to_owned(),
                entries: vec![MapEntry {
                    key: key.to_vec(),
                    value: split_value(value.to_vec(), slot, spec.value_size),
                }],
            };
            let doc =
                json::dump_map_contents(&[contents], &object.maps, object.btf.as_ref()).ok()?;
            let formatted = doc.get(name)?.get(0)?.get("formatted")?;
            Some(formatted.to_string())
        });
    typed.unwrap_or_else(|| {
        format!(
            "{{\"key\":\"{}\",\"value\":\"{}\"}}",
            crate::replay::hex(key),
            crate::replay::hex(value)
        )
    })
}

/// Why an entry of a map file could not be set, in the user's terms where the errno alone
/// would say little: a cpumap entry's key is a CPU, which must be one of the run's.
fn update_error(
    map: &str,
    map_type: u32,
    entry: usize,
    key: &[u8],
    errno: bpfemu_vm::maps::Errno,
    cpus: usize,
) -> anyhow::Error {
    use bpfemu_isa::uapi::BPF_MAP_TYPE_CPUMAP;
    let cpu = key
        .get(..4)
        .and_then(|k| k.try_into().ok())
        .map(u32::from_le_bytes);
    match cpu {
        Some(cpu) if map_type == BPF_MAP_TYPE_CPUMAP && errno == bpfemu_vm::maps::Errno::ENODEV => {
            anyhow!(
                "map {map}: entry {entry} is for CPU {cpu}, which this run does not have: it has {cpus} CPU{} (--cpus {} gives it CPU {cpu})",
                if cpus == 1 { "" } else { "s" },
                cpu + 1
            )
        }
        _ => anyhow!("map {map}: entry {entry}: the update fails with {errno}"),
    }
}

fn per_cpu_bytes(values: &[Vec<u8>], slot: Option<usize>) -> Vec<u8> {
    let slot = slot.unwrap_or(0);
    let mut out = Vec::with_capacity(slot * values.len());
    for value in values {
        let mut padded = value.clone();
        padded.resize(slot.max(value.len()), 0);
        out.extend(padded);
    }
    out
}

fn split_value(bytes: Vec<u8>, slot: Option<usize>, value_size: u32) -> MapValue {
    match slot {
        None => MapValue::Single(bytes),
        Some(slot) => MapValue::PerCpu(
            bytes
                .chunks(slot)
                .map(|c| c[..(value_size as usize).min(c.len())].to_vec())
                .collect(),
        ),
    }
}
