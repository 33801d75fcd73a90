//! The checks 6.18 runs before it explores a single path, in the kernel's order:
//!
//! 1. `add_subprog_and_kfunc`: every `call pc+N` and every `ld_imm64` of a function
//!    (`BPF_PSEUDO_FUNC`) starts a subprogram ("call to invalid destination").
//! 2. `check_subprogs`: every jump stays inside its subprogram ("jump out of range from insn
//!    %d to %d") and every subprogram ends in `exit` or `ja` ("last insn is not an exit or
//!    jmp").
//! 3. `check_btf_info` without BTF (`check_abnormal_return`): no `ld_abs` or tail call in a
//!    subprogram other than the main one.
//! 4. `resolve_pseudo_ldimm64`: `ldx` reserved fields, the shape of every `ld_imm64` and the
//!    maps it names, and that every opcode exists ("unknown opcode %02x").
//! 5. `check_cfg`: a depth-first walk from instruction 0 ("unreachable insn %d", "jump into
//!    the middle of ldimm64 insn %d"). A root loader may have back-edges: loops are bounded
//!    by exploration, not here.
//!
//! The checks look at raw slots, as the kernel does ([`precheck`] runs before the program is
//! decoded). Reserved fields of the other classes are the kernel's concern only when
//! exploration reaches the instruction: [`precheck`] replaces each slot the strict decoder
//! refuses by a placeholder of the same control flow; exploration reports the kernel's
//! message for it on arrival ([`check_reached`], [`malformed_message`]).
//! [`check_program`] then fills the environment: subprograms and prune points. After
//! exploration, [`check_max_stack_depth`] limits the stack of every call chain.

use crate::env::{Env, SubprogInfo};
use crate::log::Log;
use crate::profile::insns::{self as insns_profile, Feature, Reserved};
use crate::state::VerifierState;
use crate::{Errno, ProgramInput, Reject};
use bpfemu_isa::opcode::*;
use bpfemu_isa::uapi::BPF_MAP_TYPE_ARENA;
use bpfemu_isa::{AtomicOp, CallTarget, Insn, KernelVersion, LdImm64Kind, RawInsn, Reg};
use bpfemu_loader::Kernel;

/// `BPF_PSEUDO_CALL` in the `src` of a call; `BPF_PSEUDO_FUNC` in the `src` of an `ld_imm64`.
const PSEUDO_CALL: u8 = 1;
const PSEUDO_KFUNC_CALL: u8 = 2;
const PSEUDO_MAP_FD: u8 = 1;
const PSEUDO_MAP_VALUE: u8 = 2;
const PSEUDO_BTF_ID: u8 = 3;
const PSEUDO_FUNC: u8 = 4;
const PSEUDO_MAP_IDX: u8 = 5;
const PSEUDO_MAP_IDX_VALUE: u8 = 6;

/// `BPF_MAX_SUBPROGS`.
pub const MAX_SUBPROGS: usize = 256;
/// `MAX_USED_MAPS`.
pub const MAX_USED_MAPS: usize = 64;
/// `MAX_BPF_STACK`: the combined stack of a call chain.
pub const MAX_BPF_STACK: i32 = 512;
/// `BPF_MAX_VAR_OFF`: the largest direct map value offset.
const MAX_VAR_OFF: u32 = 1 << 29;

const EINVAL: i32 = 22;
const EBADF: i32 = 9;
const E2BIG: i32 = 7;
const EACCES: i32 = 13;
const EFAULT: i32 = 14;
const EBUSY: i32 = 16;
const ERANGE: i32 = 34;
/// The page size of the kernel profile (x86-64): an arena spans `max_entries` pages.
const PAGE_SIZE: u64 = 4096;

/// What the kernel needs to know of a map that an `ld_imm64` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct MapShape {
    pub map_type: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub map_flags: u32,
}

impl From<&bpfemu_loader::MapSpec> for MapShape {
    fn from(spec: &bpfemu_loader::MapSpec) -> MapShape {
        MapShape {
            map_type: spec.map_type,
            key_size: spec.key_size,
            value_size: spec.value_size,
            max_entries: spec.max_entries,
            map_flags: spec.map_flags,
        }
    }
}

/// A rejection before exploration: the kernel's message and the errno `BPF_PROG_LOAD` returns.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CheckError {
    pub message: String,
    pub errno: i32,
    /// The instruction the message is about, when there is one.
    pub insn: Option<usize>,
    /// The kernel logs the message without a newline (`check_btf_func_early`'s), so the
    /// next log line is glued to it.
    pub unterminated: bool,
}

impl CheckError {
    pub(crate) fn new(errno: i32, insn: Option<usize>, message: String) -> CheckError {
        CheckError {
            message,
            errno,
            insn,
            unterminated: false,
        }
    }

    fn einval(insn: usize, message: impl Into<String>) -> CheckError {
        CheckError::new(EINVAL, Some(insn), message.into())
    }
}

/// One subprogram: `[start, end)` in slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Subprog {
    pub start: usize,
    pub end: usize,
    pub has_tail_call: bool,
    pub has_ld_abs: bool,
}

/// What an `ld_imm64` refers to after `resolve_pseudo_ldimm64`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LdImm64Ref {
    /// A map (`src` 1 or 5): index into the program's maps.
    Map { map: usize },
    /// The address of a map's value at `off` (`src` 2 or 6).
    MapValue { map: usize, off: u32 },
    /// A subprogram's address (`src` 4).
    Func { subprog: usize },
    /// A kernel symbol by BTF id (`src` 3).
    BtfId { btf_id: i32 },
}

/// The program's shape as the checks left it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckedProgram {
    /// Sorted by start; subprogram 0 starts at 0.
    pub subprogs: Vec<Subprog>,
    /// Per `ld_imm64` that names something: (its slot, what it names).
    pub ld_imm64: Vec<(usize, LdImm64Ref)>,
    /// Maps the program uses, in first-use order (`used_maps`), as indices into the maps.
    pub used_maps: Vec<usize>,
    /// `insn_state` of `check_cfg`: whether the walk reached each slot.
    pub reachable: Vec<bool>,
}

impl CheckedProgram {
    /// The subprogram that slot `pc` belongs to.
    pub fn subprog_of(&self, pc: usize) -> usize {
        self.subprogs.partition_point(|s| s.start <= pc) - 1
    }

    /// The subprogram starting at `pc`, if one does (`find_subprog`).
    pub fn subprog_at(&self, pc: usize) -> Option<usize> {
        self.subprogs.iter().position(|s| s.start == pc)
    }

    /// The kernel's level-2 lines `func#%d @%d`.
    pub fn func_lines(&self) -> Vec<String> {
        self.subprogs
            .iter()
            .enumerate()
            .map(|(i, s)| format!("func#{i} @{}", s.start))
            .collect()
    }
}

/// Runs the pre-exploration checks (steps 1 to 5) over `insns`, with `maps` standing for the map fds (an
/// `ld_imm64` map fd or index is an index into it), for a program loaded without BTF
/// function info.
pub fn check_raw(
    insns: &[RawInsn],
    maps: &[MapShape],
    kernel: &Kernel,
) -> Result<CheckedProgram, CheckError> {
    check_raw_with(insns, maps, false, kernel)
}

/// [`check_raw`] for a program loaded with (`has_func_info`) or without BTF function
/// info: only without it are `ld_abs` and tail calls refused in subprograms.
pub fn check_raw_with(
    insns: &[RawInsn],
    maps: &[MapShape],
    has_func_info: bool,
    kernel: &Kernel,
) -> Result<CheckedProgram, CheckError> {
    if insns.is_empty() {
        return Err(CheckError::new(E2BIG, None, String::new()));
    }
    let starts = add_subprogs(insns, kernel.version())?;
    let subprogs = check_subprogs(insns, &starts, kernel.version())?;
    if !has_func_info {
        check_abnormal_return(&subprogs)?;
    }
    let (ld_imm64, used_maps) = resolve_pseudo_ldimm64(kernel, insns, maps, &subprogs, &[])?;
    let reachable = check_cfg(insns, kernel.version())?;
    if crate::behaviour::refuses_recursion_before_the_walk(kernel.version()) {
        refuse_recursion(insns, &subprogs, &|_| String::new())?;
    }
    Ok(CheckedProgram {
        subprogs,
        ld_imm64,
        used_maps,
        reachable,
    })
}

