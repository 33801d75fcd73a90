//! The verifier log in the kernel's format (`kernel/bpf/log.c`): instruction lines
//! `N: (op) text`, register and stack states (`R1=pkt(r=14)`, `fp-8=mmmm????`), `; source`
//! lines from BTF line_info, error lines and the closing statistics.
//!
//! Level 1 keeps only the path that failed: when the walk pops a pushed branch, the log goes
//! back to where it was when the branch was pushed (the kernel's `pop_log`). Level 2 keeps
//! everything and prints the full state at each popped branch.

use crate::env::Env;
use crate::state::reg::{BPF_ADD_CONST, RegState, RegType, reg_type_str};
use crate::state::stack::{SLOT_SIZE, SlotType};
use crate::state::{FuncState, VerifierState};
use bpfemu_isa::Reg;
use std::fmt::Write;

/// `BPF_LOG_LEVEL1`: errors, branch states, the closing line.
pub const LEVEL1: u32 = 1;
/// `BPF_LOG_LEVEL2`: every instruction and state.
pub const LEVEL2: u32 = 2;
/// `BPF_LOG_STATS`: the statistics lines.
pub const STATS: u32 = 4;

/// The log being written.
#[derive(Clone, Debug, Default)]
pub struct Log {
    /// The `log_level` bits.
    pub level: u32,
    pub text: String,
    /// Registers touched since the last state print (`scratched_regs`).
    pub scratched_regs: u32,
    /// Stack slots touched since the last state print (`scratched_stack_slots`).
    pub scratched_stack: u64,
    /// Where the last instruction line started and how long it was, to put the state after it.
    pub prev_log_pos: usize,
    pub prev_insn_print_pos: usize,
}

impl Log {
    pub fn new(level: u32) -> Log {
        Log {
            level,
            ..Log::default()
        }
    }

    /// Whether anything is logged (`BPF_LOG_LEVEL` bits).
    pub fn enabled(&self) -> bool {
        self.level & (LEVEL1 | LEVEL2) != 0
    }

    /// Whether level-2 (per instruction) lines are logged.
    pub fn level2(&self) -> bool {
        self.level & LEVEL2 != 0
    }

    /// The kernel's `verbose()`: text appended whenever a log is kept.
    pub fn verbose(&mut self, text: &str) {
        if self.enabled() {
            self.text.push_str(text);
        }
    }

    pub fn scratch_reg(&mut self, reg: Reg) {
        self.scratched_regs |= 1 << reg.index();
    }

    pub fn scratch_stack(&mut self, spi: usize) {
        if spi < 64 {
            self.scratched_stack |= 1 << spi;
        }
    }

    /// `mark_verifier_state_scratched`.
    pub fn scratch_all(&mut self) {
        self.scratched_regs = u32::MAX;
        self.scratched_stack = u64::MAX;
    }

    pub fn scratched(&self) -> bool {
        self.scratched_regs != 0 || self.scratched_stack != 0
    }

    /// Cuts the log back to `pos` (`bpf_vlog_reset`).
    pub fn reset(&mut self, pos: usize) {
        self.text.truncate(pos);
    }
}

/// `verbose_snum`: small values decimal, others hex.
fn snum(v: i64) -> String {
    if (i16::MIN as i64..=i16::MAX as i64).contains(&v) {
        format!("{v}")
    } else {
        format!("{:#x}", v as u64)
    }
}

/// `verbose_unum`.
fn unum(v: u64) -> String {
    if v <= u16::MAX as u64 {
        format!("{v}")
    } else {
        format!("{v:#x}")
    }
}

/// The kernel's `reg_type_str` of a register.
pub fn reg_type_name(env: &Env<'_>, reg: &RegState) -> String {
    let version = env.input.kernel.version();
    if reg.ty == RegType::Scalar && !crate::behaviour::names_scalars_scalar(version) {
        return "inv".to_owned();
    }
    reg_type_str(reg.ty, reg.flags, version)
}

