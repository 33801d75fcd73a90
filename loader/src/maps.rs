//! Map specs from the three places an object declares maps, in libbpf's order: the legacy
//! `maps` section (libbpf 0.x's `bpf_object__init_user_maps`; 1.x refuses it, we accept it with
//! a warning), BTF-defined `.maps` (`bpf_object__init_user_btf_maps`, `parse_btf_map_def`),
//! then global data sections (`bpf_object__init_global_data_maps`). The `.kconfig` map comes
//! last, from `externs`.
//!
//! Each spec keeps a [`MapPlace`] so that relocations can find it as libbpf does: by section and
//! offset for declared maps, by section alone for global data.

use crate::btf::{Btf, BtfKind, Linkage, TypeId};
use crate::elf::{ElfObject, STT_SECTION, Section};
use crate::error::LoadError;
use crate::object::{MapOrigin, MapSpec};
use bpfemu_isa::uapi::*;

/// Where a map's definition lies in the ELF.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapPlace {
    pub sec_idx: usize,
    /// Byte offset of the definition (declared maps); 0 for data maps.
    pub sec_offset: u64,
    /// Size of the definition in the section (declared maps).
    pub size: u64,
    pub kind: PlaceKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlaceKind {
    Declared,
    Data,
    Kconfig,
}

/// All maps of an object, specs and places side by side (same index).
#[derive(Debug, Default)]
pub struct MapTable {
    pub specs: Vec<MapSpec>,
    pub places: Vec<MapPlace>,
    /// The `.addr_space.1` section, whose variables live in the arena map.
    pub arena_section: Option<usize>,
    /// The arena globals and their map, when the object declares both.
    pub arena: Option<crate::arena::ArenaGlobals>,
}

impl MapTable {
    pub fn push(&mut self, spec: MapSpec, place: MapPlace) {
        self.specs.push(spec);
        self.places.push(place);
    }

    /// A declared map whose definition starts at `offset` of section `sec_idx`.
    pub fn declared_at(&self, sec_idx: usize, offset: u64) -> Option<usize> {
        self.places.iter().position(|p| {
            p.kind == PlaceKind::Declared && p.sec_idx == sec_idx && p.sec_offset == offset
        })
    }

    /// The global data map of section `sec_idx`.
    pub fn data_of(&self, sec_idx: usize) -> Option<usize> {
        self.places
            .iter()
            .position(|p| p.kind == PlaceKind::Data && p.sec_idx == sec_idx)
    }

    pub fn kconfig(&self) -> Option<usize> {
        self.places
            .iter()
            .position(|p| p.kind == PlaceKind::Kconfig)
    }
}

/// A spec with every field zero, to be filled in.
pub fn blank_spec(name: String, origin: MapOrigin) -> MapSpec {
    MapSpec {
        name,
        map_type: 0,
        key_size: 0,
        value_size: 0,
        max_entries: 0,
        map_flags: 0,
        numa_node: 0,
        pinning: 0,
        map_extra: 0,
        key_type: None,
        value_type: None,
        inner: None,
        init_slots: Vec::new(),
        initial: None,
        origin,
    }
}

/// The `pinning` of BTF-defined maps: libbpf knows `LIBBPF_PIN_NONE` and `LIBBPF_PIN_BY_NAME`
/// only and refuses the object for any other value. An object whose programs are `static`
/// follows cilium/ebpf's convention, whose users give pinning values their own meaning (Cilium's
/// `CILIUM_PIN_REPLACE`, 16, is its loader's), so there another value is a warning and the
/// map is not pinned: pinning never reaches the kernel's verifier.
pub fn check_pinning(
    file: &str,
    specs: &mut [MapSpec],
    cilium_convention: bool,
) -> Result<Vec<String>, LoadError> {
    let mut foreign = Vec::new();
    for spec in specs
        .iter_mut()
        .filter(|s| s.origin == MapOrigin::BtfDefined)
    {
        if spec.pinning == LIBBPF_PIN_NONE || spec.pinning == LIBBPF_PIN_BY_NAME {
            continue;
        }
        if !cilium_convention {
            let message = format!("invalid pinning value {}", spec.pinning);
            return Err(map_error(file, &spec.name, message));
        }
        foreign.push(format!("'{}' ({})", spec.name, spec.pinning));
        spec.pinning = LIBBPF_PIN_NONE;
    }
    if foreign.is_empty() {
        return Ok(Vec::new());
    }
    Ok(vec![format!(
        "maps {} have pinning values libbpf does not know: not pinned (the object's static \
         programs follow cilium/ebpf, whose users' loaders give such values their own meaning; \
         libbpf 1.7 refuses the object)",
        foreign.join(", ")
    )])
}