fn is_ld_imm64(raw: &RawInsn) -> bool {
    raw.code == BPF_LD | BPF_IMM | BPF_DW
}

/// Whether slot `pc` begins an instruction (is not the second slot of an `ld_imm64`).
fn ld_imm64_start(insns: &[RawInsn], pc: usize) -> bool {
    let mut i = 0;
    while i < pc {
        i += if is_ld_imm64(&insns[i]) { 2 } else { 1 };
    }
    i == pc
}

fn is_pseudo_call(raw: &RawInsn) -> bool {
    raw.code == BPF_JMP | BPF_CALL && raw.src == PSEUDO_CALL
}

fn is_pseudo_func(raw: &RawInsn) -> bool {
    is_ld_imm64(raw) && raw.src == PSEUDO_FUNC
}

/// `add_subprog_and_kfunc`: the sorted subprogram starts, 0 first. A version without
/// `ld_imm64` of functions (5.10) starts subprograms at calls only.
fn add_subprogs(insns: &[RawInsn], version: KernelVersion) -> Result<Vec<usize>, CheckError> {
    let funcs_known = insns_profile::ldimm64_kind_known(version, PSEUDO_FUNC);
    let mut starts = vec![0usize];
    for (i, raw) in insns.iter().enumerate() {
        let starts_subprog = is_pseudo_call(raw) || (funcs_known && is_pseudo_func(raw));
        if !starts_subprog {
            continue;
        }
        let target = i as i64 + raw.imm as i64 + 1;
        if target < 0 || target >= insns.len() as i64 {
            return Err(CheckError::einval(i, "call to invalid destination"));
        }
        let target = target as usize;
        if let Err(pos) = starts.binary_search(&target) {
            if starts.len() >= MAX_SUBPROGS {
                return Err(CheckError::new(
                    E2BIG,
                    Some(i),
                    "too many subprograms".to_owned(),
                ));
            }
            starts.insert(pos, target);
        }
    }
    Ok(starts)
}

/// `check_subprogs`: jumps stay in their subprogram, no subprogram falls into the next. A
/// kernel without `gotol` (5.10) reads a `BPF_JMP32 | BPF_JA`'s target from `off`, as every
/// other jump's, and does not take it as a subprogram's last instruction: this check runs
/// before the opcode table refuses the instruction, so its words are the ones the user sees.
fn check_subprogs(
    insns: &[RawInsn],
    starts: &[usize],
    version: KernelVersion,
) -> Result<Vec<Subprog>, CheckError> {
    let long_jump = insns_profile::has(version, Feature::LongJump);
    let mut subprogs: Vec<Subprog> = starts
        .iter()
        .enumerate()
        .map(|(k, &start)| Subprog {
            start,
            end: starts.get(k + 1).copied().unwrap_or(insns.len()),
            has_tail_call: false,
            has_ld_abs: false,
        })
        .collect();
    for sub in &mut subprogs {
        for (i, &raw) in insns.iter().enumerate().take(sub.end).skip(sub.start) {
            let class = raw.code & 0x07;
            if raw.code == BPF_JMP | BPF_CALL && raw.src == 0 && raw.imm == 12 {
                sub.has_tail_call = true;
            }
            if class == BPF_LD && matches!(raw.code & 0xe0, BPF_ABS | BPF_IND) {
                sub.has_ld_abs = true;
            }
            let op = raw.code & 0xf0;
            if (class == BPF_JMP || class == BPF_JMP32) && op != BPF_EXIT && op != BPF_CALL {
                let off = if long_jump && raw.code == BPF_JMP32 | BPF_JA {
                    raw.imm as i64
                } else {
                    raw.off as i64
                };
                let target = i as i64 + off + 1;
                if target < sub.start as i64 || target >= sub.end as i64 {
                    return Err(CheckError::einval(
                        i,
                        format!("jump out of range from insn {i} to {target}"),
                    ));
                }
            }
        }
        let last = insns[sub.end - 1].code;
        let ends_by_long_jump = long_jump && last == BPF_JMP32 | BPF_JA;
        if last != BPF_JMP | BPF_EXIT && !ends_by_long_jump && last != BPF_JMP | BPF_JA {
            return Err(CheckError::einval(
                sub.end - 1,
                "last insn is not an exit or jmp",
            ));
        }
    }
    Ok(subprogs)
}

/// `check_abnormal_return`: without BTF, the kernel cannot tell whether a subprogram's
/// `ld_abs` or tail call leaves it abnormally, so it refuses both outside the main program.
fn check_abnormal_return(subprogs: &[Subprog]) -> Result<(), CheckError> {
    for sub in subprogs.iter().skip(1) {
        if sub.has_ld_abs {
            return Err(CheckError::new(
                EINVAL,
                None,
                "LD_ABS is not allowed in subprogs without BTF".to_owned(),
            ));
        }
        if sub.has_tail_call {
            return Err(CheckError::new(
                EINVAL,
                None,
                "tail_call is not allowed in subprogs without BTF".to_owned(),
            ));
        }
    }
    Ok(())
}

/// Result of [`resolve_pseudo_ldimm64`]: the references and the used maps.
type Resolved = (Vec<(usize, LdImm64Ref)>, Vec<usize>);

/// `resolve_pseudo_ldimm64`: `ldx` reserved fields, `ld_imm64` forms and maps, known opcodes.
/// `fd_written`: the `ld_imm64`s whose imm is a file descriptor as written in the object
/// (no relocation made it an index into `maps`); the kernel finds no map of the load there.
fn resolve_pseudo_ldimm64(
    kernel: &Kernel,
    insns: &[RawInsn],
    maps: &[MapShape],
    subprogs: &[Subprog],
    fd_written: &[usize],
) -> Result<Resolved, CheckError> {
    let version = kernel.version();
    let upfront_fields = insns_profile::has(version, Feature::UpfrontFieldChecks);
    let mut refs = Vec::new();
    let mut used: Vec<usize> = Vec::new();
    let mut i = 0;
    while i < insns.len() {
        let raw = insns[i];
        if upfront_fields && let Some(r) = [raw.dst, raw.src].into_iter().find(|&r| r > 10) {
            return Err(CheckError::einval(i, format!("R{r} is invalid")));
        }
        // Until 7.x the `ldx` fields are checked ahead of everything else of the slot.
        if !upfront_fields
            && raw.code & 0x07 == BPF_LDX
            && insns_profile::ldx_reserved(version, raw.code, raw.imm)
        {
            return Err(CheckError::einval(i, "BPF_LDX uses reserved fields"));
        }
        if insns_profile::stx_reserved_before_walk(version, raw.code, raw.imm) {
            return Err(CheckError::einval(i, "BPF_STX uses reserved fields"));
        }
        if is_ld_imm64(&raw) {
            if let Some(r) = resolve_one_ldimm64(kernel, insns, i, maps, subprogs, fd_written)? {
                if let LdImm64Ref::Map { map } | LdImm64Ref::MapValue { map, .. } = r
                    && !used.contains(&map)
                {
                    if used.len() >= MAX_USED_MAPS {
                        return Err(CheckError::new(
                            E2BIG,
                            Some(i),
                            format!("The program uses more than {MAX_USED_MAPS} maps"),
                        ));
                    }
                    check_one_arena(maps, &used, map, i)?;
                    used.push(map);
                }
                refs.push((i, r));
            }
            i += 2;
            continue;
        }
        if !insns_profile::opcode_known(version, raw.code, opcode_in_insntable(raw.code)) {
            return Err(CheckError::einval(
                i,
                format!("unknown opcode {:02x}", raw.code),
            ));
        }
        // 7.x checks every instruction's fields here, reached or not.
        if upfront_fields && let Some(message) = field_refusal(raw, version) {
            return Err(CheckError::einval(i, message));
        }
        i += 1;
    }
    Ok((refs, used))
}

