//! iproute2's object conventions, as `ip link set dev DEV xdp obj FILE sec S` (and `tc ... bpf
//! obj`) load an object (iproute2's `include/bpf_elf.h` and `lib/bpf_legacy.c`):
//! - maps are `struct bpf_elf_map` in the `maps` section: libbpf's `struct bpf_map_def`, then
//!   `id`, `pinning`, `inner_id` and `inner_idx`; each definition is the section's size divided
//!   by the number of map symbols, a shorter struct (an older iproute2's) is zero-filled;
//! - a map-in-map takes as its inner template the map whose `id` is its `inner_id`, and every
//!   map with an `id`, no `inner_id` and an `inner_idx` other than -1 is put at `inner_idx` into
//!   each map-in-map whose `inner_id` is that id;
//! - a program in a section named `ID/KEY` (two C integers, as `sscanf("%i/%i")` reads them)
//!   is put at `KEY` into the prog array whose `id` is `ID` (`__section_tail(ID, KEY)`);
//! - the program type comes from the command, not the section (`prog` is the default section
//!   of `ip ... xdp`); see [`crate::LoadOptions::untyped_prog_type`];
//! - pinning (`PIN_OBJECT_NS`, `PIN_GLOBAL_NS`) names a bpffs path the map is shared through;
//!   bpfemu has no bpffs, so it has nothing to pin, and `inspect` says what was asked.

use crate::error::LoadError;
use crate::maps::MapTable;
use crate::object::{ElfMapFields, MapOrigin, MapSpec, ProgramSpec};
use bpfemu_isa::uapi::{
    BPF_MAP_TYPE_ARRAY_OF_MAPS, BPF_MAP_TYPE_HASH_OF_MAPS, BPF_MAP_TYPE_PROG_ARRAY,
};

/// The section `ip ... xdp obj FILE` loads when no `sec` is given (`ELF_SECTION_PROG`).
pub const DEFAULT_SECTION: &str = "prog";

/// `sizeof(struct bpf_map_def)`: type, key_size, value_size, max_entries, map_flags.
const BPF_MAP_DEF_SIZE: usize = 20;
/// `sizeof(struct bpf_elf_map)`.
pub const BPF_ELF_MAP_SIZE: usize = 36;
/// iproute2's `inner_idx` for "in no map-in-map".
const NO_INNER_IDX: u32 = u32::MAX;