fn map_error(file: &str, map: &str, message: impl Into<String>) -> LoadError {
    LoadError::Map {
        file: file.into(),
        map: map.into(),
        message: message.into(),
    }
}

// ---------------------------------------------------------------------------------------------
// Legacy `maps` section.

/// `struct bpf_map_def`: type, key_size, value_size, max_entries, map_flags.
const LEGACY_DEF_SIZE: usize = 20;

/// Maps of the legacy `maps` section: one per non-section symbol, each definition the
/// section's size divided by the number of symbols (libbpf 0.x's and iproute2's rule). A
/// definition of up to 36 bytes is iproute2's `struct bpf_elf_map` (its extra fields read and
/// acted on, see [`crate::iproute2`]); bytes past `struct bpf_map_def` in a longer one must be
/// zero, as libbpf 0.x required.
pub fn legacy_maps(
    elf: &ElfObject<'_>,
    section: &Section<'_>,
    btf: Option<&Btf>,
    table: &mut MapTable,
) -> Result<(), LoadError> {
    let file = &elf.file;
    let mut symbols: Vec<_> = elf
        .symbols
        .iter()
        .filter(|s| s.shndx as usize == section.index && s.kind != STT_SECTION)
        .collect();
    symbols.sort_by_key(|s| s.value);
    if symbols.is_empty() {
        return Ok(());
    }
    let data = section.data;
    if data.is_empty() || !data.len().is_multiple_of(symbols.len()) {
        return Err(map_error(
            file,
            "maps",
            format!(
                "cannot size legacy map definitions: {} bytes for {} symbols",
                data.len(),
                symbols.len()
            ),
        ));
    }
    let def_size = data.len() / symbols.len();
    for sym in symbols {
        let spec = legacy_map(file, &sym.name, data, sym.value, def_size, btf)?;
        let place = MapPlace {
            sec_idx: section.index,
            sec_offset: sym.value,
            size: def_size as u64,
            kind: PlaceKind::Declared,
        };
        table.push(spec, place);
    }
    crate::iproute2::link_map_in_maps(file, table)
}

fn legacy_map(
    file: &str,
    name: &str,
    data: &[u8],
    offset: u64,
    def_size: usize,
    btf: Option<&Btf>,
) -> Result<MapSpec, LoadError> {
    let start = usize::try_from(offset).unwrap_or(usize::MAX);
    let def = start
        .checked_add(def_size)
        .and_then(|end| data.get(start..end))
        .ok_or_else(|| map_error(file, name, "definition lies outside the 'maps' section"))?;
    let elf_map = crate::iproute2::elf_map_fields(def);
    if elf_map.is_none()
        && def.len() > LEGACY_DEF_SIZE
        && def[LEGACY_DEF_SIZE..].iter().any(|&b| b != 0)
    {
        return Err(map_error(
            file,
            name,
            format!(
                "{def_size}-byte legacy definition has non-zero fields past struct \
                 bpf_map_def, and is not iproute2's struct bpf_elf_map (at most {} bytes)",
                crate::iproute2::BPF_ELF_MAP_SIZE
            ),
        ));
    }
    let mut fields = [0u32; 5];
    for (i, field) in fields.iter_mut().enumerate() {
        let at = i * 4;
        if let Some(b) = def.get(at..at + 4) {
            *field = u32::from_le_bytes(b.try_into().expect("4 bytes"));
        }
    }
    let origin = elf_map.map_or(MapOrigin::Legacy, MapOrigin::Iproute2);
    let mut spec = blank_spec(name.into(), origin);
    [
        spec.map_type,
        spec.key_size,
        spec.value_size,
        spec.max_entries,
        spec.map_flags,
    ] = fields;
    if let Some(btf) = btf {
        annotate_kv_pair(btf, name, &mut spec);
    }
    Ok(spec)
}