/// `print_scalar_ranges`.
fn scalar_ranges(reg: &RegState, out: &mut String, sep: &mut &'static str) {
    let s32_val = |v: i32| -> u64 {
        if (i16::MIN as i64..=i16::MAX as i64).contains(&(v as i64)) {
            v as i64 as u64
        } else {
            v as u32 as u64
        }
    };
    let mut items: [(&str, u64, bool); 8] = [
        ("smin", reg.smin_value as u64, reg.smin_value == i64::MIN),
        ("smax", reg.smax_value as u64, reg.smax_value == i64::MAX),
        ("umin", reg.umin_value, reg.umin_value == 0),
        ("umax", reg.umax_value, reg.umax_value == u64::MAX),
        (
            "smin32",
            s32_val(reg.s32_min_value),
            reg.s32_min_value == i32::MIN,
        ),
        (
            "smax32",
            s32_val(reg.s32_max_value),
            reg.s32_max_value == i32::MAX,
        ),
        ("umin32", reg.u32_min_value as u64, reg.u32_min_value == 0),
        (
            "umax32",
            reg.u32_max_value as u64,
            reg.u32_max_value == u32::MAX,
        ),
    ];
    for i in 0..items.len() {
        let (name, val, omit) = items[i];
        if omit {
            continue;
        }
        let neg1 = name.starts_with('s') && (val as i64) < 0;
        let _ = write!(out, "{sep}{name}=");
        *sep = ",";
        let mut j = i + 2;
        while j < items.len() {
            let (n2, v2, o2) = items[j];
            if !o2 && v2 == val {
                let neg2 = n2.starts_with('s') && (v2 as i64) < 0;
                if neg2 == neg1 {
                    items[j].2 = true;
                    let _ = write!(out, "{n2}=");
                }
            }
            j += 2;
        }
        if name.starts_with('s') {
            out.push_str(&snum(val as i64));
        } else {
            out.push_str(&unum(val));
        }
    }
}

/// `print_reg_state`: the text after `R1=`.
pub fn reg_state_text(env: &Env<'_>, reg: &RegState) -> String {
    reg_text(env, reg, None)
}

fn reg_text(env: &Env<'_>, reg: &RegState, frameno: Option<u32>) -> String {
    let mut out = String::new();
    let t = reg.ty;
    if t == RegType::Scalar && reg.precise {
        out.push('P');
    }
    if t == RegType::Scalar && reg.var_off.is_const() {
        out.push_str(&snum(reg.var_off.value as i64));
        return out;
    }
    out.push_str(&reg_type_str(t, reg.flags, env.input.kernel.version()));
    if t == RegType::BtfId {
        // print_reg_state: the struct's name follows "ptr_".
        let btf = env.input.vmlinux_btf();
        out.push_str(btf.and_then(|b| b.name_of(reg.btf_id)).unwrap_or_default());
    }
    if t == RegType::Arena {
        return out;
    }
    if t == RegType::Stack {
        if frameno.is_some_and(|f| f != reg.frameno) {
            let _ = write!(out, "[{}]", reg.frameno);
        }
        if reg.var_off.is_const() {
            out.push_str(&snum(
                (reg.var_off.value as i64).wrapping_add(reg.off as i64),
            ));
            return out;
        }
    }
    out.push('(');
    let mut sep: &'static str = "";
    if reg.id != 0 {
        let _ = write!(out, "{sep}id={}", reg.id & !BPF_ADD_CONST);
        sep = ",";
    }
    if reg.id & BPF_ADD_CONST != 0 {
        let _ = write!(out, "{:+}", reg.off);
    }
    if reg.ref_obj_id != 0 {
        let _ = write!(out, "{sep}ref_obj_id={}", reg.ref_obj_id);
        sep = ",";
    }
    if matches!(
        t,
        RegType::ConstPtrToMap | RegType::MapValue | RegType::MapKey
    ) && let Some(map) = reg.map.and_then(|m| env.map(m))
    {
        // An inner map is the kernel's copy of the template's attributes, which has no name.
        let inner = reg.map.is_some_and(|m| m as usize >= env.input.maps.len());
        if !map.name.is_empty() && !inner {
            let _ = write!(out, "{sep}map={}", kernel_map_name(&map.name));
            sep = ",";
        }
        let _ = write!(out, "{sep}ks={},vs={}", map.key_size, map.value_size);
        sep = ",";
    }
    if t != RegType::Scalar && reg.off != 0 {
        let _ = write!(out, "{sep}off={}", snum(reg.off as i64));
        sep = ",";
    }
    if reg.is_pkt_pointer() {
        let _ = write!(out, "{sep}r={}", unum(reg.range as i64 as u64));
        sep = ",";
    }
    if t == RegType::Mem {
        let _ = write!(out, "{sep}sz={}", unum(reg.mem_size as u64));
        sep = ",";
    }
    if t == RegType::ConstPtrToDynptr {
        let kind = crate::call::dynptr::slot_kind_name(reg.flags);
        let _ = write!(out, "{sep}type={kind}");
        sep = ",";
    }
    if reg.var_off.is_const() {
        if reg.var_off.value != 0 {
            let _ = write!(out, "{sep}imm={}", snum(reg.var_off.value as i64));
        }
    } else {
        scalar_ranges(reg, &mut out, &mut sep);
        if !reg.var_off.is_unknown() {
            let _ = write!(out, "{sep}var_off={}", reg.var_off.text());
        }
    }
    out.push(')');
    out
}

