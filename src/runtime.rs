//! The glue from a loaded object ([`bpfemu_loader::Object`]) to the XDP runtime
//! ([`bpfemu_vm::xdp::XdpRuntime`]): the two crates are siblings, so the conversion lives here.
//!
//! [`build_runtime`] turns the loader's map specs into the vm's (with the spin lock offset
//! BTF gives), fills global data and the initial slots of prog arrays and map-in-maps as
//! libbpf does, and hands over every program in the object's order (tail calls name programs
//! by that index). Map contents in and out as JSON are `crate::mapio`'s job.

use anyhow::Result;
use bpfemu_isa::{CallTarget, Insn};
use bpfemu_loader::btf::{Btf, BtfKind, TypeId};
use bpfemu_loader::{MapOrigin, Object, ProgramSpec};
use bpfemu_vm::maps::MapSpec as VmMapSpec;
use bpfemu_vm::xdp::{MapInit, RuntimeError, XdpConfig, XdpProgramSpec, XdpRuntime};

/// Which engine runs an object's programs (`--engine`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EngineChoice {
    /// The reference interpreter.
    #[default]
    Interp,
    /// The Cranelift JIT, every memory access checked as the interpreter checks it.
    Jit,
    /// The Cranelift JIT on host memory directly: only for programs a verifier accepted.
    JitTrusted,
    /// The baseline JIT (x86-64 code straight from each instruction, compiled some eighty
    /// times faster than Cranelift's) on host memory directly: as `JitTrusted`, only for
    /// programs a verifier accepted.
    JitBaseline,
    /// The baseline JIT's checked code: every memory access checked as the interpreter
    /// checks it (as `Jit`), compiled as fast as `JitBaseline`.
    JitBaselineChecked,
}

impl EngineChoice {
    /// The engine's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            EngineChoice::Interp => "interp",
            EngineChoice::Jit => "jit",
            EngineChoice::JitTrusted => "jit-trusted",
            EngineChoice::JitBaseline => "jit-baseline",
            EngineChoice::JitBaselineChecked => "jit-baseline-checked",
        }
    }

    /// Whether the engine reaches host memory unchecked: it runs only what bpfemu's verifier
    /// accepts ([`require_verified`]).
    pub fn is_trusted(self) -> bool {
        matches!(self, EngineChoice::JitTrusted | EngineChoice::JitBaseline)
    }

    /// Makes `runtime` run its programs with this engine (compiling them for the JIT).
    pub fn apply(self, runtime: &mut XdpRuntime) -> Result<(), bpfemu_vm::VmError> {
        self.apply_verified(runtime, None)
    }

    /// [`EngineChoice::apply`] for programs [`require_verified`] accepted, with the stack
    /// bound it found: trusted code then zeroes a frame that comes back only where it can
    /// have written.
    pub fn apply_verified(
        self,
        runtime: &mut XdpRuntime,
        stack_bound: Option<u32>,
    ) -> Result<(), bpfemu_vm::VmError> {
        let jit = match self {
            EngineChoice::Interp => return Ok(()),
            EngineChoice::Jit => bpfemu_jit::Jit::new(bpfemu_jit::Mode::Checked),
            EngineChoice::JitTrusted => bpfemu_jit::Jit::new(bpfemu_jit::Mode::Trusted),
            EngineChoice::JitBaseline => bpfemu_jit::Jit::new(bpfemu_jit::Mode::Trusted).baseline(),
            EngineChoice::JitBaselineChecked => {
                bpfemu_jit::Jit::new(bpfemu_jit::Mode::Checked).baseline()
            }
        };
        match stack_bound {
            Some(bytes) if self.is_trusted() => runtime.set_engine(&jit.with_stack_bound(bytes)),
            _ => runtime.set_engine(&jit),
        }
    }
}

/// Trusted JIT code reaches host memory unchecked, so what it runs must pass bpfemu's verifier
/// first: program `program` of `obj`, and when it makes tail calls every program of the
/// object (a prog array may hold any of them). `Ok` holds the most stack bytes any function
/// of them uses (the verifier's `stack depth`); `Err` the verifier's rejection, placed at its
/// source line as `bpfemu verify` places it; `object` names the file in it.
pub fn require_verified(obj: &Object, object: &str, program: &str) -> Result<u32, String> {
    require_verified_for(EngineChoice::JitTrusted, obj, object, program)
}

/// [`require_verified`] for `engine` (`jit-trusted` or `jit-baseline`), which its messages
/// name.
pub fn require_verified_for(
    engine: EngineChoice,
    obj: &Object,
    object: &str,
    program: &str,
) -> Result<u32, String> {
    let name = engine.name();
    let chosen = obj.programs.iter().filter(|p| p.name == program);
    let to_verify: Vec<&ProgramSpec> = if chosen.clone().any(makes_tail_calls) {
        obj.programs.iter().collect()
    } else {
        chosen.collect()
    };
    let mut stack_bound = 0;
    for spec in to_verify {
        let verdict = bpfemu_verifier::verify(
            &bpfemu_verifier::ProgramInput::new(obj, spec),
            &bpfemu_verifier::Options::default(),
        );
        if verdict.reads_kernel_memory() {
            return Err(format!(
                "{object}: program {} reads kernel structures (a map's internals) that bpfemu \
                 does not emulate: --engine {name} cannot run it; run it with --engine jit \
                 (every access checked)",
                spec.name
            ));
        }
        if !verdict.is_accepted() {
            let rejected = crate::verify::ProgramVerdict {
                program: spec,
                verdict,
                kernel: &obj.kernel,
            };
            return Err(format!(
                "{}--engine {name} runs only what bpfemu's verifier accepts, and it rejects \
                 program {}: run it with --engine jit (every access checked)",
                crate::verify::error_text(object, &rejected),
                spec.name
            ));
        }
        let deepest = verdict.stats.stack_depth.iter().copied().max().unwrap_or(0);
        stack_bound = stack_bound.max(deepest);
    }
    Ok(stack_bound)
}

/// `BPF_FUNC_tail_call`.
const TAIL_CALL: i32 = 12;

/// Whether the program calls `bpf_tail_call` (an undecodable one counts as calling it).
fn makes_tail_calls(spec: &ProgramSpec) -> bool {
    let mut pc = 0;
    while pc < spec.insns.len() {
        match Insn::decode(&spec.insns, pc) {
            Ok((Insn::Call(CallTarget::Helper(TAIL_CALL)), _)) => return true,
            Ok((_, slots)) => pc += slots.max(1),
            Err(_) => return true,
        }
    }
    false
}

/// `BPF_MAP_TYPE_PROG_ARRAY`.
const PROG_ARRAY: u32 = 3;

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

fn vm_spec(obj: &Object, m: &bpfemu_loader::MapSpec) -> VmMapSpec {
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
        let target = if m.map_type == PROG_ARRAY {
            obj.programs.iter().position(|p| &p.name == name)
        } else {
            obj.maps.iter().position(|x| &x.name == name)
        };
        let index = target.ok_or_else(|| BuildError::UnknownSlotTarget {
            map: m.name.clone(),
            slot: *slot,
            target: name.clone(),
        })?;
        if m.map_type == PROG_ARRAY {
            init.prog_slots.push((*slot, index));
        } else {
            init.map_slots.push((*slot, index));
        }
    }
    Ok(init)
}
