//! The maps as the kernel holds them once libbpf 1.7 has created them, which is not always
//! as the object declares them: libbpf gives no BTF to the map types that take none, and
//! when `BPF_MAP_CREATE` refuses a map's BTF (`map_check_btf`: a special field the map type
//! cannot hold, an array keyed by something other than a 32-bit int), libbpf creates the map
//! again without it. A map without BTF has no special fields for the verifier: a program
//! that takes its `bpf_spin_lock` is then refused ("map 'm' has to have BTF in order to use
//! bpf_spin_lock"), as the kernel refuses it.

use crate::env::special_fields_of;
use bpfemu_isa::uapi::*;
use bpfemu_loader::MapSpec;
use bpfemu_loader::btf::{Btf, BtfKind, TypeId};

/// `maps` with the BTF each holds in the kernel (none where it was dropped).
pub fn maps_as_created(maps: &[MapSpec], btf: Option<&Btf>) -> Vec<MapSpec> {
    maps.iter().map(|map| as_created(map, btf)).collect()
}

fn as_created(map: &MapSpec, btf: Option<&Btf>) -> MapSpec {
    let mut created = map.clone();
    if let Some(inner) = &map.inner {
        created.inner = Some(Box::new(as_created(inner, btf)));
    }
    let keeps_btf = btf.is_some_and(|btf| kernel_takes_btf(map, btf));
    if !keeps_btf {
        created.key_type = None;
        created.value_type = None;
    }
    created
}

/// Whether the map is created with its BTF: libbpf sends it, and `map_check_btf` takes it.
fn kernel_takes_btf(map: &MapSpec, btf: &Btf) -> bool {
    if map.key_type.is_none() && map.value_type.is_none() {
        return false;
    }
    libbpf_sends_btf(map.map_type)
        && fields_allowed(map, btf)
        && match map.map_type {
            BPF_MAP_TYPE_ARRAY | BPF_MAP_TYPE_PERCPU_ARRAY => array_key_fits(map, btf),
            BPF_MAP_TYPE_LPM_TRIE => is_struct(btf, map.key_type),
            _ => true,
        }
}

/// The map types libbpf creates with BTF; the others it creates without (its list in
/// `bpf_object__create_map`), or the kernel takes none (`map_check_no_btf`), so that
/// libbpf's retry drops it.
fn libbpf_sends_btf(map_type: u32) -> bool {
    matches!(
        map_type,
        BPF_MAP_TYPE_HASH
            | BPF_MAP_TYPE_ARRAY
            | BPF_MAP_TYPE_PERCPU_HASH
            | BPF_MAP_TYPE_PERCPU_ARRAY
            | BPF_MAP_TYPE_LRU_HASH
            | BPF_MAP_TYPE_LRU_PERCPU_HASH
            | BPF_MAP_TYPE_LPM_TRIE
            | BPF_MAP_TYPE_SK_STORAGE
            | BPF_MAP_TYPE_INODE_STORAGE
            | BPF_MAP_TYPE_TASK_STORAGE
            | BPF_MAP_TYPE_CGRP_STORAGE
            | BPF_MAP_TYPE_CGROUP_STORAGE
            | BPF_MAP_TYPE_PERCPU_CGROUP_STORAGE
            | BPF_MAP_TYPE_BLOOM_FILTER
    )
}

/// Whether libbpf fails `map` (as created) after creating it: a global data map it made
/// mmap()able (one with a non-static variable) is mapped into memory at once, and the kernel
/// refuses to mmap() a map whose value holds special fields (`bpf_map_mmap`: the map has a
/// BTF record), so libbpf fails the map, and the object, with ENOTSUPP. A `bpf_spin_lock`
/// among the global variables must be hidden (`__hidden`) or static.
pub fn mmap_refused(map: &MapSpec, btf: Option<&Btf>) -> bool {
    let global_data = matches!(map.origin, bpfemu_loader::MapOrigin::GlobalData { .. });
    global_data
        && map.map_flags & BPF_F_MMAPABLE != 0
        && map
            .value_type
            .zip(btf)
            .is_some_and(|(value, btf)| !special_fields_of(btf, value).is_empty())
}

/// `map_check_btf`: each special field of the value only in the map types that hold it.
fn fields_allowed(map: &MapSpec, btf: &Btf) -> bool {
    let Some(value) = map.value_type else {
        return true;
    };
    let t = map.map_type;
    let storage = matches!(
        t,
        BPF_MAP_TYPE_SK_STORAGE
            | BPF_MAP_TYPE_INODE_STORAGE
            | BPF_MAP_TYPE_TASK_STORAGE
            | BPF_MAP_TYPE_CGRP_STORAGE
            | BPF_MAP_TYPE_CGROUP_STORAGE
    );
    special_fields_of(btf, value)
        .iter()
        .all(|field| match field.kind {
            "bpf_spin_lock" | "bpf_res_spin_lock" => {
                matches!(t, BPF_MAP_TYPE_HASH | BPF_MAP_TYPE_ARRAY) || storage
            }
            "bpf_timer" | "bpf_wq" | "bpf_task_work" | "bpf_list_head" | "bpf_rb_root" => matches!(
                t,
                BPF_MAP_TYPE_HASH | BPF_MAP_TYPE_LRU_HASH | BPF_MAP_TYPE_ARRAY
            ),
            _ => true,
        })
}

/// `array_map_check_btf`: the key is a 32-bit int, or none for a global-data section (an
/// array of one DATASEC value).
fn array_key_fits(map: &MapSpec, btf: &Btf) -> bool {
    let Some(key) = map.key_type else {
        let datasec = map
            .value_type
            .and_then(|v| btf.get(v))
            .is_some_and(|v| matches!(v.kind, BtfKind::DataSec { .. }));
        return map.map_type == BPF_MAP_TYPE_ARRAY && map.max_entries == 1 && datasec;
    };
    let key = btf.skip_mods_and_typedefs(key).and_then(|k| btf.get(k));
    matches!(
        key.map(|k| &k.kind),
        Some(BtfKind::Int {
            size: 4,
            bits: 32,
            bit_offset: 0,
            ..
        })
    )
}

fn is_struct(btf: &Btf, ty: Option<TypeId>) -> bool {
    ty.and_then(|t| btf.skip_mods_and_typedefs(t))
        .and_then(|t| btf.get(t))
        .is_some_and(|t| matches!(t.kind, BtfKind::Struct { .. }))
}