/// iproute2's fields of one definition of `def.len()` bytes, when it is a `struct bpf_elf_map`
/// (longer than `struct bpf_map_def`, at most as long as `struct bpf_elf_map`, whole words);
/// fields past the end read as zero, as iproute2's fixup of a shorter struct leaves them.
pub(crate) fn elf_map_fields(def: &[u8]) -> Option<ElfMapFields> {
    if def.len() <= BPF_MAP_DEF_SIZE || def.len() > BPF_ELF_MAP_SIZE || !def.len().is_multiple_of(4)
    {
        return None;
    }
    let word = |at: usize| {
        def.get(at..at + 4)
            .map_or(0, |b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
    };
    Some(ElfMapFields {
        id: word(20),
        pinning: word(24),
        inner_id: word(28),
        inner_idx: word(32),
    })
}

/// What a pinning value asks for, in words.
pub fn pinning_name(pinning: u32) -> String {
    match pinning {
        0 => "none".into(),
        1 => "object namespace (PIN_OBJECT_NS)".into(),
        2 => "global namespace (PIN_GLOBAL_NS)".into(),
        n => format!("custom id {n} (from /etc/iproute2/bpf_pinning)"),
    }
}

fn fields(spec: &MapSpec) -> Option<ElfMapFields> {
    match spec.origin {
        MapOrigin::Iproute2(f) => Some(f),
        _ => None,
    }
}

fn is_map_in_map(map_type: u32) -> bool {
    matches!(
        map_type,
        BPF_MAP_TYPE_ARRAY_OF_MAPS | BPF_MAP_TYPE_HASH_OF_MAPS
    )
}

fn map_error(file: &str, map: &str, message: String) -> LoadError {
    LoadError::Map {
        file: file.into(),
        map: map.into(),
        message,
    }
}

/// iproute2's `bpf_maps_attach_all`: each map-in-map gets the map its `inner_id` names as
/// its inner template, and the maps with an `inner_idx` go into the map-in-maps that name them.
pub(crate) fn link_map_in_maps(file: &str, table: &mut MapTable) -> Result<(), LoadError> {
    let specs = &mut table.specs;
    for outer in 0..specs.len() {
        let Some(f) = fields(&specs[outer]).filter(|_| is_map_in_map(specs[outer].map_type)) else {
            continue;
        };
        let name = specs[outer].name.clone();
        if f.inner_id == 0 {
            return Err(map_error(
                file,
                &name,
                "a map-in-map needs an inner map id (inner_id), as iproute2 creates it".into(),
            ));
        }
        let inner = specs
            .iter()
            .find(|m| fields(m).is_some_and(|g| g.id == f.inner_id))
            .ok_or_else(|| {
                map_error(
                    file,
                    &name,
                    format!("inner map with id {} not found", f.inner_id),
                )
            })?;
        let mut template = inner.clone();
        template.name = format!("{name}.inner");
        template.init_slots.clear();
        specs[outer].inner = Some(Box::new(template));
    }
    for member in 0..specs.len() {
        let Some(f) = fields(&specs[member]) else {
            continue;
        };
        if f.id == 0 || f.inner_id != 0 || f.inner_idx == NO_INNER_IDX {
            continue;
        }
        let member_name = specs[member].name.clone();
        for outer in specs.iter_mut() {
            if is_map_in_map(outer.map_type) && fields(outer).is_some_and(|g| g.inner_id == f.id) {
                set_slot(outer, f.inner_idx, member_name.clone());
            }
        }
    }
    Ok(())
}

/// A later update of the same slot replaces the earlier one (iproute2 updates with BPF_ANY).
fn set_slot(map: &mut MapSpec, slot: u32, target: String) {
    map.init_slots.retain(|(i, _)| *i != slot);
    map.init_slots.push((slot, target));
    map.init_slots.sort();
}

/// The prog array id and key of a tail-call section `ID/KEY`, read as C's `sscanf("%i/%i")`
/// reads them (decimal, `0x` hex or `0` octal, with a sign; anything after KEY is ignored).
pub fn tail_call_section(name: &str) -> Option<(u32, u32)> {
    let (id, rest) = c_int_prefix(name)?;
    let rest = rest.strip_prefix('/')?;
    let (key, _) = c_int_prefix(rest)?;
    Some((id, key))
}

/// The integer `%i` reads at the start of `s` (after blanks), and what follows it; the value
/// is kept modulo 2^32, as the conversion into iproute2's `uint32_t` keeps it.
fn c_int_prefix(s: &str) -> Option<(u32, &str)> {
    let s = s.trim_start();
    let (negative, s) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let (radix, digits) = if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        (16, hex)
    } else if s.starts_with('0') {
        (8, s)
    } else {
        (10, s)
    };
    let end = digits
        .find(|c: char| !c.is_digit(radix))
        .unwrap_or(digits.len());
    if end == 0 {
        return None;
    }
    let value = digits[..end].chars().fold(0u64, |acc, c| {
        acc.wrapping_mul(u64::from(radix))
            .wrapping_add(u64::from(c.to_digit(radix).expect("a digit")))
    });
    let value = if negative {
        value.wrapping_neg()
    } else {
        value
    };
    Some((value as u32, &digits[end..]))
}