/// `BPF_ANNOTATE_KV_PAIR(name, key, value)` declares `struct ____btf_map_<name> { key; value; }`;
/// libbpf 0.x took the key and value types from it.
fn annotate_kv_pair(btf: &Btf, name: &str, spec: &mut MapSpec) {
    let container = format!("____btf_map_{name}");
    let Some(id) = btf.find_by_name_kind(&container, |k| matches!(k, BtfKind::Struct { .. }))
    else {
        return;
    };
    let Some(members) = btf.get(id).map(|t| t.kind.members()) else {
        return;
    };
    for m in members {
        match m.name.as_str() {
            "key" => spec.key_type = Some(m.ty),
            "value" => spec.value_type = Some(m.ty),
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------------------------
// BTF-defined `.maps`.

const LIBBPF_PIN_NONE: u32 = 0;
const LIBBPF_PIN_BY_NAME: u32 = 1;
const PAGE_SIZE: u32 = 4096;

/// Maps of `.maps`: one per VAR of the `.maps` DATASEC, in DATASEC order.
pub fn btf_maps(
    elf: &ElfObject<'_>,
    section: &Section<'_>,
    btf: Option<&Btf>,
    table: &mut MapTable,
) -> Result<(), LoadError> {
    let file = &elf.file;
    let btf = btf.ok_or_else(|| {
        map_error(
            file,
            ".maps",
            "section '.maps' needs BTF, and there is none",
        )
    })?;
    let datasec = btf
        .find_by_name_kind(".maps", |k| matches!(k, BtfKind::DataSec { .. }))
        .ok_or_else(|| map_error(file, ".maps", "BTF has no DATASEC '.maps'"))?;
    let Some(BtfKind::DataSec { vars, .. }) = btf.get(datasec).map(|t| &t.kind) else {
        unreachable!("find_by_name_kind returned a DATASEC");
    };
    for var in vars {
        let (spec, place) = btf_map(file, btf, section, var.ty, var.offset, var.size)?;
        table.push(spec, place);
    }
    Ok(())
}

fn btf_map(
    file: &str,
    btf: &Btf,
    section: &Section<'_>,
    var_id: TypeId,
    offset: u32,
    size: u32,
) -> Result<(MapSpec, MapPlace), LoadError> {
    let var = btf.get(var_id).ok_or_else(|| {
        map_error(
            file,
            "?",
            format!("DATASEC var type [{var_id}] does not exist"),
        )
    })?;
    let name = var.name.as_str();
    if name.is_empty() {
        return Err(map_error(file, "?", "a '.maps' variable has an empty name"));
    }
    if u64::from(offset) + u64::from(size) > section.data.len() as u64 {
        return Err(map_error(
            file,
            name,
            "definition lies outside the '.maps' section",
        ));
    }
    let BtfKind::Var { ty, linkage } = var.kind else {
        return Err(map_error(
            file,
            name,
            format!("unexpected kind {}", var.kind.kind_name()),
        ));
    };
    if linkage != Linkage::Global {
        return Err(map_error(
            file,
            name,
            format!("unsupported map linkage {linkage:?}"),
        ));
    }
    let def_id = resolve_struct(btf, ty)
        .ok_or_else(|| map_error(file, name, "definition is not a struct"))?;
    if btf
        .get(def_id)
        .and_then(|t| t.kind.declared_size())
        .unwrap_or(0)
        > size
    {
        return Err(map_error(file, name, "invalid definition size"));
    }
    let def = parse_map_def(btf, def_id, name, false).map_err(|m| map_error(file, name, m))?;
    let spec = def.into_spec(name);
    let place = MapPlace {
        sec_idx: section.index,
        sec_offset: offset.into(),
        size: size.into(),
        kind: PlaceKind::Declared,
    };
    Ok((spec, place))
}

fn resolve_struct(btf: &Btf, id: TypeId) -> Option<TypeId> {
    let id = btf.skip_mods_and_typedefs(id)?;
    matches!(btf.get(id)?.kind, BtfKind::Struct { .. }).then_some(id)
}

/// A parsed `struct { __uint(type, ...); ... }` (libbpf's `struct btf_map_def`).
#[derive(Debug, Default)]
struct MapDef {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    numa_node: u32,
    pinning: u32,
    map_extra: u64,
    key_type: Option<TypeId>,
    value_type: Option<TypeId>,
    inner: Option<Box<MapDef>>,
}

impl MapDef {
    /// libbpf's `fill_map_from_def`: ring buffers get a page-multiple power-of-two size.
    fn into_spec(self, name: &str) -> MapSpec {
        let mut spec = blank_spec(name.into(), MapOrigin::BtfDefined);
        spec.map_type = self.map_type;
        spec.key_size = self.key_size;
        spec.value_size = self.value_size;
        spec.max_entries = self.max_entries;
        if matches!(
            self.map_type,
            BPF_MAP_TYPE_RINGBUF | BPF_MAP_TYPE_USER_RINGBUF
        ) {
            spec.max_entries = ringbuf_size(self.max_entries);
        }
        spec.map_flags = self.map_flags;
        spec.numa_node = self.numa_node;
        spec.pinning = self.pinning;
        spec.map_extra = self.map_extra;
        spec.key_type = self.key_type;
        spec.value_type = self.value_type;
        spec.inner = self
            .inner
            .map(|inner| Box::new(inner.into_spec(&format!("{name}.inner"))));
        spec
    }
}

/// libbpf's `adjust_ringbuf_sz`.
fn ringbuf_size(size: u32) -> u32 {
    if size == 0 || (size.is_multiple_of(PAGE_SIZE) && (size / PAGE_SIZE).is_power_of_two()) {
        return size;
    }
    let mut mul: u32 = 1;
    while mul <= u32::MAX / PAGE_SIZE {
        if mul * PAGE_SIZE > size {
            return mul * PAGE_SIZE;
        }
        mul <<= 1;
    }
    size
}

fn is_map_in_map(map_type: u32) -> bool {
    matches!(
        map_type,
        BPF_MAP_TYPE_ARRAY_OF_MAPS | BPF_MAP_TYPE_HASH_OF_MAPS
    )
}

/// libbpf's `parse_btf_map_def` (strict mode: unknown fields are errors).
fn parse_map_def(btf: &Btf, def_id: TypeId, name: &str, is_inner: bool) -> Result<MapDef, String> {
    let members = btf
        .get(def_id)
        .map(|t| t.kind.members())
        .unwrap_or_default();
    let mut def = MapDef::default();
    for (i, m) in members.iter().enumerate() {
        let field = m.name.as_str();
        match field {
            "type" => def.map_type = int_field(btf, m.ty, field)?,
            "max_entries" => def.max_entries = int_field(btf, m.ty, field)?,
            "map_flags" => def.map_flags = int_field(btf, m.ty, field)?,
            "numa_node" => def.numa_node = int_field(btf, m.ty, field)?,
            "key_size" => set_size(&mut def.key_size, int_field(btf, m.ty, field)?, "key")?,
            "value_size" => set_size(&mut def.value_size, int_field(btf, m.ty, field)?, "value")?,
            "key" => {
                let (ty, size) = typed_field(btf, m.ty, field)?;
                set_size(&mut def.key_size, size, "key")?;
                def.key_type = Some(ty);
            }
            "value" => {
                let (ty, size) = typed_field(btf, m.ty, field)?;
                set_size(&mut def.value_size, size, "value")?;
                def.value_type = Some(ty);
            }
            "values" => {
                if is_inner {
                    return Err("multi-level inner maps are not supported".into());
                }
                if i != members.len() - 1 {
                    return Err("'values' must be the last member".into());
                }
                def.inner = values_field(btf, m.ty, &mut def, name)?;
            }
            "pinning" => {
                if is_inner {
                    return Err("an inner map definition cannot be pinned".into());
                }
                // Checked against the object's convention once its programs are known
                // (`check_pinning`).
                def.pinning = int_field(btf, m.ty, field)?;
            }
            "map_extra" => def.map_extra = long_field(btf, m.ty, field)?,
            other => return Err(format!("unknown field '{other}'")),
        }
    }
    if def.map_type == bpfemu_isa::uapi::BPF_MAP_TYPE_UNSPEC {
        return Err("map type is not specified".into());
    }
    Ok(def)
}

fn set_size(slot: &mut u32, size: u32, what: &str) -> Result<(), String> {
    if *slot != 0 && *slot != size {
        return Err(format!("conflicting {what} size {} != {size}", *slot));
    }
    *slot = size;
    Ok(())
}

/// `__uint(name, N)` is `int (*name)[N]`: N is the array's length (libbpf's
/// `get_map_field_int`).
fn int_field(btf: &Btf, ty: TypeId, field: &str) -> Result<u32, String> {
    let ptr = btf.skip_mods_and_typedefs(ty).and_then(|id| btf.get(id));
    let Some(BtfKind::Ptr { ty: pointee }) = ptr.map(|t| &t.kind) else {
        return Err(format!("attribute '{field}': expected PTR"));
    };
    match btf.get(*pointee).map(|t| &t.kind) {
        Some(BtfKind::Array { len, .. }) => Ok(*len),
        _ => Err(format!("attribute '{field}': expected PTR to ARRAY")),
    }
}

/// `__ulong(name, N)` is an enum with one value N (libbpf's `get_map_field_long`); the
/// `__uint` form is accepted too.
fn long_field(btf: &Btf, ty: TypeId, field: &str) -> Result<u64, String> {
    let t = btf.skip_mods_and_typedefs(ty).and_then(|id| btf.get(id));
    match t.map(|t| &t.kind) {
        Some(BtfKind::Ptr { .. }) => int_field(btf, ty, field).map(u64::from),
        Some(BtfKind::Enum { values, .. } | BtfKind::Enum64 { values, .. })
            if values.len() == 1 =>
        {
            Ok(values[0].value)
        }
        _ => Err(format!("attribute '{field}': expected ENUM with one value")),
    }
}

/// `__type(key, T)` is `T *key`: the pointee and its size.
fn typed_field(btf: &Btf, ty: TypeId, field: &str) -> Result<(TypeId, u32), String> {
    let Some(BtfKind::Ptr { ty: pointee }) = btf.get(ty).map(|t| &t.kind) else {
        return Err(format!("{field} spec is not PTR"));
    };
    let size = btf
        .size_of(*pointee)
        .ok_or_else(|| format!("cannot determine {field} size for type [{pointee}]"))?;
    Ok((*pointee, size))
}

/// `__array(values, T)` is a zero-length array of pointers: to the inner map's definition
/// struct for map-in-map, to a function prototype for a prog array.
fn values_field(
    btf: &Btf,
    ty: TypeId,
    def: &mut MapDef,
    name: &str,
) -> Result<Option<Box<MapDef>>, String> {
    let prog_array = def.map_type == BPF_MAP_TYPE_PROG_ARRAY;
    if !is_map_in_map(def.map_type) && !prog_array {
        return Err("'values' needs a map-in-map or prog-array type".into());
    }
    set_size(&mut def.value_size, 4, "value")?;
    let Some(BtfKind::Array { elem, len: 0, .. }) = btf.get(ty).map(|t| &t.kind) else {
        return Err("'values' is not a zero-sized array".into());
    };
    let ptr = btf.skip_mods_and_typedefs(*elem).and_then(|id| btf.get(id));
    let Some(BtfKind::Ptr { ty: target }) = ptr.map(|t| &t.kind) else {
        return Err("'values' elements are not pointers".into());
    };
    let target = btf.skip_mods_and_typedefs(*target).unwrap_or(0);
    let target_kind = btf.get(target).map(|t| &t.kind);
    if prog_array {
        return match target_kind {
            Some(BtfKind::FuncProto { .. }) => Ok(None),
            _ => Err("prog-array 'values' must point to a function prototype".into()),
        };
    }
    if !matches!(target_kind, Some(BtfKind::Struct { .. })) {
        return Err("map-in-map 'values' must point to a struct".into());
    }
    let inner_name = format!("{name}.inner");
    parse_map_def(btf, target, &inner_name, true)
        .map(|inner| Some(Box::new(inner)))
        .map_err(|e| format!("inner map: {e}"))
}

// ---------------------------------------------------------------------------------------------
// `.maps` relocations: initial slots of map-in-map and prog arrays.

/// libbpf's `bpf_object__collect_map_relos`: each relocation in `.rel.maps` puts a map or a
/// program into a slot of the `values` array of the map it lies in.
pub fn collect_map_slots(
    elf: &ElfObject<'_>,
    rel_section: &Section<'_>,
    btf: &Btf,
    table: &mut MapTable,
    entry_programs: &[(String, usize, u64)],
) -> Result<(), LoadError> {
    let file = &elf.file;
    let maps_sec = rel_section.info as usize;
    for rel in elf.rels(rel_section)? {
        let sym = elf.rel_symbol(&rel_section.name, &rel)?;
        let err = |message: String| LoadError::Relocation {
            file: file.clone(),
            section: rel_section.name.clone(),
            offset: rel.offset,
            message,
        };
        let owner = table
            .places
            .iter()
            .position(|p| {
                p.kind == PlaceKind::Declared
                    && p.sec_idx == maps_sec
                    && p.sec_offset <= rel.offset
                    && rel.offset.saturating_add(8) <= p.sec_offset + p.size
            })
            .ok_or_else(|| err(format!("no map contains the slot for '{}'", sym.name)))?;
        let target = slot_target(table, owner, sym, entry_programs).map_err(&err)?;
        let slot = slot_index(
            btf,
            &table.specs[owner].name,
            rel.offset - table.places[owner].sec_offset,
        )
        .map_err(&err)?;
        let spec = &mut table.specs[owner];
        spec.init_slots.retain(|(i, _)| *i != slot);
        spec.init_slots.push((slot, target));
        spec.init_slots.sort();
    }
    Ok(())
}

fn slot_target(
    table: &MapTable,
    owner: usize,
    sym: &crate::elf::Symbol,
    entry_programs: &[(String, usize, u64)],
) -> Result<String, String> {
    let spec = &table.specs[owner];
    if is_map_in_map(spec.map_type) {
        if spec.map_type == BPF_MAP_TYPE_HASH_OF_MAPS && spec.key_size != 4 {
            return Err(format!("hash-of-maps '{}' needs a 4-byte key", spec.name));
        }
        let sec = table.places[owner].sec_idx;
        if sym.shndx as usize != sec || !table.specs.iter().any(|m| m.name == sym.name) {
            return Err(format!("'{}' is not a BTF-defined map", sym.name));
        }
        return Ok(sym.name.clone());
    }
    if spec.map_type == BPF_MAP_TYPE_PROG_ARRAY {
        let is_entry = entry_programs
            .iter()
            .any(|(n, sec, off)| *n == sym.name && *sec == sym.shndx as usize && *off == sym.value);
        if !is_entry {
            return Err(format!("'{}' is not an entry-point program", sym.name));
        }
        return Ok(sym.name.clone());
    }
    Err(format!("map '{}' takes no initial slots", spec.name))
}

/// The slot a relocation at `offset_in_def` fills: past the `values` member, in 8-byte pointers.
fn slot_index(btf: &Btf, map_name: &str, offset_in_def: u64) -> Result<u32, String> {
    let var = btf
        .find_by_name_kind(map_name, |k| matches!(k, BtfKind::Var { .. }))
        .ok_or_else(|| format!("no BTF var for map '{map_name}'"))?;
    let Some(BtfKind::Var { ty, .. }) = btf.get(var).map(|t| &t.kind) else {
        unreachable!("found a VAR");
    };
    let def = resolve_struct(btf, *ty).ok_or("map definition is not a struct")?;
    let members = btf.get(def).map(|t| t.kind.members()).unwrap_or_default();
    let last = members
        .last()
        .filter(|m| m.name == "values")
        .ok_or("no 'values' member")?;
    let values_off = u64::from(last.bit_offset / 8);
    let within = offset_in_def
        .checked_sub(values_off)
        .ok_or("relocation lies before 'values'")?;
    if !within.is_multiple_of(8) {
        return Err("relocation is not on a slot boundary".into());
    }
    u32::try_from(within / 8).map_err(|_| "slot index overflows".into())
}

// ---------------------------------------------------------------------------------------------
// Global data.

/// The kind of global data section (libbpf's `SEC_DATA`, `SEC_RODATA`, `SEC_BSS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataKind {
    Data,
    Rodata,
    Bss,
}

/// Which global data kind a section is, by libbpf's name rules.
pub fn data_kind(section: &Section<'_>) -> Option<DataKind> {
    let has = |base: &str| {
        section.name == base
            || section
                .name
                .strip_prefix(base)
                .is_some_and(|rest| rest.starts_with('.'))
    };
    match section.sh_type {
        crate::elf::SHT_PROGBITS if !section.is_exec() && has(".data") => Some(DataKind::Data),
        crate::elf::SHT_PROGBITS if !section.is_exec() && has(".rodata") => Some(DataKind::Rodata),
        crate::elf::SHT_NOBITS if has(".bss") => Some(DataKind::Bss),
        _ => None,
    }
}

/// One single-element array per non-empty data section, in section order.
pub fn data_maps(
    elf: &ElfObject<'_>,
    obj_name: &str,
    btf: Option<&Btf>,
    table: &mut MapTable,
) -> Result<(), LoadError> {
    for section in &elf.sections {
        let Some(kind) = data_kind(section) else {
            continue;
        };
        if section.size == 0 {
            continue;
        }
        // The kernel's array maps take a value_size up to INT_MAX and refuse a larger one with
        // E2BIG, so libbpf cannot create the section's map; refusing it here also keeps the
        // memory a `.bss` header can ask for bounded.
        let size = u32::try_from(section.size)
            .ok()
            .filter(|&size| size <= i32::MAX as u32)
            .ok_or_else(|| {
                map_error(
                    &elf.file,
                    &section.name,
                    format!(
                        "data section of {} bytes: the kernel's array maps hold values of at \
                         most {} bytes (E2BIG)",
                        section.size,
                        i32::MAX
                    ),
                )
            })?;
        let initial = match kind {
            DataKind::Bss => vec![0; size as usize],
            _ => section.data.to_vec(),
        };
        let origin = MapOrigin::GlobalData {
            section: section.name.clone(),
        };
        let spec = internal_map(
            obj_name,
            &section.name,
            size,
            kind == DataKind::Rodata,
            btf,
            initial,
            origin,
        );
        let place = MapPlace {
            sec_idx: section.index,
            sec_offset: 0,
            size: section.size,
            kind: PlaceKind::Data,
        };
        table.push(spec, place);
    }
    Ok(())
}

/// libbpf's `bpf_object__init_internal_map`: a one-element array keyed by a 4-byte int whose
/// value is the section; read-only sections get `BPF_F_RDONLY_PROG`, and sections with a
/// non-static variable `BPF_F_MMAPABLE` (`map_is_mmapable`).
pub fn internal_map(
    obj_name: &str,
    real_name: &str,
    size: u32,
    read_only: bool,
    btf: Option<&Btf>,
    initial: Vec<u8>,
    origin: MapOrigin,
) -> MapSpec {
    let mut spec = blank_spec(internal_map_name(obj_name, real_name), origin);
    spec.map_type = BPF_MAP_TYPE_ARRAY;
    spec.key_size = 4;
    spec.value_size = size;
    spec.max_entries = 1;
    if read_only {
        spec.map_flags |= BPF_F_RDONLY_PROG;
    }
    let value_type = btf.and_then(|b| b.find_by_name_kind(real_name, |_| true).map(|id| (b, id)));
    if let Some((btf, id)) = value_type {
        spec.value_type = Some(id);
        if has_exposed_var(btf, id) {
            spec.map_flags |= BPF_F_MMAPABLE;
        }
    }
    spec.initial = Some(initial);
    spec
}

fn has_exposed_var(btf: &Btf, datasec: TypeId) -> bool {
    let Some(BtfKind::DataSec { vars, .. }) = btf.get(datasec).map(|t| &t.kind) else {
        return false;
    };
    vars.iter().any(|v| {
        matches!(
            btf.get(v.ty).map(|t| &t.kind),
            Some(BtfKind::Var { linkage, .. }) if *linkage != Linkage::Static
        )
    })
}

/// The kernel's limit on object names, `BPF_OBJ_NAME_LEN` (including the NUL).
const OBJ_NAME_LEN: usize = 16;

/// libbpf's `internal_map_name`: as much of the object name as fits before the section name,
/// which keeps at least 7 characters; sections with a second dot (`.rodata.str1.1`,
/// `.data.custom`) get no prefix; at most 15 characters, anything but `[A-Za-z0-9_.]` made `_`.
pub fn internal_map_name(obj_name: &str, real_name: &str) -> String {
    let suffix_len = real_name.len().clamp(7, OBJ_NAME_LEN - 1);
    let custom = real_name.get(1..).is_some_and(|rest| rest.contains('.'));
    let prefix_len = if custom {
        0
    } else {
        (OBJ_NAME_LEN - 1 - suffix_len).min(obj_name.len())
    };
    let prefix = obj_name.bytes().take(prefix_len);
    let suffix = real_name.bytes().take(suffix_len);
    prefix
        .chain(suffix)
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'_' || b == b'.' {
                b as char
            } else {
                '_'
            }
        })
        .collect()
}

