//! The program's BTF info as `BPF_PROG_LOAD` checks it before the walk (`check_btf_info_early`,
//! `check_btf_func_early`, `check_btf_func`, `check_btf_line` in 6.18's verifier.c): the
//! func_info and line_info records libbpf 1.7 sends, refused with the kernel's message.
//!
//! Both record lists are the loader's ([`bpfemu_loader::ProgramSpec`]), which the kernel door
//! sends too, so what is checked here is what the kernel is given.

use crate::ProgramInput;
use crate::check::{CheckError, Subprog};
use bpfemu_loader::btf::BtfKind;

const EINVAL: i32 = 22;

fn einval(message: String) -> CheckError {
    CheckError::new(EINVAL, None, message)
}

/// `check_btf_func_early`'s messages have no newline.
fn einval_unterminated(message: String) -> CheckError {
    CheckError {
        unterminated: true,
        ..einval(message)
    }
}

/// `check_btf_func_early`: the func_info records alone, before subprograms are known. The
/// kernel's messages here end without a newline.
pub fn check_func_info_early(input: &ProgramInput<'_>) -> Result<(), CheckError> {
    let mut prev = 0;
    for (i, &(insn, type_id)) in input.func_info.iter().enumerate() {
        if i == 0 && insn != 0 {
            return Err(einval_unterminated(format!(
                "nonzero insn_off {insn} for the first func info record"
            )));
        }
        if i > 0 && insn <= prev {
            return Err(einval_unterminated(format!(
                "same or smaller insn offset ({insn}) than previous func info record ({prev})"
            )));
        }
        let func = input.btf.and_then(|btf| btf.get(type_id));
        let Some(BtfKind::Func { proto, .. }) = func.map(|t| &t.kind) else {
            return Err(einval_unterminated(format!(
                "invalid type id {} in func info",
                type_id as i32
            )));
        };
        let proto = input.btf.and_then(|btf| btf.get(*proto));
        if !matches!(proto.map(|t| &t.kind), Some(BtfKind::FuncProto { .. })) {
            // The BTF load refuses such a FUNC first; a refusal without a message.
            return Err(einval(String::new()));
        }
        prev = insn;
    }
    Ok(())
}

/// `check_btf_func` and `check_btf_line`, once the subprograms are known. Without either kind
/// of record, the caller checks `check_abnormal_return` instead.
pub fn check_func_and_line_info(
    input: &ProgramInput<'_>,
    subprogs: &[Subprog],
) -> Result<(), CheckError> {
    check_func_info(input, subprogs)?;
    check_line_info(input, subprogs)
}

fn check_func_info(input: &ProgramInput<'_>, subprogs: &[Subprog]) -> Result<(), CheckError> {
    if input.func_info.is_empty() {
        return Ok(());
    }
    if input.func_info.len() != subprogs.len() {
        return Err(einval(
            "number of funcs in func_info doesn't match number of subprogs".into(),
        ));
    }
    for (i, (&(insn, type_id), sub)) in input.func_info.iter().zip(subprogs).enumerate() {
        if insn != sub.start {
            return Err(einval(
                "func_info BTF section doesn't match subprog layout in BPF program".into(),
            ));
        }
        // Classic packet loads and tail calls leave the function with an int (the load's
        // failure exits with 0): a subprogram holding one must say it returns a scalar.
        if i > 0 && (sub.has_ld_abs || sub.has_tail_call) && !returns_scalar(input, type_id) {
            let what = if sub.has_ld_abs {
                "LD_ABS"
            } else {
                "tail_call"
            };
            return Err(einval(format!(
                "{what} is only allowed in functions that return 'int'."
            )));
        }
    }
    Ok(())
}

/// Whether the FUNC `type_id` returns an int of at most 8 bytes or an enum, through
/// modifiers and typedefs (`btf_type_is_small_int` or `btf_is_any_enum`).
fn returns_scalar(input: &ProgramInput<'_>, type_id: u32) -> bool {
    let Some(btf) = input.btf else {
        return false;
    };
    let ret = match btf.get(type_id).map(|t| &t.kind) {
        Some(BtfKind::Func { proto, .. }) => match btf.get(*proto).map(|t| &t.kind) {
            Some(BtfKind::FuncProto { ret, .. }) => *ret,
            _ => return false,
        },
        _ => return false,
    };
    let ret = btf.skip_mods_and_typedefs(ret).and_then(|id| btf.get(id));
    match ret.map(|t| &t.kind) {
        Some(BtfKind::Int { size, .. }) => *size <= 8,
        Some(k) => k.is_any_enum(),
        None => false,
    }
}

/// Whether `off` names a string of the program's BTF (`btf_name_by_offset` is not NULL).
fn is_string_offset(input: &ProgramInput<'_>, off: u32) -> bool {
    input
        .btf
        .is_some_and(|btf| (off as usize) < btf.strings.len())
}

fn check_line_info(input: &ProgramInput<'_>, subprogs: &[Subprog]) -> Result<(), CheckError> {
    let lines = input.line_info;
    if lines.is_empty() {
        return Ok(());
    }
    let len = input.insns.len();
    let mut prev = 0;
    let mut next_sub = 0;
    for (i, line) in lines.iter().enumerate() {
        let at = line.insn;
        if (i > 0 && at <= prev) || at >= len {
            return Err(einval(format!(
                "Invalid line_info[{i}].insn_off:{at} (prev_offset:{prev} prog->len:{len})"
            )));
        }
        if input.insns[at].code == 0 {
            return Err(einval(format!(
                "Invalid insn code at line_info[{i}].insn_off"
            )));
        }
        if !is_string_offset(input, line.line_off) || !is_string_offset(input, line.file_name_off) {
            return Err(einval(format!(
                "Invalid line_info[{i}].line_off or .file_name_off"
            )));
        }
        if let Some(sub) = subprogs.get(next_sub) {
            if at == sub.start {
                next_sub += 1;
            } else if sub.start < at {
                return Err(einval(format!("missing bpf_line_info for func#{next_sub}")));
            }
        }
        prev = at;
    }
    if next_sub != subprogs.len() {
        return Err(einval(format!(
            "missing bpf_line_info for {} funcs starting from func#{next_sub}",
            subprogs.len() - next_sub
        )));
    }
    Ok(())
}