/// `check_map_prog_compatibility`: a program may use one arena (`prog->aux->arena`).
fn check_one_arena(
    maps: &[MapShape],
    used: &[usize],
    map: usize,
    i: usize,
) -> Result<(), CheckError> {
    let is_arena = |m: usize| maps[m].map_type == BPF_MAP_TYPE_ARENA;
    if is_arena(map) && used.iter().any(|&m| is_arena(m)) {
        return Err(CheckError::new(
            EBUSY,
            Some(i),
            "Only one arena per program".to_owned(),
        ));
    }
    Ok(())
}

fn resolve_one_ldimm64(
    kernel: &Kernel,
    insns: &[RawInsn],
    i: usize,
    maps: &[MapShape],
    subprogs: &[Subprog],
    fd_written: &[usize],
) -> Result<Option<LdImm64Ref>, CheckError> {
    let raw = insns[i];
    let version = kernel.version();
    let next = match insns.get(i + 1) {
        Some(n) if n.code == 0 && n.dst == 0 && n.src == 0 && n.off == 0 => *n,
        _ => return Err(CheckError::einval(i, "invalid bpf_ld_imm64 insn")),
    };
    if insns_profile::has(version, Feature::UpfrontFieldChecks) && raw.off != 0 {
        return Err(CheckError::einval(i, "BPF_LD_IMM64 uses reserved fields"));
    }
    if !insns_profile::ldimm64_kind_known(version, raw.src) {
        return Err(CheckError::einval(i, "unrecognized bpf_ld_imm64 insn"));
    }
    match raw.src {
        0 => return Ok(None),
        PSEUDO_BTF_ID => {
            crate::call::ksym::check_pseudo_btf_id(kernel.btf().ok(), raw.imm, next.imm, version)
                .map_err(|e| CheckError::new(e.errno, Some(i), e.message))?;
            return Ok(Some(LdImm64Ref::BtfId { btf_id: raw.imm }));
        }
        PSEUDO_FUNC => {
            let target = (i as i64 + raw.imm as i64 + 1) as usize;
            let subprog = subprogs
                .iter()
                .position(|s| s.start == target)
                .ok_or_else(|| {
                    CheckError::new(EFAULT, Some(i), "verifier bug: no subprog".to_owned())
                })?;
            return Ok(Some(LdImm64Ref::Func { subprog }));
        }
        PSEUDO_MAP_VALUE | PSEUDO_MAP_IDX_VALUE => {}
        PSEUDO_MAP_FD | PSEUDO_MAP_IDX if next.imm == 0 => {}
        _ => return Err(CheckError::einval(i, "unrecognized bpf_ld_imm64 insn")),
    }
    let by_idx = matches!(raw.src, PSEUDO_MAP_IDX | PSEUDO_MAP_IDX_VALUE);
    let map = usize::try_from(raw.imm)
        .ok()
        .filter(|&m| m < maps.len() && (by_idx || !fd_written.contains(&i)))
        .ok_or_else(|| {
            if by_idx {
                CheckError::new(
                    EINVAL,
                    Some(i),
                    // Every profiled kernel, 6.18 included, says it without the index.
                    "fd_idx without fd_array is invalid".to_owned(),
                )
            } else {
                CheckError::new(
                    EBADF,
                    Some(i),
                    format!("fd {} is not pointing to valid bpf_map", raw.imm),
                )
            }
        })?;
    if matches!(raw.src, PSEUDO_MAP_FD | PSEUDO_MAP_IDX) {
        return Ok(Some(LdImm64Ref::Map { map }));
    }
    let off = next.imm as u32;
    let map_bounds_only = insns_profile::has(version, Feature::MapValueOffsetByMapOnly);
    if off >= MAX_VAR_OFF && !map_bounds_only {
        return Err(CheckError::new(
            EINVAL,
            Some(i),
            format!("direct value offset of {off} is not allowed"),
        ));
    }
    let shape = maps[map];
    if shape.map_type == BPF_MAP_TYPE_ARENA {
        return arena_direct_value(shape, map, off, i, map_bounds_only);
    }
    if !has_direct_value_access(shape.map_type) {
        return Err(CheckError::new(
            EINVAL,
            Some(i),
            "no direct value access support for this map type".to_owned(),
        ));
    }
    if shape.max_entries != 1 || off >= shape.value_size {
        return Err(CheckError::new(
            EINVAL,
            Some(i),
            format!(
                "invalid access to map value pointer, value_size={} off={off}",
                shape.value_size
            ),
        ));
    }
    Ok(Some(LdImm64Ref::MapValue { map, off }))
}

/// `arena_map_direct_value_addr`: the arena's user address plus `off`, which may reach the
/// arena's end but not pass it (from 7.x, `below_end`: not reach it either). The register
/// gets a scalar (`check_ld_imm`).
fn arena_direct_value(
    shape: MapShape,
    map: usize,
    off: u32,
    i: usize,
    below_end: bool,
) -> Result<Option<LdImm64Ref>, CheckError> {
    let arena_size = shape.max_entries as u64 * PAGE_SIZE;
    if off as u64 > arena_size || (below_end && off as u64 == arena_size) {
        return Err(CheckError::new(
            ERANGE,
            Some(i),
            format!(
                "invalid access to map value pointer, value_size={} off={off}",
                shape.value_size
            ),
        ));
    }
    Ok(Some(LdImm64Ref::MapValue { map, off }))
}

/// Map types with `map_direct_value_addr` (array, and the arena's own handling is apart).
fn has_direct_value_access(map_type: u32) -> bool {
    map_type == bpfemu_isa::uapi::BPF_MAP_TYPE_ARRAY
}

/// `bpf_opcode_in_insntable`: the opcodes 6.18's interpreter table knows.
pub fn opcode_in_insntable(code: u8) -> bool {
    let class = code & 0x07;
    let op = code & 0xf0;
    let x = code & BPF_X != 0;
    match class {
        BPF_ALU | BPF_ALU64 => match op {
            BPF_NEG => !x,
            BPF_END => class == BPF_ALU || !x,
            0xe0 | 0xf0 => false,
            _ => true,
        },
        BPF_JMP => match op {
            BPF_JA | BPF_CALL | BPF_EXIT | BPF_JCOND => !x,
            0xf0 => false,
            _ => true,
        },
        BPF_JMP32 => match op {
            BPF_JA => !x,
            BPF_CALL | BPF_EXIT | BPF_JCOND | 0xf0 => false,
            _ => true,
        },
        BPF_LDX => {
            matches!(code & 0xe0, BPF_MEM) || (code & 0xe0 == BPF_MEMSX && code & 0x18 != BPF_DW)
        }
        BPF_ST => code & 0xe0 == BPF_MEM,
        BPF_STX => matches!(code & 0xe0, BPF_MEM | BPF_ATOMIC),
        _ => {
            // BPF_LD: legacy packet loads of 1, 2, 4 bytes and ld_imm64.
            code == BPF_LD | BPF_IMM | BPF_DW
                || (matches!(code & 0xe0, BPF_ABS | BPF_IND) && code & 0x18 != BPF_DW)
        }
    }
}

/// `insn_state` marks of `check_cfg`.
const DISCOVERED: u8 = 1;
const EXPLORED: u8 = 2;

/// `check_cfg`: every slot reached from instruction 0, no jump into an `ld_imm64`'s second
/// slot (5.10 allows it: the walk refuses the slot when it gets there). Returns which slots
/// the walk reached.
fn check_cfg(insns: &[RawInsn], version: KernelVersion) -> Result<Vec<bool>, CheckError> {
    let middle_check = insns_profile::has(version, Feature::LdImm64MiddleCheck);
    let any_edge_loops = crate::behaviour::closes_loops_by_any_edge(version);
    let n = insns.len();
    let mut state = vec![0u8; n];
    let mut stack = vec![0usize];
    state[0] = DISCOVERED;
    let mut next_edge = vec![0u8; n];
    while let Some(&t) = stack.last() {
        let succs = successors(insns, t);
        let e = next_edge[t] as usize;
        if e < succs.len() {
            next_edge[t] += 1;
            let (w, jump) = succs[e];
            if w < 0 || w >= n as i64 {
                return Err(CheckError::einval(
                    t,
                    format!("jump out of range from insn {t} to {w}"),
                ));
            }
            let w = w as usize;
            if state[w] == 0 {
                state[w] = DISCOVERED;
                stack.push(w);
            } else if state[w] == DISCOVERED && !jump && !any_edge_loops {
                return Err(CheckError::einval(
                    t,
                    format!("back-edge from insn {t} to {w}"),
                ));
            }
            // Otherwise a discovered (on the stack) target is a back-edge: a root loader may
            // loop.
            continue;
        }
        state[t] = EXPLORED;
        stack.pop();
    }
    let mut i = 0;
    while i < n {
        if state[i] != EXPLORED {
            return Err(CheckError::einval(i, format!("unreachable insn {i}")));
        }
        if is_ld_imm64(&insns[i]) {
            if middle_check && i + 1 < n && state[i + 1] != 0 {
                return Err(CheckError::einval(
                    i,
                    format!("jump into the middle of ldimm64 insn {i}"),
                ));
            }
            i += 1;
        }
        i += 1;
    }
    Ok(state.iter().map(|&s| s == EXPLORED).collect())
}

