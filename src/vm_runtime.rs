//! The glue from a loaded object ([`bpfemu_loader::Object`]) to the XDP runtime
//! ([`bpfemu_vm::xdp::XdpRuntime`]): the two crates are siblings, so the conversion lives here.
//! Commands do not call it directly: they enter through [`crate::prepare::Prepared`], which
//! verifies what will run before it builds the runtime.
//!
//! [`build_runtime`] turns the loader's map specs into the vm's (with the spin lock offset
//! BTF gives), fills global data and the initial slots of prog arrays and map-in-maps as
//! libbpf does, and hands over every program in the object's order (tail calls name programs
//! by that index). Map contents in and out as JSON are `crate::mapio`'s job.

use bpfemu_isa::uapi::BPF_MAP_TYPE_PROG_ARRAY;
use bpfemu_loader::btf::{Btf, BtfKind, TypeId};
use bpfemu_loader::{MapOrigin, Object};
use bpfemu_vm::maps::MapSpec as VmMapSpec;
use bpfemu_vm::xdp::{MapInit, RuntimeError, XdpConfig, XdpProgramSpec, XdpRuntime};

/// Builds the runtime for every program and map of `obj`. The kfuncs its programs call are
/// named from the kernel it was loaded into (whose BTF ids they hold), whatever
/// `cfg.kfunc_names` says.
pub fn build_runtime(obj: &Object, cfg: XdpConfig) -> Result<XdpRuntime, BuildError> {
    let cfg = XdpConfig {
        kfunc_names: obj.kfunc_names().map_err(|e| e.to_string()),
        ..cfg
    };
    let programs = obj
        .programs
        .iter()
        .map(|p| XdpProgramSpec {
            name: p.name.clone(),
            insns: p.insns.clone(),
        })
        .collect();
    let maps = obj
        .maps
        .iter()
        .map(|m| Ok((vm_spec(obj, m), map_init(obj, m)?)))
        .collect::<Result<Vec<_>, BuildError>>()?;
    let mut runtime = XdpRuntime::new(programs, maps, cfg)?;
    for (index, p) in obj.programs.iter().enumerate() {
        if let Some(attach_type) = p.expected_attach_type {
            runtime.set_expected_attach_type(index, attach_type);
        }
    }
    Ok(runtime)
}

/// Why an object cannot become a runtime.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error("map {map}: initial slot {slot} names {target}, which the object does not have")]
    UnknownSlotTarget {
        map: String,
        slot: u32,
        target: String,
    },
}

/// The vm's description of one of the object's maps.
pub(crate) fn vm_spec(obj: &Object, m: &bpfemu_loader::MapSpec) -> VmMapSpec {
    VmMapSpec {
        name: m.name.clone(),
        map_type: m.map_type,
        key_size: m.key_size,
        value_size: m.value_size,
        max_entries: m.max_entries,
        map_flags: m.map_flags,
        numa_node: m.numa_node,
        map_extra: m.map_extra,
        inner: m.inner.as_ref().map(|i| Box::new(vm_spec(obj, i))),
        spin_lock_off: obj
            .btf
            .as_ref()
            .zip(m.value_type)
            .and_then(|(btf, ty)| spin_lock_offset(btf, ty)),
        global_section: match &m.origin {
            MapOrigin::GlobalData { section } => Some(section.clone()),
            _ => None,
        },
    }
}

/// The byte offset of a top-level `struct bpf_spin_lock` member of the value type.
fn spin_lock_offset(btf: &Btf, ty: TypeId) -> Option<u32> {
    let ty = btf.skip_mods_and_typedefs(ty)?;
    btf.get(ty)?.kind.members().iter().find_map(|m| {
        let member = btf.skip_mods_and_typedefs(m.ty)?;
        let is_lock = btf
            .get(member)
            .is_some_and(|t| t.name == "bpf_spin_lock" && matches!(t.kind, BtfKind::Struct { .. }));
        is_lock.then_some(m.bit_offset / 8)
    })
}

/// Global data contents and the initial slots, by index into the object's maps or programs.
fn map_init(obj: &Object, m: &bpfemu_loader::MapSpec) -> Result<MapInit, BuildError> {
    let mut init = MapInit {
        data: m.initial.clone(),
        ..MapInit::default()
    };
    for (slot, name) in &m.init_slots {
        let target = if m.map_type == BPF_MAP_TYPE_PROG_ARRAY {
            obj.programs.iter().position(|p| &p.name == name)
        } else {
            obj.maps.iter().position(|x| &x.name == name)
        };
        let index = target.ok_or_else(|| BuildError::UnknownSlotTarget {
            map: m.name.clone(),
            slot: *slot,
            target: name.clone(),
        })?;
        if m.map_type == BPF_MAP_TYPE_PROG_ARRAY {
            init.prog_slots.push((*slot, index));
        } else {
            init.map_slots.push((*slot, index));
        }
    }
    Ok(init)
}