/// iproute2's `bpf_fill_prog_arrays`: the first program of each section `ID/KEY` goes at `KEY`
/// into the prog array whose id is `ID`; sections whose id names no prog array are left alone,
/// as iproute2 leaves them.
pub(crate) fn fill_tail_calls(maps: &mut [MapSpec], programs: &[ProgramSpec]) {
    let mut seen = std::collections::BTreeSet::new();
    for prog in programs {
        let Some((id, key)) = tail_call_section(&prog.section) else {
            continue;
        };
        if !seen.insert(prog.section.as_str()) {
            continue;
        }
        let prog_array = maps.iter_mut().find(|m| {
            m.map_type == BPF_MAP_TYPE_PROG_ARRAY && fields(m).is_some_and(|f| f.id == id)
        });
        if let Some(map) = prog_array {
            set_slot(map, key, prog.name.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elf_map(name: &str, map_type: u32, fields: ElfMapFields) -> MapSpec {
        let mut spec = crate::maps::blank_spec(name.into(), MapOrigin::Iproute2(fields));
        (
            spec.map_type,
            spec.key_size,
            spec.value_size,
            spec.max_entries,
        ) = (map_type, 4, 4, 4);
        spec
    }

    #[test]
    fn map_in_maps_need_their_inner_map() {
        let outer = |inner_id| {
            let fields = ElfMapFields {
                inner_id,
                ..ElfMapFields::default()
            };
            elf_map("outer", BPF_MAP_TYPE_ARRAY_OF_MAPS, fields)
        };
        let member = elf_map(
            "member",
            2,
            ElfMapFields {
                id: 5,
                inner_idx: 1,
                ..ElfMapFields::default()
            },
        );
        let mut table = MapTable {
            specs: vec![outer(0)],
            ..MapTable::default()
        };
        let e = link_map_in_maps("x.o", &mut table).unwrap_err().to_string();
        assert!(
            e.contains("x.o") && e.contains("outer") && e.contains("inner_id"),
            "{e}"
        );
        table.specs = vec![outer(7), member.clone()];
        let e = link_map_in_maps("x.o", &mut table).unwrap_err().to_string();
        assert!(e.contains("inner map with id 7 not found"), "{e}");
        table.specs = vec![outer(5), member];
        link_map_in_maps("x.o", &mut table).unwrap();
        assert_eq!(table.specs[0].init_slots, [(1, "member".to_owned())]);
        assert_eq!(table.specs[0].inner.as_ref().unwrap().name, "outer.inner");
    }

    #[test]
    fn tail_call_sections_read_as_sscanf_reads_them() {
        assert_eq!(tail_call_section("1/0"), Some((1, 0)));
        assert_eq!(tail_call_section("0x10/011"), Some((16, 9)));
        assert_eq!(tail_call_section(" 2/ 3rest"), Some((2, 3)));
        assert_eq!(tail_call_section("-1/1"), Some((u32::MAX, 1)));
        assert_eq!(tail_call_section("prog"), None);
        assert_eq!(tail_call_section("1/"), None);
        assert_eq!(tail_call_section("1"), None);
        assert_eq!(tail_call_section("xdp/1"), None);
    }

    #[test]
    fn elf_map_fields_follow_the_struct_size() {
        let mut def = [0u8; 36];
        for (i, v) in [7u32, 2, 5, 3].iter().enumerate() {
            def[20 + 4 * i..24 + 4 * i].copy_from_slice(&v.to_le_bytes());
        }
        let full = elf_map_fields(&def).unwrap();
        assert_eq!(
            (full.id, full.pinning, full.inner_id, full.inner_idx),
            (7, 2, 5, 3)
        );
        let short = elf_map_fields(&def[..28]).unwrap();
        assert_eq!(
            (short.id, short.pinning, short.inner_id, short.inner_idx),
            (7, 2, 0, 0)
        );
        assert_eq!(elf_map_fields(&def[..20]), None);
        assert_eq!(elf_map_fields(&[0; 40]), None);
        assert_eq!(elf_map_fields(&def[..30]), None);
    }
}