/// 7.x's `sort_subprogs_topo`: the call graph, walked depth first from each subprogram in
/// turn, through the calls each one's reachable instructions make in their post-order
/// ([`subprog_postorders`]), may not come back to a subprogram still on the walk's stack. A
/// callback named by an `ld_imm64` is walked into but may close a cycle.
fn refuse_recursion(
    insns: &[RawInsn],
    subprogs: &[Subprog],
    name: &dyn Fn(usize) -> String,
) -> Result<(), CheckError> {
    const ON_STACK: u8 = 1;
    const DONE: u8 = 2;
    let postorders = subprog_postorders(insns, subprogs);
    let mut color = vec![0u8; subprogs.len()];
    for root in 0..subprogs.len() {
        if color[root] != 0 {
            continue;
        }
        color[root] = ON_STACK;
        let mut stack = vec![root];
        while let Some(&cur) = stack.last() {
            let mut pushed = false;
            for &pc in &postorders[cur] {
                let raw = insns[pc];
                let callback = is_pseudo_func(&raw);
                if !is_pseudo_call(&raw) && !callback {
                    continue;
                }
                let target = pc as i64 + raw.imm as i64 + 1;
                let Some(callee) = subprogs.iter().position(|s| s.start as i64 == target) else {
                    continue;
                };
                match color[callee] {
                    DONE => continue,
                    ON_STACK if callback => continue,
                    ON_STACK => {
                        return Err(CheckError::einval(
                            pc,
                            format!("recursive call from {}() to {}()", name(cur), name(callee)),
                        ));
                    }
                    _ => {}
                }
                color[callee] = ON_STACK;
                stack.push(callee);
                pushed = true;
                break;
            }
            if !pushed {
                color[cur] = DONE;
                stack.pop();
            }
        }
    }
    Ok(())
}

/// Each subprogram's instructions in 7.x's post-order (`bpf_compute_postorder`): a walk from
/// its first instruction that pushes every unseen successor of the top at once (the
/// fall-through before the jump target, a call only falling through), and records an
/// instruction when it comes back to the top explored.
fn subprog_postorders(insns: &[RawInsn], subprogs: &[Subprog]) -> Vec<Vec<usize>> {
    let mut state = vec![0u8; insns.len()];
    subprogs
        .iter()
        .map(|s| {
            let mut order = Vec::new();
            let mut stack = vec![s.start];
            while let Some(&top) = stack.last() {
                state[top] |= DISCOVERED;
                if state[top] & EXPLORED != 0 {
                    order.push(top);
                    stack.pop();
                    continue;
                }
                for w in flow_successors(&insns[top], top) {
                    if w < insns.len() && state[w] == 0 {
                        stack.push(w);
                        state[w] |= DISCOVERED;
                    }
                }
                state[top] |= EXPLORED;
            }
            order
        })
        .collect()
}

/// 7.x's `bpf_insn_successors` without jump tables: where control goes next inside the
/// subprogram.
fn flow_successors(raw: &RawInsn, t: usize) -> Vec<usize> {
    let class = raw.code & 0x07;
    let op = raw.code & 0xf0;
    let jumps = class == BPF_JMP || class == BPF_JMP32;
    let can_fall = !(jumps && matches!(op, BPF_EXIT | BPF_JA));
    let can_jump = jumps && !matches!(op, BPF_EXIT | BPF_CALL) && op != 0xf0;
    let mut out = Vec::with_capacity(2);
    if can_fall {
        out.push(t + if is_ld_imm64(raw) { 2 } else { 1 });
    }
    if can_jump {
        let off = if raw.code == BPF_JMP32 | BPF_JA {
            raw.imm as i64
        } else {
            raw.off as i64
        };
        if let Ok(w) = usize::try_from(t as i64 + off + 1) {
            out.push(w);
        }
    }
    out
}

/// The edges `visit_insn` pushes from `t`, in the kernel's order (fall-through first), each
/// with whether it is a jump's: before 6.12 (`push_insn`'s `loop_ok`) only a jump's edge, or the
/// edge into a callback an `ld_imm64` names, may close a loop; the fall-through of any other
/// instruction or call, and a call's edge into its callee, may not.
fn successors(insns: &[RawInsn], t: usize) -> Vec<(i64, bool)> {
    let raw = insns[t];
    let ti = t as i64;
    if is_pseudo_func(&raw) {
        return vec![(ti + 2, false), (ti + raw.imm as i64 + 1, true)];
    }
    let class = raw.code & 0x07;
    if class != BPF_JMP && class != BPF_JMP32 {
        let size = if is_ld_imm64(&raw) { 2 } else { 1 };
        return vec![(ti + size, false)];
    }
    match raw.code & 0xf0 {
        BPF_EXIT => vec![],
        BPF_CALL => {
            if raw.src == PSEUDO_CALL {
                vec![(ti + 1, false), (ti + raw.imm as i64 + 1, false)]
            } else {
                vec![(ti + 1, false)]
            }
        }
        BPF_JA => {
            let off = if class == BPF_JMP {
                raw.off as i64
            } else {
                raw.imm as i64
            };
            vec![(ti + off + 1, true)]
        }
        _ => vec![(ti + 1, true), (ti + raw.off as i64 + 1, true)],
    }
}

/// `check_max_stack_depth` after exploration: every call chain from the main program (and
/// from each async callback) may use at most 512 bytes of stack in total, each frame's depth
/// rounded as the JIT rounds it; a subprogram with a tail call may not be reached with 256
/// bytes or more below it. Callbacks whose address is taken count as calls, as in the kernel.
pub fn check_stack_depths(env: &mut Env<'_>) -> Result<(), Reject> {
    let insns = env.input.insns;
    let starts: Vec<usize> = env.subprogs.iter().map(|s| s.start).collect();
    let calls: Vec<Vec<usize>> = (0..starts.len())
        .map(|i| {
            let end = starts.get(i + 1).copied().unwrap_or(insns.len());
            (starts[i]..end)
                .filter(|&pc| is_pseudo_call(&insns[pc]) || is_pseudo_func(&insns[pc]))
                .filter_map(|pc| {
                    let target = (pc as i64 + insns[pc].imm as i64 + 1) as usize;
                    starts.iter().position(|&s| s == target)
                })
                .collect()
        })
        .collect();
    let depths: Vec<i32> = env
        .subprogs
        .iter()
        .map(|s| round_up_stack_depth(env.input.kernel.version(), s.stack_depth as i32))
        .collect();
    let tail_calls: Vec<bool> = env.subprogs.iter().map(|s| s.has_tail_call).collect();
    let roots: Vec<usize> = (0..env.subprogs.len())
        .filter(|&i| i == 0 || env.subprogs[i].is_async_cb)
        .collect();
    let kernel = env.input.kernel.version();
    let frames = FrameRules {
        max: crate::behaviour::max_call_frames(kernel),
        afresh_at: match crate::behaviour::counts_frames_afresh_at_global_functions(kernel) {
            true => env.subprogs.iter().map(|s| s.is_global).collect(),
            false => vec![false; env.subprogs.len()],
        },
    };
    check_max_stack_depth(&depths, &calls, &tail_calls, &roots, &frames).map_err(|e| {
        let errno = errno_of(e.errno);
        env.reject(errno, e.message)
    })
}