/// libbpf's object name: the file's base name cut to 15 bytes, then at its first dot.
pub fn object_name(file: &str) -> String {
    let base = file.rsplit('/').next().unwrap_or(file);
    let truncated: Vec<u8> = base.bytes().take(OBJ_NAME_LEN - 1).collect();
    let truncated = String::from_utf8_lossy(&truncated).into_owned();
    match truncated.find('.') {
        Some(dot) => truncated[..dot].to_string(),
        None => truncated,
    }
}

// ---------------------------------------------------------------------------------------------
// Sizes chosen at load time.

/// Map types that have no entries of their own, whose `max_entries` the kernel requires to be
/// 0: cgroup storage (both flavours) and the local storages (socket, inode, task, cgroup).
pub fn has_no_entries(map_type: u32) -> bool {
    use bpfemu_isa::uapi::*;
    matches!(
        map_type,
        BPF_MAP_TYPE_CGROUP_STORAGE
            | BPF_MAP_TYPE_PERCPU_CGROUP_STORAGE
            | BPF_MAP_TYPE_SK_STORAGE
            | BPF_MAP_TYPE_INODE_STORAGE
            | BPF_MAP_TYPE_TASK_STORAGE
            | BPF_MAP_TYPE_CGRP_STORAGE
    )
}