/// The kernel keeps 15 characters of a map name (`BPF_OBJ_NAME_LEN` - 1).
pub(crate) fn kernel_map_name(name: &str) -> &str {
    let end = name.char_indices().nth(15).map_or(name.len(), |(i, _)| i);
    &name[..end]
}

/// `print_verifier_state` for one frame: ` R1=ctx() R10=fp0 fp-8=mmmmmmmm`, without newline.
pub fn frame_state_text(
    env: &Env<'_>,
    vstate: &VerifierState,
    frame: &FuncState,
    print_all: bool,
) -> String {
    let mut out = String::new();
    let log = &env.log;
    if frame.frameno != 0 {
        let _ = write!(out, " frame{}:", frame.frameno);
    }
    for (i, reg) in frame.regs.iter().enumerate() {
        if reg.ty == RegType::NotInit {
            continue;
        }
        if !print_all && log.scratched_regs & (1 << i) == 0 {
            continue;
        }
        let _ = write!(out, " R{i}={}", reg_text(env, reg, Some(frame.frameno)));
    }
    let mut i = 0;
    while i < frame.stack.len() {
        let slot = &frame.stack[i];
        let index = i;
        i += 1;
        if !print_all && (index >= 64 || log.scratched_stack & (1 << index) == 0) {
            continue;
        }
        if slot.slot_type.iter().all(|t| *t == SlotType::Invalid) {
            continue;
        }
        let mut types = slot.types_text();
        let off = -(index as i64 + 1) * SLOT_SIZE as i64;
        match slot.slot_type[SLOT_SIZE - 1] {
            SlotType::Spill => {
                let first_spill = slot
                    .slot_type
                    .iter()
                    .position(|t| *t == SlotType::Spill)
                    .unwrap_or(SLOT_SIZE);
                types.truncate(first_spill);
                let _ = write!(
                    out,
                    " fp{off}={types}{}",
                    reg_text(env, &slot.spilled_ptr, Some(frame.frameno))
                );
            }
            SlotType::Dynptr => {
                // As the kernel's loop (`i += BPF_DYNPTR_NR_SLOTS - 1`): the dynptr is printed
                // once, from the next slot (its first, when this is its second).
                let Some(main) = frame.stack.get(i) else {
                    break;
                };
                let off = -(i as i64 + 1) * SLOT_SIZE as i64;
                let _ = write!(out, " fp{off}={}", dynptr_text(&main.spilled_ptr));
                i += 1;
            }
            SlotType::Iter => {
                // Only the iterator's first slot carries its reference; the others are skipped.
                let reg = &slot.spilled_ptr;
                if reg.ref_obj_id != 0 {
                    let _ = write!(
                        out,
                        " fp{off}=iter_{}(ref_id={},state={},depth={})",
                        crate::call::iter::type_name(env.input.vmlinux_btf(), reg.btf_id),
                        reg.ref_obj_id,
                        reg.iter_state.name(),
                        reg.iter_depth
                    );
                }
            }
            _ => {
                let _ = write!(out, " fp{off}={types}");
            }
        }
    }
    // The kernel prints nothing when the first reference has id 0 (a lock on a map value
    // loaded by address), and skips the others with id 0.
    if vstate.refs.first().is_some_and(|r| r.id != 0) {
        let ids: Vec<String> = vstate
            .refs
            .iter()
            .filter(|r| r.id != 0)
            .map(|r| r.id.to_string())
            .collect();
        let _ = write!(out, " refs={}", ids.join(","));
    }
    if frame.in_callback_fn {
        out.push_str(" cb");
    }
    if frame.in_async_callback_fn {
        out.push_str(" async_cb");
    }
    out
}