/// `round_up_stack_depth` with the JIT on (as on x86-64 with `bpf_jit_enable`): 16 bytes;
/// older kernels count at least 32 bytes a frame, rounded to 32.
fn round_up_stack_depth(kernel: KernelVersion, depth: i32) -> i32 {
    if !crate::behaviour::rounds_stack_depth_to_16(kernel) {
        return (depth.max(1) + 31) & !31;
    }
    (depth + 15) & !15
}

/// How [`check_max_stack_depth`] counts a chain's frames: at most `max`, counted from 0
/// again at a subprogram whose `afresh_at` is set (a global function, where the kernel does).
pub struct FrameRules {
    pub max: usize,
    pub afresh_at: Vec<bool>,
}

/// The walk of [`check_stack_depths`] over plain data: `depths[i]` is subprogram `i`'s
/// rounded stack depth, `calls[i]` the subprograms it calls (or takes the address of) in
/// instruction order, `tail_calls[i]` whether it has a tail call.
pub fn check_max_stack_depth(
    depths: &[i32],
    calls: &[Vec<usize>],
    tail_calls: &[bool],
    roots: &[usize],
    rules: &FrameRules,
) -> Result<(), CheckError> {
    for &root in roots {
        // (subprogram, its next call to follow, its frame number in the count)
        let mut frames: Vec<(usize, usize, usize)> = vec![(root, 0, 0)];
        let mut total = depths[root];
        if total > MAX_BPF_STACK {
            return Err(stack_too_large(frames.len(), total));
        }
        while let Some(&mut (sub, ref mut next, frame)) = frames.last_mut() {
            let Some(&callee) = calls[sub].get(*next) else {
                total -= depths[sub];
                frames.pop();
                continue;
            };
            *next += 1;
            let callee_frame = match rules.afresh_at[callee] {
                true => 0,
                false => frame + 1,
            };
            if callee_frame >= rules.max {
                return Err(CheckError::new(
                    E2BIG,
                    None,
                    format!("the call stack of {callee_frame} frames is too deep !"),
                ));
            }
            if tail_calls[callee] && total >= 256 {
                return Err(CheckError::new(
                    EACCES,
                    None,
                    format!(
                        "tail_calls are not allowed when call stack of previous frames is {total} bytes. Too large"
                    ),
                ));
            }
            frames.push((callee, 0, callee_frame));
            total += depths[callee];
            if total > MAX_BPF_STACK {
                return Err(stack_too_large(frames.len(), total));
            }
        }
    }
    Ok(())
}

fn stack_too_large(frames: usize, total: i32) -> CheckError {
    CheckError::new(
        EACCES,
        None,
        format!("combined stack size of {frames} calls is {total}. Too large"),
    )
}

/// What [`precheck`] leaves for the decoder and the walk.
#[derive(Clone, Debug)]
pub struct Prechecked {
    pub checked: CheckedProgram,
    /// The slots with every one the strict decoder refuses replaced by a placeholder.
    pub sanitized: Vec<RawInsn>,
    /// The replaced slots, refused with the kernel's message when reached.
    pub deferred: Vec<usize>,
}

/// The raw checks of `input` (steps 1 to 5), with the level-2 `func#N @M` lines logged where
/// the kernel logs them (after `add_subprog_and_kfunc`).
pub fn precheck(input: &ProgramInput<'_>, log: &mut Log) -> Result<Prechecked, Reject> {
    let insns = input.insns;
    let maps: Vec<MapShape> = input.maps.iter().map(MapShape::from).collect();
    let fail = |log: &mut Log, e: CheckError| {
        let end = if e.unterminated { "" } else { "\n" };
        log.verbose(&format!("{}{end}", e.message));
        Reject {
            errno: errno_of(e.errno),
            msg: e.message,
            logged: true,
        }
    };
    if insns.is_empty() {
        return Err(Reject {
            errno: Errno::E2big,
            msg: String::new(),
            // bpf() refuses an empty program before the verifier runs.
            logged: false,
        });
    }
    let version = input.kernel.version();
    if !crate::profile::insns::takes_prog_flags(version, input.prog_flags) {
        return Err(Reject {
            errno: Errno::Einval,
            msg: format!(
                "the kernel refuses the load flags {:#x} (EINVAL)",
                input.prog_flags
            ),
            // bpf() checks the flags before the verifier runs.
            logged: false,
        });
    }
    crate::btf_info::check_func_info_early(input).map_err(|e| fail(log, e))?;
    let starts = add_subprogs(insns, version).map_err(|e| fail(log, e))?;
    // Before kfuncs (5.13) a call with src 2 is only refused when the walk reaches it.
    if insns_profile::has(version, Feature::KfuncCalls) {
        crate::call::kfunc::add_kfunc_calls(input).map_err(|e| fail(log, e))?;
    }
    if log.level2() {
        for (i, s) in starts.iter().enumerate() {
            log.verbose(&format!("func#{i} @{s}\n"));
        }
    }
    let rest = || -> Result<CheckedProgram, CheckError> {
        let subprogs = check_subprogs(insns, &starts, version)?;
        // `check_btf_info`: without func_info, subprograms may not leave abnormally.
        if input.func_info.is_empty() {
            check_abnormal_return(&subprogs)?;
        }
        crate::btf_info::check_func_and_line_info(input, &subprogs)?;
        let (ld_imm64, used_maps) = resolve_pseudo_ldimm64(
            input.kernel,
            insns,
            &maps,
            &subprogs,
            input.unrelocated_map_fds,
        )?;
        refuse_indirect_jumps(insns, &subprogs, version)?;
        let reachable = check_cfg(insns, version)?;
        if crate::behaviour::refuses_recursion_before_the_walk(version) {
            // The kernel names functions by their BTF func_info, so without it by "".
            let name = |sub: usize| match input.func_info.is_empty() {
                true => String::new(),
                false => input
                    .functions
                    .iter()
                    .find(|(_, start)| *start == subprogs[sub].start)
                    .map(|(n, _)| n.clone())
                    .unwrap_or_default(),
            };
            refuse_recursion(insns, &subprogs, &name)?;
        }
        Ok(CheckedProgram {
            subprogs,
            ld_imm64,
            used_maps,
            reachable,
        })
    };
    let checked = rest().map_err(|e| fail(log, e))?;
    let (sanitized, deferred) = sanitize(insns, version);
    Ok(Prechecked {
        checked,
        sanitized,
        deferred,
    })
}

/// 7.x's `gotox` jumps through a jump table (an instruction-array map) of its subprogram;
/// bpfemu models no such maps, so `check_cfg` finds no table for the first `gotox`.
fn refuse_indirect_jumps(
    insns: &[RawInsn],
    subprogs: &[Subprog],
    version: KernelVersion,
) -> Result<(), CheckError> {
    if !insns_profile::has(version, Feature::IndirectJump) {
        return Ok(());
    }
    let gotox = insns
        .iter()
        .position(|raw| raw.code == BPF_JMP | BPF_JA | BPF_X);
    match gotox {
        Some(pc) => {
            let start = subprogs
                .iter()
                .rev()
                .find(|s| s.start <= pc)
                .map_or(0, |s| s.start);
            Err(CheckError::einval(
                pc,
                format!("no jump tables found for subprog starting at {start}"),
            ))
        }
        None => Ok(()),
    }
}

fn errno_of(code: i32) -> Errno {
    match code {
        EACCES => Errno::Eacces,
        E2BIG => Errno::E2big,
        EFAULT => Errno::Efault,
        // EBADF (a map fd that names nothing), EBUSY (a second arena) and ERANGE (an offset
        // past an arena's end) have no variant of their own.
        _ => Errno::Einval,
    }
}

/// Replaces every slot the strict decoder refuses, or the kernel version refuses on arrival,
/// by a placeholder with the same control flow; returns the program and the replaced slots.
fn sanitize(insns: &[RawInsn], version: KernelVersion) -> (Vec<RawInsn>, Vec<usize>) {
    let mut out = insns.to_vec();
    let mut deferred = Vec::new();
    let mut pc = 0;
    while pc < insns.len() {
        let decoded = Insn::decode(insns, pc)
            .ok()
            .filter(|_| !insns_profile::refused_on_arrival(version, insns[pc]));
        match decoded {
            Some((_, slots)) => pc += slots,
            None => {
                deferred.push(pc);
                if is_ld_imm64(&insns[pc]) {
                    out[pc] = RawInsn::new(0x18, 0, 0, 0, 0);
                    out[pc + 1] = RawInsn::new(0, 0, 0, 0, 0);
                    pc += 2;
                } else {
                    out[pc] = placeholder(insns[pc]);
                    pc += 1;
                }
            }
        }
    }
    (out, deferred)
}