/// Applies `--map-size` overrides, gives a zero-sized perf event array one slot per possible
/// CPU (as libbpf's `map_set_def_max_entries` does), and refuses the maps left at 0, all of them
/// named in one error. Storage maps keep their 0: they have no entries.
pub fn apply_map_sizes(
    file: &str,
    specs: &mut [MapSpec],
    sizes: &std::collections::BTreeMap<String, u32>,
    possible_cpus: impl Fn() -> u32,
) -> Result<Vec<String>, LoadError> {
    let mut warnings = Vec::new();
    for name in sizes.keys() {
        let known = specs
            .iter()
            .any(|s| s.name == *name || s.inner.as_ref().is_some_and(|i| i.name == *name));
        if !known {
            warnings.push(format!(
                "--map-size {name}: the object has no map of that name"
            ));
        }
    }
    let mut needing_size = Vec::new();
    for spec in specs.iter_mut() {
        size_one(
            spec,
            sizes,
            &possible_cpus,
            &mut needing_size,
            &mut warnings,
        );
        if let Some(inner) = spec.inner.as_mut() {
            size_one(
                inner,
                sizes,
                &possible_cpus,
                &mut needing_size,
                &mut warnings,
            );
        }
    }
    if !needing_size.is_empty() {
        return Err(LoadError::MapSize {
            file: file.into(),
            maps: needing_size,
        });
    }
    Ok(warnings)
}

