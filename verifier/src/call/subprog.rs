//! bpf-to-bpf calls (`check_func_call`, `setup_func_entry`, `prepare_func_exit`): static
//! subprograms are verified per call site in a new frame; global ones once against their BTF
//! prototype, and a call to one only clobbers the caller-saved registers.

use crate::env::Env;
use crate::precision::mark_chain_precision;
use crate::state::reg::{RegState, RegType};
use crate::state::tnum::Tnum;
use crate::state::{FuncState, VerifierState};
use crate::{Errno, Reject};
use bpfemu_isa::Reg;

/// Checks `call pc+rel` at `pc`; returns the instruction the walk continues at.
pub fn check_func_call(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    pc: usize,
    rel: i32,
) -> Result<usize, Reject> {
    let target = (pc as i64 + 1 + rel as i64) as usize;
    let Some(subprog) = env.subprog_at(target) else {
        return Err(env.reject(
            Errno::Efault,
            format!("target of func call at insn {target} is not a program"),
        ));
    };
    // `btf_check_subprog_call` comes first for every subprogram with BTF: its reasons are
    // logged before anything else, and only matter for a global function.
    let args_fit = if env.subprogs[subprog].func_type.is_some() {
        crate::call::global::check_call_args(env, state, subprog)
    } else {
        Ok(())
    };
    if env.subprogs[subprog].is_global {
        let name = env.subprogs[subprog].name.clone();
        if state.active_locks > 0 {
            env.verbose("global function calls are not allowed while holding a lock,\n");
            return Err(env.reject(Errno::Einval, "use static function instead"));
        }
        // An XDP program never sleeps.
        if env.subprogs[subprog].might_sleep
            && crate::behaviour::refuses_global_calls_that_may_sleep(env.input.kernel.version())
        {
            if crate::behaviour::words_sleeping_calls_by_context(env.input.kernel.version()) {
                let context = crate::call::helper::non_sleepable_context(state);
                return Err(env.reject(
                    Errno::Einval,
                    format!("sleepable global function {name}() called in {context}"),
                ));
            }
            env.verbose(
                "global functions that may sleep are not allowed in non-sleepable context,\n\
                 i.e., in a RCU/IRQ/preempt-disabled section, or in\n",
            );
            return Err(env.reject(Errno::Einval, "a non-sleepable BPF program context"));
        }
        if args_fit.is_err() {
            return Err(env.reject(
                Errno::Einval,
                crate::profile::global_funcs::caller_mismatch(
                    env.input.kernel.version(),
                    subprog,
                    &name,
                ),
            ));
        }
        env.subprogs[subprog].called = true;
        if env.log.enabled() {
            env.verbose(&format!(
                "Func#{subprog} ('{name}') is global and assumed valid.\n"
            ));
        }
        if env.subprogs[subprog].changes_pkt_data
            && crate::behaviour::forgets_packets_at_tail_calls(env.input.kernel.version())
        {
            state.invalidate_packet_pointers();
        }
        state.clobber_caller_saved();
        *state.reg_mut(Reg::R0) = RegState::unknown_scalar();
        return Ok(pc + 1);
    }
    setup_func_entry(env, state, subprog, pc)?;
    crate::stack_liveness::leave_callchain(env);
    // `clear_caller_saved_regs`: R0-R5 of the caller mean nothing until the call returns.
    for r in 0..=5 {
        let caller = state.curframe() - 1;
        state.frames[caller].regs[r] = RegState::not_init();
    }
    if env.log.enabled() {
        let caller = state.frames[state.curframe() - 1].clone();
        let callee = state.cur().clone();
        let ct = crate::log::frame_state_text(env, state, &caller, true);
        let ce = crate::log::frame_state_text(env, state, &callee, true);
        env.verbose(&format!("caller:\n{ct}\ncallee:\n{ce}\n"));
    }
    Ok(env.subprogs[subprog].start)
}

/// `setup_func_entry` with `set_callee_state`: a new frame whose R1-R5 are the caller's.
pub fn setup_func_entry(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    subprog: usize,
    callsite: usize,
) -> Result<(), Reject> {
    if state.frames.len() >= crate::behaviour::max_call_frames(env.input.kernel.version()) {
        return Err(env.reject(
            Errno::E2big,
            format!(
                "the call stack of {} frames is too deep",
                state.frames.len() + 1
            ),
        ));
    }
    let frameno = state.frames.len() as u32;
    let mut callee = FuncState::new(callsite, frameno, subprog as u32);
    let mut fp = RegState::pointer(RegType::Stack);
    fp.frameno = frameno;
    callee.regs[Reg::R10.index()] = fp;
    for r in 1..=5 {
        callee.regs[r] = state.cur().regs[r];
    }
    state.frames.push(callee);
    if crate::read_marks::enabled(env) {
        crate::read_marks::enter_callee(state);
    }
    env.log.scratch_all();
    Ok(())
}

