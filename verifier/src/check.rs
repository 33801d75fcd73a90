//! Program checks before exploration (`check_subprogs`, `check_cfg`, the `ld_imm64` checks of
//! `resolve_pseudo_ldimm64`): subprogram boundaries, jump targets, the control-flow graph and
//! the prune points the walk takes checkpoints at.

use crate::env::{Env, SubprogInfo};
use crate::{Errno, Reject};
use bpfemu_isa::{CallTarget, Insn, LdImm64Kind};

/// Runs every check that needs no exploration; fills `env.subprogs` and the prune, jump and
/// checkpoint marks of `env.aux`.
pub fn check_program(env: &mut Env<'_>) -> Result<(), Reject> {
    find_subprogs(env)?;
    mark_prune_points(env)?;
    Ok(())
}

/// Subprograms: the entry, every bpf-to-bpf call target and every `ld_imm64` of a function.
fn find_subprogs(env: &mut Env<'_>) -> Result<(), Reject> {
    let len = env.len();
    let mut starts = vec![0usize];
    let insns: Vec<(usize, Insn)> = env.prog.iter().map(|(pc, i)| (pc, *i)).collect();
    for (pc, insn) in insns {
        let target = match insn {
            Insn::Call(CallTarget::Local(rel)) => Some(pc as i64 + 1 + rel as i64),
            Insn::LdImm64 {
                kind: LdImm64Kind::Func,
                imm,
                ..
            } => Some(pc as i64 + 1 + imm as i64),
            _ => None,
        };
        if let Some(t) = target {
            if t < 0 || t as usize >= len {
                return Err(env.reject(Errno::Einval, "call to invalid destination"));
            }
            starts.push(t as usize);
        }
    }
    starts.sort_unstable();
    starts.dedup();
    env.subprogs = starts
        .into_iter()
        .map(|start| SubprogInfo {
            start,
            name: function_name(env, start),
            ..SubprogInfo::default()
        })
        .collect();
    Ok(())
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
/// instructions after calls are prune and jump points.
fn mark_prune_points(env: &mut Env<'_>) -> Result<(), Reject> {
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
                let Some(t) = jump_target(off as i64) else {
                    return Err(out_of_range(env, pc, pc as i64 + 1 + off as i64));
                };
                mark(env, t, true);
            }
            Insn::Jump { off, .. } | Insn::MayGoto { off } => {
                let Some(t) = jump_target(off as i64) else {
                    return Err(out_of_range(env, pc, pc as i64 + 1 + off as i64));
                };
                env.aux[pc].prune_point = true;
                if matches!(insn, Insn::MayGoto { .. }) {
                    env.aux[pc].force_checkpoint = true;
                }
                mark(env, t, true);
            }
            Insn::Call(target) => {
                if pc + 1 < len {
                    mark(env, pc + 1, true);
                }
                if let CallTarget::Local(rel) = target {
                    env.aux[pc].prune_point = true;
                    if let Some(t) = jump_target(rel as i64) {
                        mark(env, t, true);
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
                    mark(env, t, true);
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn mark(env: &mut Env<'_>, pc: usize, jmp: bool) {
    env.aux[pc].prune_point = true;
    if jmp {
        env.aux[pc].jmp_point = true;
    }
}

fn out_of_range(env: &mut Env<'_>, from: usize, to: i64) -> Reject {
    env.reject(
        Errno::Einval,
        format!("jump out of range from insn {from} to {to}"),
    )
}