/// `print_verifier_state` of the current frame, with newline; clears the scratch marks when
/// printing only what changed.
pub fn print_state(env: &mut Env<'_>, vstate: &VerifierState, print_all: bool) {
    if !env.log.enabled() {
        return;
    }
    let text = frame_state_text(env, vstate, vstate.cur(), print_all);
    env.log.verbose(&text);
    env.log.verbose("\n");
    if !print_all {
        env.log.scratched_regs = 0;
        env.log.scratched_stack = 0;
    }
}

/// `print_insn_state`: the registers an instruction touched, after its line
/// (`N: (op) text        ; R1=...`) when nothing was printed since, else on a line `N:`.
pub fn print_insn_state(env: &mut Env<'_>, vstate: &VerifierState, insn_idx: usize) {
    if !env.log.enabled() {
        return;
    }
    let log = &mut env.log;
    if log.prev_log_pos != 0 && log.prev_log_pos == log.text.len() {
        log.text.pop();
        let pos = log.prev_insn_print_pos;
        let width = (pos + 4).max(40).div_ceil(8) * 8 - pos - 1;
        let _ = write!(log.text, "{:width$};", ' ');
    } else {
        let _ = write!(log.text, "{insn_idx}:");
    }
    print_state(env, vstate, false);
}

/// `verbose_linfo`: `; source text @ file:line` when `insn` starts a new source line.
pub fn print_source_line(env: &mut Env<'_>, insn: usize) {
    if !env.log.enabled() {
        return;
    }
    let lines = env.input.line_info;
    let i = match lines.binary_search_by(|l| l.insn.cmp(&insn)) {
        Ok(i) => i,
        Err(0) => return,
        Err(i) => i - 1,
    };
    if env.last_linfo == Some(i) {
        return;
    }
    let prev = env.last_linfo.map(|p| &lines[p]);
    env.last_linfo = Some(i);
    let line = &lines[i];
    if prev.is_some_and(|p| p.file_name == line.file_name && p.line == line.line) {
        return;
    }
    let file = line.file_name.rsplit('/').next().unwrap_or(&line.file_name);
    let text = format!(
        "; {} @ {}:{}\n",
        line.line_text.trim_start(),
        file,
        line.line
    );
    env.log.verbose(&text);
}

/// A dynptr's stack state as the kernel prints it: `dynptr_xdp(id=1,dynptr_id=1)`.
fn dynptr_text(reg: &RegState) -> String {
    let kind = crate::call::dynptr::slot_kind_name(reg.flags);
    let mut fields = Vec::new();
    if reg.id != 0 {
        fields.push(format!("id={}", reg.id));
    }
    if reg.ref_obj_id != 0 {
        fields.push(format!("ref_id={}", reg.ref_obj_id));
    }
    // The kernel prints the union member `dynptr_id`, which on a dynptr's stack slot overlays
    // its `first_slot` flag: 1 for the slot printed.
    fields.push("dynptr_id=1".to_owned());
    format!("dynptr_{kind}({})", fields.join(","))
}