/// A decodable instruction with the control flow of `raw` (reaching it ends the path anyway).
fn placeholder(raw: RawInsn) -> RawInsn {
    let class = raw.code & 0x07;
    if class != BPF_JMP && class != BPF_JMP32 {
        return RawInsn::new(0xbf, 0, 0, 0, 0);
    }
    match raw.code & 0xf0 {
        BPF_EXIT => RawInsn::new(0x95, 0, 0, 0, 0),
        BPF_CALL if raw.src == PSEUDO_CALL => RawInsn::new(0x85, 0, PSEUDO_CALL, 0, raw.imm),
        BPF_CALL => RawInsn::new(0x85, 0, 0, 0, 0),
        BPF_JA if class == BPF_JMP32 => RawInsn::new(0x06, 0, 0, 0, raw.imm),
        BPF_JA => RawInsn::new(0x05, 0, 0, raw.off, 0),
        _ => RawInsn::new(0x15, 0, 0, raw.off, 0),
    }
}

/// One step of `do_check` on an instruction, in the kernel's order: a field check that fails
/// with its message, or a register operand (`check_reg_arg`).
enum Step {
    /// A field check (`check_insn_fields` from 7.x, which runs it before the walk).
    Refuse(String),
    /// A check of the operation itself, which stays in the walk (div by zero, a shift too
    /// wide, a packet load XDP may not make).
    Deny(String),
    /// Read (`SRC_OP`): past R10 "is invalid", never written "!read_ok".
    Read(u8),
    /// Written (`DST_OP`): past R10 "is invalid", R10 "frame pointer is read only".
    Write(u8),
}

/// The kernel's message when exploration reaches `raw`, an instruction the strict decoder
/// refuses, given which registers are initialised on the path (`is_init`): `do_check`'s field
/// checks and register checks in the order the kernel makes them for each class.
pub fn malformed_message(
    raw: RawInsn,
    is_init: &dyn Fn(u8) -> bool,
    version: KernelVersion,
) -> Option<String> {
    for step in steps(raw, Reserved::of(version)) {
        match step {
            Step::Refuse(msg) | Step::Deny(msg) => return Some(msg),
            Step::Read(r) | Step::Write(r) if r > 10 => return Some(format!("R{r} is invalid")),
            Step::Read(r) if !is_init(r) => return Some(format!("R{r} !read_ok")),
            Step::Write(10) => return Some("frame pointer is read only".to_owned()),
            _ => {}
        }
    }
    None
}

/// The field checks of `raw` that `version` fails, as 7.x's pass before the walk makes them
/// (`check_insn_fields`): the walk's own, and those of `ldx` and of the legacy packet loads.
fn field_refusal(raw: RawInsn, version: KernelVersion) -> Option<String> {
    let class = raw.code & 0x07;
    if class == BPF_LDX && insns_profile::ldx_reserved(version, raw.code, raw.imm) {
        return Some("BPF_LDX uses reserved fields".to_owned());
    }
    let mode = raw.code & 0xe0;
    if class == BPF_LD
        && matches!(mode, BPF_ABS | BPF_IND)
        && (raw.dst != 0 || raw.off != 0 || (mode == BPF_ABS && raw.src != 0))
    {
        return Some("BPF_LD_[ABS|IND] uses reserved fields".to_owned());
    }
    steps(raw, Reserved::of(version))
        .into_iter()
        .find_map(|step| match step {
            Step::Refuse(msg) => Some(msg),
            _ => None,
        })
}

/// `allowed`: the fields the kernel version gives a meaning (cpu v4's offsets, atomics, kfunc
/// calls); older versions reserve them.
fn steps(raw: RawInsn, allowed: Reserved) -> Vec<Step> {
    let class = raw.code & 0x07;
    let k = raw.code & BPF_X == 0;
    let refuse = |cond: bool, msg: &str| cond.then(|| Step::Refuse(msg.to_owned()));
    let mut out: Vec<Option<Step>> = Vec::new();
    match class {
        BPF_ALU | BPF_ALU64 => {
            let alu64 = class == BPF_ALU64;
            let op = raw.code & 0xf0;
            match op {
                BPF_NEG => {
                    let bad = !k || raw.src != 0 || raw.off != 0 || raw.imm != 0;
                    out.push(refuse(bad, "BPF_NEG uses reserved fields"));
                    out.extend([Some(Step::Read(raw.dst)), Some(Step::Write(raw.dst))]);
                }
                BPF_END => {
                    let bad = raw.src != 0
                        || raw.off != 0
                        || !matches!(raw.imm, 16 | 32 | 64)
                        || (alu64 && !k);
                    out.push(refuse(bad, "BPF_END uses reserved fields"));
                    out.extend([Some(Step::Read(raw.dst)), Some(Step::Write(raw.dst))]);
                }
                BPF_MOV => {
                    if !k {
                        if alu64 && raw.off == BPF_ADDR_SPACE_CAST && allowed.addr_space_cast {
                            out.push(refuse(
                                !matches!(raw.imm, 1 | 0x10000),
                                "addr_space_cast insn can only convert between address space 1 and 0",
                            ));
                        } else {
                            let offs: &[i16] = match (allowed.sign_extending_mov, alu64) {
                                (false, _) => &[0],
                                (true, true) => &[0, 8, 16, 32],
                                (true, false) => &[0, 8, 16],
                            };
                            out.push(refuse(
                                !offs.contains(&raw.off) || raw.imm != 0,
                                "BPF_MOV uses reserved fields",
                            ));
                        }
                        out.push(Some(Step::Read(raw.src)));
                    } else {
                        out.push(refuse(
                            raw.src != 0 || raw.off != 0,
                            "BPF_MOV uses reserved fields",
                        ));
                    }
                    out.push(Some(Step::Write(raw.dst)));
                }
                0xe0 | 0xf0 => {
                    out.push(Some(Step::Refuse(format!("invalid BPF_ALU opcode {op:x}"))));
                }
                _ => {
                    let signed = op == BPF_MOD || op == BPF_DIV;
                    let bad_off = (raw.off != 0 && raw.off != 1)
                        || (raw.off == 1 && !(signed && allowed.signed_div));
                    if !k {
                        out.push(refuse(
                            raw.imm != 0 || bad_off,
                            "BPF_ALU uses reserved fields",
                        ));
                        out.push(Some(Step::Read(raw.src)));
                    } else {
                        out.push(refuse(
                            raw.src != 0 || bad_off,
                            "BPF_ALU uses reserved fields",
                        ));
                    }
                    out.push(Some(Step::Read(raw.dst)));
                    if matches!(op, BPF_MOD | BPF_DIV) && k && raw.imm == 0 {
                        out.push(Some(Step::Deny("div by zero".to_owned())));
                    }
                    let bits = if alu64 { 64 } else { 32 };
                    if matches!(op, BPF_LSH | BPF_RSH | BPF_ARSH)
                        && k
                        && !(0..bits).contains(&raw.imm)
                    {
                        out.push(Some(Step::Deny(format!("invalid shift {}", raw.imm))));
                    }
                    out.push(Some(Step::Write(raw.dst)));
                }
            }
        }
        BPF_LDX => out.extend([Some(Step::Read(raw.src)), Some(Step::Write(raw.dst))]),
        BPF_STX if raw.code & 0xe0 == BPF_ATOMIC => match AtomicOp::from_imm(raw.imm).filter(|op| {
            allowed.load_acquire || !matches!(op, AtomicOp::LoadAcquire | AtomicOp::StoreRelease)
        }) {
            None => out.push(Some(Step::Refuse(format!(
                "BPF_ATOMIC uses invalid atomic opcode {:02x}",
                raw.imm
            )))),
            Some(AtomicOp::LoadAcquire) => {
                out.extend([Some(Step::Read(raw.src)), Some(Step::Write(raw.dst))])
            }
            Some(AtomicOp::StoreRelease) => {
                out.extend([Some(Step::Read(raw.src)), Some(Step::Read(raw.dst))])
            }
            Some(op) => {
                out.push(refuse(
                    !matches!(raw.code & 0x18, BPF_W | BPF_DW),
                    "invalid atomic operand size",
                ));
                out.extend([Some(Step::Read(raw.src)), Some(Step::Read(raw.dst))]);
                if op == AtomicOp::Cmpxchg {
                    out.push(Some(Step::Read(0)));
                }
            }
        },
        BPF_STX => {
            out.push(refuse(raw.imm != 0, "BPF_STX uses reserved fields"));
            out.extend([Some(Step::Read(raw.src)), Some(Step::Read(raw.dst))]);
        }
        BPF_ST => {
            out.push(refuse(raw.src != 0, "BPF_ST uses reserved fields"));
            out.push(Some(Step::Read(raw.dst)));
        }
        BPF_JMP | BPF_JMP32 => {
            let jmp32 = class == BPF_JMP32;
            match raw.code & 0xf0 {
                BPF_CALL => {
                    let kfunc = raw.src == PSEUDO_KFUNC_CALL && allowed.kfunc_calls;
                    let bad = !k
                        || (!kfunc && raw.off != 0)
                        || !(matches!(raw.src, 0 | PSEUDO_CALL) || kfunc)
                        || raw.dst != 0
                        || jmp32;
                    out.push(refuse(bad, "BPF_CALL uses reserved fields"));
                }
                BPF_JA if !k && !jmp32 && allowed.indirect_jump => {
                    let bad = raw.src != 0 || raw.imm != 0 || raw.off != 0;
                    out.push(refuse(bad, "BPF_JA|BPF_X uses reserved fields"));
                }
                BPF_JA => {
                    let bad = !k
                        || raw.src != 0
                        || raw.dst != 0
                        || (!jmp32 && raw.imm != 0)
                        || (jmp32 && raw.off != 0);
                    out.push(refuse(bad, "BPF_JA uses reserved fields"));
                }
                BPF_EXIT => {
                    let bad = !k || raw.imm != 0 || raw.src != 0 || raw.dst != 0 || jmp32;
                    out.push(refuse(bad, "BPF_EXIT uses reserved fields"));
                }
                BPF_JCOND => {
                    let bad = jmp32 || raw.src != 0 || raw.dst != 0 || raw.imm != 0;
                    if allowed.may_goto_to_next {
                        if bad {
                            out.push(Some(Step::Refuse(format!(
                                "invalid may_goto imm {}",
                                raw.imm
                            ))));
                        }
                    } else if bad || raw.off == 0 {
                        out.push(Some(Step::Refuse(format!(
                            "invalid may_goto off {} imm {}",
                            raw.off, raw.imm
                        ))));
                    }
                }
                op @ 0xf0 => out.push(Some(Step::Refuse(format!(
                    "invalid BPF_JMP/JMP32 opcode {op:x}"
                )))),
                _ => {
                    if allowed.jump_dst_first {
                        out.push(Some(Step::Read(raw.dst)));
                    }
                    if !k {
                        out.push(refuse(raw.imm != 0, "BPF_JMP/JMP32 uses reserved fields"));
                        out.push(Some(Step::Read(raw.src)));
                    } else {
                        out.push(refuse(raw.src != 0, "BPF_JMP/JMP32 uses reserved fields"));
                    }
                    if !allowed.jump_dst_first {
                        out.push(Some(Step::Read(raw.dst)));
                    }
                }
            }
        }
        _ => match raw.code & 0xe0 {
            // XDP cannot use the legacy packet loads at all (`may_access_skb`).
            BPF_ABS | BPF_IND => out.push(Some(Step::Deny(
                "BPF_LD_[ABS|IND] instructions not allowed for this program type".to_owned(),
            ))),
            BPF_IMM => {
                out.push(refuse(raw.code & 0x18 != BPF_DW, "invalid BPF_LD_IMM insn"));
                out.push(refuse(raw.off != 0, "BPF_LD_IMM64 uses reserved fields"));
                out.push(Some(Step::Write(raw.dst)));
            }
            _ => out.push(Some(Step::Refuse("invalid BPF_LD mode".to_owned()))),
        },
    }
    out.into_iter().flatten().collect()
}

