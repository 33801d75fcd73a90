//! Program preparation: what the kernel's `BPF_PROG_LOAD` does to references before a program
//! runs, done once per program at runtime creation.
//!
//! - `ld_imm64` of a map (`BPF_PSEUDO_MAP_FD`, imm = index into the object's maps) loads the
//!   map's handle ([`Maps::handle`]); of a map value (`BPF_PSEUDO_MAP_VALUE`) the value's
//!   address ([`Maps::value_addr`]); of a function (`BPF_PSEUDO_FUNC`, a callback) its code
//!   address ([`code_addr`]). Each becomes a plain 64-bit constant in the prepared copy.
//! - Every helper call must name a helper of the [`HELPERS`](super::helpers::HELPERS) table,
//!   and every kfunc call a kfunc of the [`KFUNCS`](super::kfuncs::KFUNCS) table (its BTF id
//!   named by the caller's [`KfuncNames`](super::kfuncs::KfuncNames) through a
//!   [`KfuncResolver`]); no ksym may appear:
//!   these are errors here, naming the program and the instruction, rather than surprises in
//!   the middle of a replay.

use super::helpers;
use super::kfuncs::{KfuncResolver, Unresolved};
use crate::interp::code_addr;
use crate::maps::{Errno, Maps};
use bpfemu_isa::{CallTarget, Insn, LdImm64Kind, Program, ProgramError, RawInsn};

/// Why a program cannot run here.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PrepareError {
    #[error("program {program}: {source}")]
    Decode {
        program: String,
        source: ProgramError,
    },
    #[error(
        "program {program}, insn {pc}: ld_imm64 refers to map {index}, but the object has {maps} maps"
    )]
    NoSuchMap {
        program: String,
        pc: usize,
        index: i32,
        maps: usize,
    },
    #[error("program {program}, insn {pc}: ld_imm64 of map {map}'s value at offset {off}: {errno}")]
    MapValue {
        program: String,
        pc: usize,
        map: String,
        off: u32,
        errno: Errno,
    },
    #[error("program {program}, insn {pc}: {what}, which bpfemu does not support")]
    Unsupported {
        program: String,
        pc: usize,
        what: String,
    },
    #[error(
        "program {program}, insn {pc}: helper {id} ({name}) is not available to XDP programs in bpfemu"
    )]
    UnknownHelper {
        program: String,
        pc: usize,
        id: i32,
        name: String,
    },
}

/// Prepares program number `index` (its position in the runtime's program set); the kfuncs
/// it calls are resolved by `kfuncs`, which keeps them.
pub fn prepare(
    name: &str,
    index: usize,
    insns: &[RawInsn],
    maps: &Maps,
    kfuncs: &mut KfuncResolver<'_>,
) -> Result<Program, PrepareError> {
    let mut raw = insns.to_vec();
    resolve_ld_imm64(name, index, &mut raw, maps)?;
    let prog = Program::decode(raw).map_err(|source| PrepareError::Decode {
        program: name.to_string(),
        source,
    })?;
    check_calls(name, &prog, kfuncs)?;
    Ok(prog)
}

const LD_IMM64: u8 = 0x18;

fn resolve_ld_imm64(
    name: &str,
    index: usize,
    raw: &mut [RawInsn],
    maps: &Maps,
) -> Result<(), PrepareError> {
    let mut pc = 0;
    while pc + 1 < raw.len() {
        if raw[pc].code != LD_IMM64 {
            pc += 1;
            continue;
        }
        if let Some(value) = resolved_value(name, index, pc, raw, maps)? {
            raw[pc].src = 0;
            raw[pc].imm = value as u32 as i32;
            raw[pc + 1].imm = (value >> 32) as u32 as i32;
        }
        pc += 2;
    }
    Ok(())
}

/// The constant an `ld_imm64` at `pc` stands for; `None` when it is a constant already.
fn resolved_value(
    name: &str,
    index: usize,
    pc: usize,
    raw: &[RawInsn],
    maps: &Maps,
) -> Result<Option<u64>, PrepareError> {
    let (imm, next_imm) = (raw[pc].imm, raw[pc + 1].imm);
    let unsupported = |what: String| PrepareError::Unsupported {
        program: name.to_string(),
        pc,
        what,
    };
    let map_index = || {
        usize::try_from(imm)
            .ok()
            .filter(|&i| i < maps.len())
            .ok_or(PrepareError::NoSuchMap {
                program: name.to_string(),
                pc,
                index: imm,
                maps: maps.len(),
            })
    };
    Ok(Some(match LdImm64Kind::from_src(raw[pc].src) {
        Some(LdImm64Kind::Imm) | None => return Ok(None),
        Some(LdImm64Kind::MapFd) => maps.handle(map_index()?),
        Some(LdImm64Kind::MapValue) => {
            let map = map_index()?;
            let off = next_imm as u32;
            maps.value_addr(map, off)
                .map_err(|errno| PrepareError::MapValue {
                    program: name.to_string(),
                    pc,
                    map: maps.get(map).map_or("?", |m| m.name()).to_string(),
                    off,
                    errno,
                })?
        }
        Some(LdImm64Kind::Func) => code_addr(index, (pc as i64 + 1 + imm as i64) as usize),
        Some(LdImm64Kind::BtfId) => {
            return Err(unsupported(format!(
                "ld_imm64 of kernel symbol (ksym, btf id {imm})"
            )));
        }
        Some(kind @ (LdImm64Kind::MapIdx | LdImm64Kind::MapIdxValue)) => {
            return Err(unsupported(format!(
                "ld_imm64 {kind:?} (fd_array map reference)"
            )));
        }
    }))
}

/// Every call names a helper or a kfunc bpfemu implements.
fn check_calls(
    name: &str,
    prog: &Program,
    kfuncs: &mut KfuncResolver<'_>,
) -> Result<(), PrepareError> {
    for (pc, insn) in prog.iter() {
        match insn {
            Insn::Call(CallTarget::Helper(id)) if helpers::lookup(*id).is_none() => {
                return Err(PrepareError::UnknownHelper {
                    program: name.to_string(),
                    pc,
                    id: *id,
                    name: bpfemu_isa::helpers::helper_name(*id)
                        .filter(|_| *id != 0)
                        .map_or_else(|| "no such helper".to_string(), |n| format!("bpf_{n}")),
                });
            }
            Insn::Call(CallTarget::Kfunc { btf_id, off }) => {
                let why = match kfuncs.resolve(*btf_id, *off) {
                    Ok(_) => continue,
                    Err(Unresolved::NotImplemented(kfunc)) => kfunc,
                    Err(Unresolved::NotAFunction) => "not a function of the kernel's BTF".into(),
                    Err(Unresolved::ModuleBtf) => "a module's kfunc".into(),
                    Err(Unresolved::NoBtf(e)) => format!("no kernel BTF to name it: {e}"),
                };
                return Err(PrepareError::Unsupported {
                    program: name.to_string(),
                    pc,
                    what: format!("kfunc call (btf id {btf_id}, module btf {off}: {why})"),
                });
            }
            _ => {}
        }
    }
    Ok(())
}