/// `exit` from a subprogram or callback frame: pops the frame, returns where the walk continues.
pub fn prepare_func_exit(env: &mut Env<'_>, state: &mut VerifierState) -> Result<usize, Reject> {
    let r0 = *state.reg(Reg::R0);
    if r0.ty == RegType::Stack {
        return Err(env.reject(Errno::Einval, "cannot return stack pointer to the caller"));
    }
    let callee = state.cur().clone();
    if callee.in_callback_fn {
        if r0.ty != RegType::Scalar {
            return Err(env.reject(Errno::Eacces, "R0 not a scalar value"));
        }
        mark_chain_precision(env, state, Reg::R0)?;
        let (min, max) = callee.callback_ret_range;
        let version = env.input.kernel.version();
        if !crate::behaviour::checks_return_ranges_by_bounds(version) {
            // 6.1: the range is a tnum, and R0's tnum must lie within it.
            let range = Tnum::range(min as u64, max as u64);
            if !tnum_within(range, r0.var_off) {
                let msg = invalid_scalar_message_6_1(&r0, range, "At callback return", "R0");
                return Err(env.reject(Errno::Einval, msg));
            }
        } else if r0.smin_value < min || r0.smax_value > max {
            let msg = invalid_scalar_message(&r0, (min, max), "At callback return", "R0");
            return Err(env.reject(Errno::Einval, msg));
        }
    }
    let caller_idx = state.curframe() - 1;
    if !callee.in_callback_fn {
        state.frames[caller_idx].regs[0] = r0;
        crate::read_marks::return_r0(state);
    }
    // A callback walked as a loop returns to its call; one entered once goes on after it.
    let iterates = crate::behaviour::iterates_sync_callbacks(env.input.kernel.version());
    let back_to_call = callee.in_callback_fn && iterates;
    let next = if back_to_call {
        callee.callsite
    } else {
        callee.callsite + 1
    };
    if env.log.enabled() {
        let caller = state.frames[caller_idx].clone();
        let ce = crate::log::frame_state_text(env, state, &callee, true);
        let ct = crate::log::frame_state_text(env, state, &caller, true);
        env.verbose(&format!(
            "returning from callee:\n{ce}\nto caller at {next}:\n{ct}\n"
        ));
    }
    state.frames.pop();
    if back_to_call {
        crate::explore::widen_after_callback(env, state, next);
    }
    Ok(next)
}

/// `tnum_in(range, value)`: every value `value` may hold is one `range` may hold.
pub(crate) fn tnum_within(range: Tnum, value: Tnum) -> bool {
    value.mask & !range.mask == 0 && value.value & !range.mask == range.value
}

/// 6.1's `verbose_invalid_scalar`, in tnums: `At callback return the register R0 has value
/// (0x2; 0x0) should have been in (0x0; 0x1)`.
pub(crate) fn invalid_scalar_message_6_1(
    r: &RegState,
    range: Tnum,
    ctx: &str,
    name: &str,
) -> String {
    let value = match r.var_off == Tnum::UNKNOWN {
        true => "unknown scalar value".to_owned(),
        false => format!("value {}", r.var_off.pair_text()),
    };
    format!(
        "{ctx} the register {name} has {value} should have been in {}",
        range.pair_text()
    )
}

/// `verbose_invalid_scalar`: `At program exit the register R0 has smin=.. smax=.. should have
/// been in [a, b]`.
pub fn invalid_scalar_message(
    r: &RegState,
    (min, max): (i64, i64),
    ctx: &str,
    name: &str,
) -> String {
    let mut text = format!("{ctx} the register {name} has");
    let mut unknown = true;
    if r.smin_value > i64::MIN {
        text.push_str(&format!(" smin={}", r.smin_value));
        unknown = false;
    }
    if r.smax_value < i64::MAX {
        text.push_str(&format!(" smax={}", r.smax_value));
        unknown = false;
    }
    if unknown {
        text.push_str(" unknown scalar value");
    }
    text.push_str(&format!(" should have been in [{min}, {max}]"));
    text
}