/// Fails with the kernel's message when the walk reaches a slot [`precheck`] replaced
/// (`do_check` meeting a malformed instruction); `state` tells which registers are written.
pub fn check_reached(env: &mut Env<'_>, state: &VerifierState, pc: usize) -> Result<(), Reject> {
    if !env.aux.get(pc).is_some_and(|a| a.bad_insn) {
        return Ok(());
    }
    let raw = env.input.insns[pc];
    let is_init =
        |r: u8| Reg::new(r).is_some_and(|reg| state.reg(reg).ty != crate::state::RegType::NotInit);
    let version = env.input.kernel.version();
    let msg = malformed_message(raw, &is_init, version).unwrap_or_else(|| {
        match Insn::decode(env.input.insns, pc) {
            Err(e) => e.kind.to_string(),
            Ok(_) => "malformed instruction".to_owned(),
        }
    });
    Err(env.reject(Errno::Einval, msg))
}

/// Fills `env.subprogs` from the prechecked program, records the slots whose message waits
/// for the walk, and marks `prune_point` / `jmp_point` / `force_checkpoint` in `env.aux`.
pub fn check_program(env: &mut Env<'_>, pre: &Prechecked) -> Result<(), Reject> {
    env.subprogs = pre
        .checked
        .subprogs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let func = crate::call::global::func_type(env.input.btf, env.input.func_info, s.start);
            SubprogInfo {
                start: s.start,
                name: function_name(env, s.start),
                has_tail_call: s.has_tail_call,
                has_ld_abs: s.has_ld_abs,
                is_global: i > 0 && func.is_some_and(|(_, global)| global),
                func_type: func.map(|(id, _)| id),
                ..SubprogInfo::default()
            }
        })
        .collect();
    for &pc in &pre.deferred {
        env.aux[pc].bad_insn = true;
    }
    // A jump into an ld_imm64's second slot (which only 5.10's check_cfg lets through) meets
    // that slot as an instruction: "invalid BPF_LD_IMM insn" when reached.
    for (pc, &reached) in pre.checked.reachable.iter().enumerate().skip(1) {
        if reached && is_ld_imm64(&env.input.insns[pc - 1]) && !ld_imm64_start(env.input.insns, pc)
        {
            env.aux[pc].bad_insn = true;
        }
    }
    env.has_arena = pre.checked.used_maps.iter().any(|&m| {
        env.input
            .maps
            .get(m)
            .is_some_and(|spec| spec.map_type == BPF_MAP_TYPE_ARENA)
    });
    mark_changes_pkt_data(env);
    mark_prune_points(env);
    Ok(())
}

/// `mark_subprog_changes_pkt_data`, `mark_subprog_might_sleep` and `merge_callee_effects` of
/// `check_cfg`: a subprogram changes packet data (or may sleep) when it calls a helper or
/// kfunc that does, or calls (or takes the address of) a subprogram that does. A call to a
/// global function, which is not walked into, then forgets the caller's packet pointers (or
/// is refused to a program that may not sleep).
fn mark_changes_pkt_data(env: &mut Env<'_>) {
    let insns = env.input.insns;
    let starts: Vec<usize> = env.subprogs.iter().map(|s| s.start).collect();
    let owner = |pc: usize| starts.iter().rposition(|&s| s <= pc).unwrap_or(0);
    let mut callees: Vec<(usize, usize)> = Vec::new();
    for (pc, raw) in insns.iter().enumerate() {
        let changes = if raw.code == BPF_JMP | BPF_CALL && raw.src == 0 {
            // A tail call too (`bpf_helper_changes_pkt_data`): the program it jumps to may
            // have moved the packet when control comes back to a caller.
            crate::call::proto::changes_pkt_data(raw.imm)
                || raw.imm == crate::call::proto::TAIL_CALL
        } else if raw.code == BPF_JMP | BPF_CALL && raw.src == PSEUDO_KFUNC_CALL {
            crate::call::kfunc::changes_pkt_data(env.input, raw.imm)
        } else {
            false
        };
        if changes {
            env.subprogs[owner(pc)].changes_pkt_data = true;
        }
        if might_sleep(env.input, raw) {
            env.subprogs[owner(pc)].might_sleep = true;
        }
        if is_pseudo_call(raw) || is_pseudo_func(raw) {
            let target = (pc as i64 + raw.imm as i64 + 1) as usize;
            if let Some(callee) = starts.iter().position(|&s| s == target) {
                callees.push((owner(pc), callee));
            }
        }
    }
    // Callers take their callees' effect, through any depth of calls.
    let mut changed = true;
    while changed {
        changed = false;
        for &(caller, callee) in &callees {
            if env.subprogs[callee].changes_pkt_data && !env.subprogs[caller].changes_pkt_data {
                env.subprogs[caller].changes_pkt_data = true;
                changed = true;
            }
            if env.subprogs[callee].might_sleep && !env.subprogs[caller].might_sleep {
                env.subprogs[caller].might_sleep = true;
                changed = true;
            }
        }
    }
}