/// The local storage maps (socket, inode, task, cgroup) need BTF for their key and value:
/// the kernel's `bpf_local_storage_map_alloc_check` refuses them without (EINVAL), so libbpf's
/// load fails; so does bpfemu's, naming the map.
pub fn check_storage_btf(file: &str, specs: &[MapSpec]) -> Result<(), LoadError> {
    let needs_btf = |t: u32| matches!(t, 24 | 28 | 29 | 32);
    match specs
        .iter()
        .find(|s| needs_btf(s.map_type) && (s.key_type.is_none() || s.value_type.is_none()))
    {
        Some(spec) => Err(LoadError::Map {
            file: file.into(),
            map: spec.name.clone(),
            message: "a local storage map needs BTF for its key and value (declare it in \
                      .maps with __type(key, int) and __type(value, ...)); the kernel refuses \
                      it without"
                .into(),
        }),
        None => Ok(()),
    }
}

fn size_one(
    spec: &mut MapSpec,
    sizes: &std::collections::BTreeMap<String, u32>,
    possible_cpus: &impl Fn() -> u32,
    needing_size: &mut Vec<String>,
    warnings: &mut Vec<String>,
) {
    if has_no_entries(spec.map_type) {
        if sizes.contains_key(&spec.name) {
            warnings.push(format!(
                "--map-size {}: a storage map has no entries (max_entries stays 0, as the \
                 kernel requires)",
                spec.name
            ));
        }
        return;
    }
    if let Some(&n) = sizes.get(&spec.name) {
        spec.max_entries = n;
    } else if spec.max_entries == 0 && spec.map_type == BPF_MAP_TYPE_PERF_EVENT_ARRAY {
        spec.max_entries = possible_cpus();
    }
    if spec.max_entries == 0 {
        needing_size.push(spec.name.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_names_follow_libbpf() {
        assert_eq!(
            internal_map_name("my_object_name", ".rodata"),
            "my_objec.rodata"
        );
        assert_eq!(internal_map_name("my_object_name", ".bss"), "my_objec.bss");
        assert_eq!(
            internal_map_name("my_object_name", ".kconfig"),
            "my_obje.kconfig"
        );
        assert_eq!(internal_map_name("globals", ".data"), "globals.data");
        assert_eq!(internal_map_name("x", ".rodata.str1.1"), ".rodata.str1.1");
        assert_eq!(
            internal_map_name("x", ".rodata.abracadabra"),
            ".rodata.abracad"
        );
        assert_eq!(internal_map_name("a-b", ".data"), "a_b.data");
    }

    #[test]
    fn object_names_follow_libbpf() {
        assert_eq!(object_name("/x/y/globals.v3.o"), "globals");
        assert_eq!(object_name("a_very_long_object_name.o"), "a_very_long_obj");
    }

    #[test]
    fn ringbuf_sizes_round_up() {
        assert_eq!(ringbuf_size(4096), 4096);
        assert_eq!(ringbuf_size(5000), 8192);
        assert_eq!(ringbuf_size(3 * 4096), 16384);
        assert_eq!(ringbuf_size(0), 0);
    }
}