/// `mark_subprog_might_sleep`'s test: a call of a helper or kfunc that may sleep.
fn might_sleep(input: &ProgramInput<'_>, raw: &RawInsn) -> bool {
    if raw.code != BPF_JMP | BPF_CALL {
        return false;
    }
    match raw.src {
        0 => crate::call::proto::xdp_proto(raw.imm).is_some_and(|p| p.might_sleep),
        PSEUDO_KFUNC_CALL if raw.off == 0 => input
            .vmlinux_btf()
            .and_then(|btf| btf.get(raw.imm as bpfemu_loader::btf::TypeId))
            .is_some_and(|f| crate::call::kfunc_sets::is_sleepable(&f.name)),
        _ => false,
    }
}

fn function_name(env: &Env<'_>, start: usize) -> String {
    env.input
        .functions
        .iter()
        .find(|(_, s)| *s == start)
        .map(|(n, _)| n.clone())
        .unwrap_or_default()
}

/// The kernel's `visit_insn` marks: conditional jumps are prune points, jump targets and
/// instructions after calls are prune and jump points. Targets are in range ([`precheck`]).
fn mark_prune_points(env: &mut Env<'_>) {
    let len = env.len();
    let insns: Vec<(usize, Insn)> = env.prog.iter().map(|(pc, i)| (pc, *i)).collect();
    for (pc, insn) in insns {
        let slots = insn.slots();
        let jump_target = |off: i64| -> Option<usize> {
            let t = pc as i64 + 1 + off;
            (t >= 0 && (t as usize) < len).then_some(t as usize)
        };
        match insn {
            Insn::Ja { off, .. } => {
                if let Some(t) = jump_target(off as i64) {
                    mark_jump_target(env, t);
                }
            }
            Insn::Jump { off, .. } | Insn::MayGoto { off } => {
                env.aux[pc].prune_point = true;
                if matches!(insn, Insn::MayGoto { .. }) {
                    env.aux[pc].force_checkpoint = true;
                }
                if let Some(t) = jump_target(off as i64) {
                    mark_jump_target(env, t);
                }
            }
            Insn::Call(target) => {
                if pc + 1 < len {
                    mark(env, pc + 1, true);
                }
                // An iterator's `next` is where its loop converges: always a checkpoint.
                if let CallTarget::Kfunc { btf_id, off: 0 } = target
                    && crate::call::iter::iter_op_of_call(env.input.vmlinux_btf(), btf_id)
                        == Some(crate::call::iter::IterOp::Next)
                {
                    env.aux[pc].prune_point = true;
                    env.aux[pc].force_checkpoint = true;
                }
                if let CallTarget::Local(rel) = target {
                    env.aux[pc].prune_point = true;
                    if let Some(t) = jump_target(rel as i64) {
                        mark_jump_target(env, t);
                    }
                }
            }
            Insn::LdImm64 {
                kind: LdImm64Kind::Func,
                imm,
                ..
            } => {
                if pc + slots < len {
                    mark(env, pc + slots, true);
                }
                env.aux[pc].prune_point = true;
                if let Some(t) = jump_target(imm as i64) {
                    mark_jump_target(env, t);
                }
            }
            _ => {}
        }
    }
}

/// A jump's or a call's target (`mark_jump_target`): a prune and jump point, and one a
/// `bpf_fastcall` pair may not straddle.
fn mark_jump_target(env: &mut Env<'_>, pc: usize) {
    mark(env, pc, true);
    env.aux[pc].jump_target = true;
}

fn mark(env: &mut Env<'_>, pc: usize, jmp: bool) {
    env.aux[pc].prune_point = true;
    if jmp {
        env.aux[pc].jmp_point = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> RawInsn {
        RawInsn::new(code, dst, src, off, imm)
    }

    #[test]
    fn opcode_table_is_the_kernels() {
        // Measured on 6.18: the codes a sweep of all 256 did not answer with "unknown opcode",
        // less the ldx codes the reserved-field check refuses before the table is consulted.
        const KNOWN: &str = "04 05 06 07 0c 0f 14 15 16 17 18 1c 1d 1e 1f 20 24 25 26 27 28 2c \
            2d 2e 2f 30 34 35 36 37 3c 3d 3e 3f 40 44 45 46 47 48 4c 4d 4e 4f 50 54 55 56 57 5c \
            5d 5e 5f 61 62 63 64 65 66 67 69 6a 6b 6c 6d 6e 6f 71 72 73 74 75 76 77 79 7a 7b 7c \
            7d 7e 7f 81 84 85 87 89 91 94 95 97 9c 9f a4 a5 a6 a7 ac ad ae af b4 b5 b6 b7 bc bd \
            be bf c3 c4 c5 c6 c7 cb cc cd ce cf d3 d4 d5 d6 d7 db dc dd de e5";
        let expected: Vec<u8> = KNOWN
            .split_whitespace()
            .map(|h| u8::from_str_radix(h, 16).unwrap())
            .collect();
        let ours: Vec<u8> = (0..=255u8).filter(|&c| opcode_in_insntable(c)).collect();
        assert_eq!(ours, expected);
    }

    #[test]
    fn subprogram_boundaries() {
        let prog = [
            r(0x85, 0, 1, 0, 2),
            r(0xb7, 0, 0, 0, 2),
            r(0x95, 0, 0, 0, 0),
            r(0xb7, 0, 0, 0, 2),
            r(0x95, 0, 0, 0, 0),
        ];
        let checked =
            check_raw(&prog, &[], &Kernel::with_btf_file("/nonexistent/vmlinux")).unwrap();
        assert_eq!(checked.func_lines(), ["func#0 @0", "func#1 @3"]);
        assert_eq!(checked.subprog_of(4), 1);
    }

    #[test]
    fn stack_depth_chain() {
        let calls = vec![vec![1], vec![2], vec![]];
        let tails = [false; 3];
        let rules = FrameRules {
            max: 8,
            afresh_at: vec![false; 3],
        };
        assert!(check_max_stack_depth(&[256, 128, 128], &calls, &tails, &[0], &rules).is_ok());
        let err =
            check_max_stack_depth(&[256, 128, 160], &calls, &tails, &[0], &rules).unwrap_err();
        assert_eq!(
            err.message,
            "combined stack size of 3 calls is 544. Too large"
        );
    }

    /// Nine frames in one chain: too many for a limit of 8, unless the count starts again
    /// at a global function in the middle.
    #[test]
    fn frame_count_of_a_chain() {
        let calls: Vec<Vec<usize>> = (0..9)
            .map(|i| if i < 8 { vec![i + 1] } else { vec![] })
            .collect();
        let (depths, tails) = ([0; 9], [false; 9]);
        let mut rules = FrameRules {
            max: 8,
            afresh_at: vec![false; 9],
        };
        let err = check_max_stack_depth(&depths, &calls, &tails, &[0], &rules).unwrap_err();
        assert_eq!(err.message, "the call stack of 8 frames is too deep !");
        rules.afresh_at[2] = true;
        assert!(check_max_stack_depth(&depths, &calls, &tails, &[0], &rules).is_ok());
        rules.afresh_at[2] = false;
        rules.max = 16;
        assert!(check_max_stack_depth(&depths, &calls, &tails, &[0], &rules).is_ok());
    }
}
