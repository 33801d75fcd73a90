//! The depth-first walk (`do_check`): one instruction at a time on the current path, the other
//! edge of each branch pushed for later, checkpoints at prune points (`is_state_visited`), the
//! limits, and the closing statistics.

use crate::branch::{Branch, check_cond_jmp};
use crate::env::{Env, Explored};
use crate::log::{Log, print_insn_state, print_source_line, print_state};
use crate::precision::propagate_precision;
use crate::profile;
use crate::prune::{Exact, states_equal, states_maybe_looping};
use crate::read_marks;
use crate::state::VerifierState;
use crate::state::frame::JmpHistoryEntry;
use crate::state::reg::{RegState, RegType};
use crate::{
    COMPLEXITY_LIMIT_JMP_SEQ, Errno, Options, Outcome, ProgramInput, Reject, Rejection, Stats,
    Verdict, alu, call, check, fixup, liveness, mem, stack_liveness,
};
use bpfemu_isa::{CallTarget, Insn, KernelVersion, Program, Reg};
use bpfemu_loader::Kernel;
use std::time::Instant;

/// A pushed branch (`struct bpf_verifier_stack_elem`).
struct Pending {
    state: VerifierState,
    insn_idx: usize,
    prev_insn_idx: usize,
    log_pos: usize,
}

/// What one instruction leaves the walk to do.
enum Step {
    /// Continue at this instruction.
    Next(usize),
    /// The path ended (exit of the main program, or pruned).
    PathDone,
}

/// Verifies `input`; see [`crate::verify`].
pub fn run(input: &ProgramInput<'_>, opts: &Options) -> Verdict {
    run_with(input, opts, None).0
}

/// [`run`] with the rejected path recorded and explained (see [`crate::explain`]); the
/// registers are recorded from the `changes_from`th processed instruction on.
pub fn run_traced(
    input: &ProgramInput<'_>,
    opts: &Options,
    changes_from: u64,
) -> (Verdict, Option<crate::explain::Explanation>) {
    run_with(input, opts, Some(changes_from))
}

fn run_with(
    input: &ProgramInput<'_>,
    opts: &Options,
    traced: Option<u64>,
) -> (Verdict, Option<crate::explain::Explanation>) {
    // The kernel's BTF is parsed (once per kernel value) before the clock starts, for
    // programs that need it (kfuncs, kernel variables): the kernel parsed its own at boot, and
    // its verification time does not count that either.
    if needs_vmlinux_btf(input) {
        let _ = input.kernel.btf();
    }
    let started = Instant::now();
    let _bounds_rules = crate::state::bounds::BoundsRules::enter(input.kernel.version());
    let mut log = Log::new(opts.log_level);
    let Some(ops) = crate::prog_type::ops_for(input.prog_type) else {
        let msg = format!("not yet supported: program type {}", input.prog_type);
        log.verbose(&format!("{msg}\n"));
        return (finish_early(log, msg, Errno::Einval, true, started), None);
    };
    // The kernel checks raw slots before it explores (check.rs); slots only the walk may
    // refuse are decoded as placeholders that carry the kernel's message.
    let pre = match check::precheck(input, &mut log) {
        Ok(pre) => pre,
        Err(r) => return (finish_early(log, r.msg, r.errno, r.logged, started), None),
    };
    let prog = match Program::decode(pre.sanitized.clone()) {
        Ok(p) => p,
        Err(e) => {
            log.verbose(&format!("{e}\n"));
            return (
                finish_early(log, e.to_string(), Errno::Einval, true, started),
                None,
            );
        }
    };
    let mut env = Env::new(input, prog, ops, log);
    if let Some(changes_from) = traced {
        env.trace = Some(Box::new(crate::trace::Trace::new(env.len(), changes_from)));
    }
    let result = check::check_program(&mut env, &pre).and_then(|()| {
        mark_callback_calls(&mut env);
        crate::fastcall::mark_patterns(&mut env);
        liveness::compute_live_registers(&mut env);
        if crate::stack_liveness_static::enabled(&env) {
            env.const_regs = crate::const_fold::compute(&env);
            let computed = crate::stack_liveness_static::compute(&env)
                .map_err(|msg| env.reject(Errno::E2big, msg))?;
            env.stack_liveness_static = Some(computed);
        }
        env.scc = crate::scc::compute_scc(&env);
        print_live_regs(&mut env);
        do_check_main(&mut env, opts)
    });
    let explanation = match (env.trace.take(), &result) {
        (Some(trace), Err(reject)) => crate::explain::build(&env, &trace, reject),
        _ => None,
    };
    (finish(env, result, started), explanation)
}

/// Whether the program calls kfuncs or names kernel variables (`ld_imm64` of a BTF id).
fn needs_vmlinux_btf(input: &ProgramInput<'_>) -> bool {
    input.insns.iter().any(|i| {
        let kfunc_call = i.code == 0x85 && i.src == 2;
        let ksym = i.code == 0x18 && (i.src == 3 || i.src == 4);
        kfunc_call || ksym
    })
}

/// Helper calls that run a callback synchronously are checkpoints (`mark_calls_callback`,
/// `mark_force_checkpoint`): their iterations converge there.
fn mark_callback_calls(env: &mut Env<'_>) {
    let calls: Vec<usize> = env
        .prog
        .iter()
        .filter(|(_, i)| {
            matches!(i, Insn::Call(CallTarget::Helper(id)) if call::callback::SYNC_CALLBACK_HELPERS.contains(id))
        })
        .map(|(pc, _)| pc)
        .collect();
    // Kernels that enter the callback once at the call take no checkpoint there.
    let iterates = crate::behaviour::iterates_sync_callbacks(env.input.kernel.version());
    for pc in calls {
        let aux = &mut env.aux[pc];
        aux.calls_callback = true;
        if !iterates {
            continue;
        }
        aux.force_checkpoint = true;
        aux.prune_point = true;
        aux.jmp_point = true;
    }
}

fn print_live_regs(env: &mut Env<'_>) {
    if !env.log.level2() {
        return;
    }
    let scc = env.scc.clone();
    let mut out = String::from("Live regs before insn:\n");
    for (pc, insn) in env.prog.iter() {
        let live = env.live_regs[pc];
        let regs: String = (0..10)
            .map(|r| {
                if live & (1 << r) != 0 {
                    char::from(b'0' + r as u8)
                } else {
                    '.'
                }
            })
            .collect();
        let raw = env.prog.raw()[pc];
        let loop_no = match scc[pc] {
            0 => "    ".to_owned(),
            n => format!("{n:3} "),
        };
        out.push_str(&format!(
            "{loop_no}{pc:3}: {regs} {}\n",
            kfunc_named(
                env.input.kernel,
                &raw,
                bpfemu_isa::disasm::log_line(pc, raw.code, insn)
            )
            .split_once(": ")
            .map_or(String::new(), |(_, t)| t.to_string())
        ));
    }
    env.log.verbose(&out);
}

fn finish_early(
    log: Log,
    message: String,
    errno: Errno,
    logged: bool,
    started: Instant,
) -> Verdict {
    Verdict {
        outcome: Outcome::Rejected(Rejection {
            message,
            insn: None,
            source: None,
            errno,
            logged,
            note: None,
        }),
        log: log.text,
        stats: Stats {
            time: started.elapsed(),
            ..Stats::default()
        },
    }
}

fn finish(mut env: Env<'_>, result: Result<(), Reject>, started: Instant) -> Verdict {
    if result.is_ok() {
        add_bpf_loop_inline_stack(&mut env);
    }
    let time = started.elapsed();
    let c = env.counters.clone();
    let mut stack_depth: Vec<u32> = env.subprogs.iter().map(|s| s.stack_depth).collect();
    // A program that may throw gets the kernel's default exception callback, a hidden
    // subprogram with no stack (`add_hidden_subprog`), when it is accepted.
    if result.is_ok() && env.seen_exception {
        stack_depth.push(0);
    }
    if env.log.level & crate::log::STATS != 0 {
        let depths: Vec<String> = stack_depth.iter().map(u32::to_string).collect();
        let text = format!(
            "verification time {} usec\nstack depth {}\n",
            time.as_micros(),
            depths.join("+")
        );
        env.log.text.push_str(&text);
    }
    if env.log.level != 0 {
        let text = format!(
            "processed {} insns (limit {}) max_states_per_insn {} total_states {} peak_states {} mark_read {}\n",
            c.insn_processed,
            crate::COMPLEXITY_LIMIT_INSNS,
            c.max_states_per_insn,
            c.total_states,
            c.peak_states,
            c.mark_read
        );
        env.log.text.push_str(&text);
    }
    let stats = Stats {
        processed_insns: c.insn_processed,
        total_states: c.total_states,
        peak_states: c.peak_states,
        max_states_per_insn: c.max_states_per_insn,
        mark_read: c.mark_read,
        stack_depth,
        time,
    };
    let outcome = match result {
        Ok(()) => Outcome::Accepted(fixup::xlate(&env)),
        Err(r) => {
            let insn = Some(env.insn_idx);
            let source = env
                .input
                .line_info
                .iter()
                .rev()
                .find(|l| l.insn <= env.insn_idx)
                .cloned();
            Outcome::Rejected(Rejection {
                message: r.msg,
                insn,
                source,
                errno: r.errno,
                logged: r.logged,
                note: None,
            })
        }
    };
    Verdict {
        outcome,
        log: std::mem::take(&mut env.log.text),
        stats,
    }
}

/// The entry state (`init_func_state` plus R1 = ctx).
fn entry_state() -> VerifierState {
    let mut st = VerifierState::new();
    st.cur_mut().regs[Reg::R1.index()] = RegState::pointer(RegType::Ctx);
    st.cur_mut().regs[Reg::R10.index()] = RegState::pointer(RegType::Stack);
    st
}

fn do_check_main(env: &mut Env<'_>, opts: &Options) -> Result<(), Reject> {
    let eager = profile::global_funcs::verified_before_main(env.input.kernel.version());
    if eager {
        for subprog in 1..env.subprogs.len() {
            env.subprogs[subprog].called |= env.subprogs[subprog].is_global;
        }
        do_check_subprogs(env, opts)?;
    }
    let state = entry_state();
    env.log.scratch_all();
    do_check(env, state, 0, opts)?;
    pop_log(env);
    if !eager {
        do_check_subprogs(env, opts)?;
    }
    crate::fastcall::shrink_stack_depths(env);
    check::check_stack_depths(env)
}

/// A walk that succeeded leaves nothing in the log below level 2 (`pop_log` of
/// `do_check_common`).
fn pop_log(env: &mut Env<'_>) {
    if !env.log.level2() {
        env.log.reset(0);
    }
}

/// `do_check_subprogs`: every global function a verified walk called, each on its own for
/// any arguments its prototype allows, until no new one was called.
fn do_check_subprogs(env: &mut Env<'_>, opts: &Options) -> Result<(), Reject> {
    loop {
        let mut verified_now = 0;
        for subprog in 1..env.subprogs.len() {
            let s = &env.subprogs[subprog];
            if !s.is_global || !s.called || s.verified {
                continue;
            }
            do_check_global(env, subprog, opts)?;
            if env.log.enabled() {
                let name = env.subprogs[subprog].name.clone();
                env.verbose(&format!(
                    "Func#{subprog} ('{name}') is safe for any args that match its prototype\n"
                ));
            }
            env.subprogs[subprog].verified = true;
            verified_now += 1;
        }
        if verified_now == 0 {
            return Ok(());
        }
    }
}

/// `do_check_common` for global function `subprog`: a walk of its own, from the entry state
/// its prototype gives, with no checkpoint of earlier walks.
fn do_check_global(env: &mut Env<'_>, subprog: usize, opts: &Options) -> Result<(), Reject> {
    let name = env.subprogs[subprog].name.clone();
    if env.log.enabled() {
        env.verbose(&format!("Validating {name}() func#{subprog}...\n"));
    }
    let args =
        call::global::prepare_func_args(env, subprog).map_err(|call::global::ArgsMismatch| {
            // Verified before any call (kernels before 6.8): the reason is the last word.
            let eager = profile::global_funcs::verified_before_main(env.input.kernel.version());
            match env.subprogs[subprog].args_refusal.clone() {
                Some(reason) if eager => Reject {
                    errno: Errno::Einval,
                    msg: reason,
                    logged: true,
                },
                _ => env.reject(
                    Errno::Einval,
                    crate::profile::global_funcs::caller_mismatch(
                        env.input.kernel.version(),
                        subprog,
                        &name,
                    ),
                ),
            }
        })?;
    env.explored.clear();
    env.buckets.iter_mut().for_each(Vec::clear);
    env.last_linfo = None;
    let mut state = VerifierState::new();
    state.cur_mut().subprogno = subprog as u32;
    state.cur_mut().regs[Reg::R10.index()] = RegState::pointer(RegType::Stack);
    call::global::entry_regs(env, &mut state, &args);
    env.log.scratch_all();
    let start = env.subprogs[subprog].start;
    do_check(env, state, start, opts)?;
    pop_log(env);
    Ok(())
}

/// `do_check`: the walk from `state` at `start` until every pushed branch is done.
fn do_check(
    env: &mut Env<'_>,
    mut state: VerifierState,
    start: usize,
    opts: &Options,
) -> Result<(), Reject> {
    if let Some(trace) = env.trace.as_mut() {
        trace.start(&state);
    }
    let result = walk(env, &mut state, start, opts);
    if result.is_err()
        && let Some(trace) = env.trace.as_mut()
    {
        let from = env.log.prev_log_pos.min(env.log.text.len());
        let text = env.log.text.get(from..).unwrap_or_default().to_owned();
        trace.fail(env.insn_idx, &state, text);
    }
    result
}

/// The body of [`do_check`], on `state` (left as it was when a check refused).
fn walk(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    start: usize,
    opts: &Options,
) -> Result<(), Reject> {
    let mut stack: Vec<Pending> = Vec::new();
    let mut do_print_state = false;
    let mut prev_insn_idx = start;
    env.insn_idx = start;
    loop {
        env.cur_hist_ent = false;
        env.prev_insn_idx = prev_insn_idx;
        let pc = env.insn_idx;
        if pc >= env.len() {
            return Err(env.reject(
                Errno::Efault,
                format!("invalid insn idx {pc} insn_cnt {}", env.len()),
            ));
        }
        env.counters.insn_processed += 1;
        if let Some(trace) = env.trace.as_mut() {
            trace.visit(pc);
        }
        if env.counters.insn_processed > opts.insn_limit {
            return Err(env.reject(
                Errno::E2big,
                format!(
                    "BPF program is too large. Processed {} insn",
                    env.counters.insn_processed
                ),
            ));
        }
        state.last_insn_idx = env.prev_insn_idx;
        state.insn_idx = pc;
        let mut step = None;
        if env.aux[pc].prune_point && is_state_visited(env, state, pc)? {
            if env.log.enabled() {
                let text = if do_print_state {
                    format!("\nfrom {} to {}: safe\n", env.prev_insn_idx, pc)
                } else {
                    format!("{pc}: safe\n")
                };
                env.log.verbose(&text);
            }
            step = Some(Step::PathDone);
        }
        let step = match step {
            Some(s) => s,
            None => {
                if env.aux[pc].jmp_point {
                    push_jmp_history(env, state, 0);
                }
                if env.log.level2() && do_print_state {
                    env.log
                        .verbose(&format!("\nfrom {} to {}:", env.prev_insn_idx, pc));
                    print_state(env, state, true);
                    do_print_state = false;
                }
                log_insn(env, state, pc);
                check::check_reached(env, state, pc)?;
                env.aux[pc].seen = true;
                prev_insn_idx = pc;
                let marks = read_marks::enabled(env).then(|| {
                    let insn = *env
                        .insn(pc)
                        .expect("the walk only visits instruction starts");
                    let defined = read_marks::before_insn(env, state, &insn);
                    (defined, state.curframe())
                });
                stack_liveness::begin_insn(env, state, pc);
                let step = do_check_insn(env, state, pc, &mut stack, &mut do_print_state)?;
                stack_liveness::commit_insn(env);
                if let Some((defined, frame)) = marks {
                    read_marks::after_insn(state, frame, defined);
                }
                for (st, at, prev) in std::mem::take(&mut env.pending) {
                    push_branch(env, &mut stack, st, at, prev);
                }
                if let Some(trace) = env.trace.as_mut() {
                    trace.step(pc, state);
                }
                if stack.len() > COMPLEXITY_LIMIT_JMP_SEQ {
                    return Err(env.reject(
                        Errno::E2big,
                        format!("The sequence of {} jumps is too complex.", stack.len()),
                    ));
                }
                step
            }
        };
        match step {
            Step::Next(next) => env.insn_idx = next,
            Step::PathDone => {
                env.log.scratch_all();
                update_branch_counts(env, state.parent);
                stack_liveness::update(env, state);
                let Some(p) = stack.pop() else {
                    return Ok(());
                };
                if !env.log.level2() {
                    env.log.reset(p.log_pos);
                }
                *state = p.state;
                if let Some(trace) = env.trace.as_mut() {
                    trace.pop(p.prev_insn_idx, state);
                }
                env.insn_idx = p.insn_idx;
                prev_insn_idx = p.prev_insn_idx;
                do_print_state = true;
            }
        }
    }
}

/// The instruction line, with the state the previous instruction changed before it.
fn log_insn(env: &mut Env<'_>, state: &VerifierState, pc: usize) {
    if !env.log.enabled() {
        return;
    }
    if env.log.scratched() {
        print_insn_state(env, state, pc);
    }
    print_source_line(env, pc);
    let Some(insn) = env.insn(pc).copied() else {
        return;
    };
    let code = env.prog.raw()[pc].code;
    let start = env.log.text.len();
    env.log.prev_log_pos = start;
    let line = kfunc_named(
        env.input.kernel,
        &env.prog.raw()[pc],
        bpfemu_isa::disasm::log_line(pc, code, &insn),
    );
    env.log.verbose(&line);
    if !line.ends_with('\n') {
        env.log.verbose("\n");
    }
    env.log.prev_insn_print_pos = env.log.text.len() - start;
    env.log.prev_log_pos = env.log.text.len();
}

/// The kernel names a vmlinux kfunc in its log (`call bpf_dynptr_from_xdp#63892`) where the
/// disassembler, knowing no BTF, says `kernel-function#63892`.
pub fn kfunc_named(kernel: &Kernel, raw: &bpfemu_isa::RawInsn, line: String) -> String {
    if raw.code != 0x85 || raw.src != 2 || raw.off != 0 {
        return line;
    }
    // Only a kfunc call reads the kernel's BTF.
    let name = kernel
        .btf()
        .ok()
        .and_then(|btf| btf.name_of(raw.imm as u32))
        .filter(|n| !n.is_empty());
    match name {
        Some(name) => line.replace("call kernel-function#", &format!("call {name}#")),
        None => line,
    }
}

/// `push_jmp_history`: records the instruction (and how it touched the stack) for precision
/// backtracking; one entry per instruction, flags merged.
pub fn push_jmp_history(env: &mut Env<'_>, state: &mut VerifierState, flags: u32) {
    push_jmp_history_linked(env, state, flags, 0);
}

/// [`push_jmp_history`] recording the scalars a jump refines together (packed).
pub fn push_jmp_history_linked(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    flags: u32,
    linked_regs: u64,
) {
    if env.cur_hist_ent
        && let Some(last) = state.jmp_history.last_mut()
    {
        last.flags |= flags;
        if linked_regs != 0 {
            last.linked_regs = linked_regs;
        }
        return;
    }
    state.jmp_history.push(JmpHistoryEntry {
        idx: env.insn_idx,
        prev_idx: env.prev_insn_idx,
        flags,
        linked_regs,
    });
    env.cur_hist_ent = true;
}

fn push_branch(
    env: &mut Env<'_>,
    stack: &mut Vec<Pending>,
    st: VerifierState,
    insn_idx: usize,
    prev: usize,
) {
    if let Some(p) = st.parent {
        env.explored[p].branches += 1;
    }
    if let Some(trace) = env.trace.as_mut() {
        trace.mark();
    }
    stack.push(Pending {
        state: st,
        insn_idx,
        prev_insn_idx: prev,
        log_pos: env.log.text.len(),
    });
}

/// `update_branch_counts`: a path finished; checkpoints with no path left become usable.
fn update_branch_counts(env: &mut Env<'_>, mut parent: Option<usize>) {
    while let Some(p) = parent {
        let e = &mut env.explored[p];
        e.branches -= 1;
        if e.branches > 0 {
            break;
        }
        crate::loops::maybe_exit_scc(env, p);
        let e = &env.explored[p];
        if e.evicted {
            env.states_alive -= 1;
        }
        parent = e.state.parent;
    }
}

fn bucket_of(env: &Env<'_>, state: &VerifierState, pc: usize) -> usize {
    let callsite = state.cur().callsite as u32;
    ((pc as u32 ^ callsite) % env.len().max(1) as u32) as usize
}

/// `is_state_visited`: true when an explored state covers this one (the path is pruned);
/// else maybe records the state as a new checkpoint.
fn is_state_visited(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    pc: usize,
) -> Result<bool, Reject> {
    let force_new = env.aux[pc].force_checkpoint || state.jmp_history.len() > 40;
    let c = &env.counters;
    let mut add_new_state = force_new
        || (c.jmps_processed - c.prev_jmps_processed >= 2
            && c.insn_processed - c.prev_insn_processed >= 8);
    let bucket = bucket_of(env, state, pc);
    match env.stack_liveness_static.as_ref() {
        // 7.2 cleans the current state itself, so every checkpoint is born clean.
        Some(static_liveness) => {
            crate::stack_liveness_static::clean_current(env, static_liveness, state)
        }
        None => clean_live_states(env, state, pc, bucket),
    }
    let list = env.buckets[bucket].clone();
    let mut states_cnt = 0u32;
    let mut evict = Vec::new();
    for &idx in list.iter().rev() {
        states_cnt += 1;
        let e = &env.explored[idx];
        if e.state.insn_idx != pc {
            continue;
        }
        let mut hit = false;
        // A hit that closes a loop whose exploration is not finished (`loop`).
        let mut closes_loop = false;
        let may_goto = matches!(env.insn(pc), Some(Insn::MayGoto { .. }));
        if e.branches > 0 && env.aux[pc].force_checkpoint && is_iter_next(env, pc) {
            // An iterator's loop converges when the state with the iterator still active is
            // within one of an earlier iteration; no infinite-loop check here.
            if states_equal(env, &e.state, state, Exact::RangeWithin)
                && crate::call::iter::next_arg_is_active(state)
            {
                hit = true;
                closes_loop = true;
            } else {
                skip_new_state_heuristic(env, force_new, &mut add_new_state);
            }
        } else if e.branches > 0
            && may_goto
            && e.state.may_goto_depth != state.may_goto_depth
            && states_equal(env, &e.state, state, Exact::RangeWithin)
        {
            hit = true;
            closes_loop = true;
        } else if e.branches > 0 && env.aux[pc].calls_callback {
            if states_equal(env, &e.state, state, Exact::RangeWithin) {
                hit = true;
            } else {
                skip_new_state_heuristic(env, force_new, &mut add_new_state);
            }
        } else if e.branches > 0 {
            if states_maybe_looping(&e.state, state)
                && states_equal(env, &e.state, state, Exact::Exact)
                && !crate::call::iter::active_depths_differ(&e.state, state)
                && e.state.may_goto_depth == state.may_goto_depth
                && e.state.callback_unroll_depth == state.callback_unroll_depth
            {
                print_source_line(env, pc);
                env.verbose(&format!("infinite loop detected at insn {pc}\n"));
                if env.log.enabled() {
                    let old = env.explored[idx].state.clone();
                    let cur = crate::log::frame_state_text(env, state, state.cur(), true);
                    let oldt = crate::log::frame_state_text(env, &old, old.cur(), true);
                    env.log
                        .verbose(&format!("cur state:{cur}\nold state:{oldt}\n"));
                }
                return Err(Reject {
                    errno: Errno::Einval,
                    msg: "old state:".to_string(),
                    logged: true,
                }
                .with_infinite_loop(pc));
            }
            skip_new_state_heuristic(env, force_new, &mut add_new_state);
        } else {
            // Inside a loop still being explored the checkpoint lacks the marks of the paths
            // to come: imprecise scalars are compared too.
            closes_loop = crate::loops::incomplete_read_marks(env, &e.state);
            let exact = if closes_loop {
                Exact::RangeWithin
            } else {
                Exact::NotExact
            };
            hit = states_equal(env, &e.state, state, exact);
        }
        if hit {
            env.explored[idx].hit_cnt += 1;
            if read_marks::enabled(env) {
                read_marks::propagate_to_pruned(env, idx, state);
            }
            if env.aux[pc].jmp_point {
                push_jmp_history(env, state, 0);
            }
            let old = env.explored[idx].state.clone();
            propagate_precision(env, &old, state);
            if closes_loop {
                crate::loops::add_backedge(env, idx, state);
            }
            // The kernel takes a state out of the list the moment it misses too often, so a
            // hit further down the list does not bring it back.
            evict_states(env, bucket, &evict);
            return Ok(true);
        }
        let e = &mut env.explored[idx];
        if add_new_state {
            e.miss_cnt += 1;
        }
        let n = if env.aux[pc].force_checkpoint && e.branches > 0 {
            64
        } else {
            3
        };
        if e.miss_cnt > e.hit_cnt * n + n {
            evict.push(idx);
        }
    }
    evict_states(env, bucket, &evict);
    env.counters.max_states_per_insn = env.counters.max_states_per_insn.max(states_cnt);
    if !add_new_state {
        return Ok(false);
    }
    env.counters.total_states += 1;
    env.states_alive += 1;
    env.update_peak_states();
    env.counters.prev_jmps_processed = env.counters.jmps_processed;
    env.counters.prev_insn_processed = env.counters.insn_processed;
    mark_all_scalars_imprecise(state);
    let mut new = state.clone();
    new.insn_idx = pc;
    let idx = env.explored.len();
    env.explored.push(Explored {
        state: new,
        branches: 1,
        hit_cnt: 0,
        miss_cnt: 0,
        evicted: false,
        cleaned: false,
    });
    env.buckets[bucket].push(idx);
    crate::loops::maybe_enter_scc(env, idx);
    state.parent = Some(idx);
    if read_marks::enabled(env) {
        read_marks::link_to_checkpoint(state, idx);
    }
    state.dfs_depth = env.explored[idx].state.dfs_depth + 1;
    state.first_insn_idx = pc;
    state.jmp_history.clear();
    Ok(false)
}

/// `clean_live_states`: each checkpoint at `pc` in the same call chain whose paths are all
/// finished forgets, once, what no later instruction reads.
fn clean_live_states(env: &mut Env<'_>, cur: &VerifierState, pc: usize, bucket: usize) {
    for idx in env.buckets[bucket].clone() {
        let e = &env.explored[idx];
        if e.branches > 0
            || e.cleaned
            || e.state.insn_idx != pc
            || !same_callsites(&e.state, cur)
            || crate::loops::incomplete_read_marks(env, &e.state)
        {
            continue;
        }
        if read_marks::enabled(env) {
            read_marks::clean(env, idx);
        } else {
            stack_liveness::clean_state(env, idx);
        }
        env.explored[idx].cleaned = true;
    }
}

fn same_callsites(a: &VerifierState, b: &VerifierState) -> bool {
    a.frames.len() == b.frames.len()
        && a.frames
            .iter()
            .zip(&b.frames)
            .all(|(x, y)| x.callsite == y.callsite)
}

/// Takes the states that missed too often out of their bucket (the kernel's move to its free
/// list); one still on a path's parent chain stays alive until that path ends.
fn evict_states(env: &mut Env<'_>, bucket: usize, evict: &[usize]) {
    if evict.is_empty() {
        return;
    }
    env.buckets[bucket].retain(|i| !evict.contains(i));
    for &idx in evict {
        let e = &mut env.explored[idx];
        e.evicted = true;
        if e.branches == 0 {
            env.states_alive -= 1;
        }
    }
}

impl Reject {
    /// The kernel's final line after "infinite loop detected" is the old state's dump; the
    /// message users know is the detection line, which is what we report.
    fn with_infinite_loop(self, pc: usize) -> Reject {
        Reject {
            errno: self.errno,
            msg: format!("infinite loop detected at insn {pc}"),
            logged: true,
        }
    }
}

/// `skip_inf_loop_check`: right after a checkpoint, another is not worth its memory unless
/// forced.
fn skip_new_state_heuristic(env: &Env<'_>, force_new: bool, add_new_state: &mut bool) {
    let c = &env.counters;
    if !force_new
        && c.jmps_processed - c.prev_jmps_processed < 20
        && c.insn_processed - c.prev_insn_processed < 100
    {
        *add_new_state = false;
    }
}

/// Whether the call at `pc` is an iterator's `next` (`is_iter_next_insn`).
fn is_iter_next(env: &Env<'_>, pc: usize) -> bool {
    matches!(
        env.insn(pc),
        Some(Insn::Call(CallTarget::Kfunc { btf_id, off: 0 }))
            if crate::call::iter::iter_op_of_call(env.input.vmlinux_btf(), *btf_id) == Some(crate::call::iter::IterOp::Next)
    )
}

fn mark_all_scalars_imprecise(state: &mut VerifierState) {
    for frame in state.frames.iter_mut() {
        for reg in frame.regs.iter_mut() {
            if reg.ty == RegType::Scalar {
                reg.precise = false;
            }
        }
        for slot in frame.stack.iter_mut() {
            if slot.is_spilled_reg() && slot.spilled_ptr.ty == RegType::Scalar {
                slot.spilled_ptr.precise = false;
            }
        }
    }
}

/// One instruction (`do_check_insn`).
fn do_check_insn(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    pc: usize,
    stack: &mut Vec<Pending>,
    do_print_state: &mut bool,
) -> Result<Step, Reject> {
    let insn = *env
        .insn(pc)
        .expect("the walk only visits instruction starts");
    let next = pc + insn.slots();
    match insn {
        Insn::Alu { .. }
        | Insn::Neg { .. }
        | Insn::MovSx { .. }
        | Insn::AddrSpaceCast { .. }
        | Insn::Endian { .. } => {
            alu::check_alu(env, state, &insn)?;
            Ok(Step::Next(next))
        }
        Insn::Load { .. } | Insn::Store { .. } | Insn::StoreReg { .. } | Insn::Atomic { .. } => {
            mem::check_mem_insn(env, state, &insn)?;
            Ok(Step::Next(next))
        }
        Insn::LdImm64 {
            dst,
            kind,
            imm,
            next_imm,
        } => {
            check_ld_imm(env, state, dst, kind, imm, next_imm)?;
            Ok(Step::Next(next))
        }
        Insn::LdAbs { .. } | Insn::LdInd { .. } => Err(env.reject(
            Errno::Einval,
            "BPF_LD_[ABS|IND] instructions not allowed for this program type",
        )),
        Insn::Ja { off, .. } => {
            env.counters.jmps_processed += 1;
            Ok(Step::Next((pc as i64 + 1 + off as i64) as usize))
        }
        Insn::MayGoto { off } => {
            env.counters.jmps_processed += 1;
            let mut queued = state.clone();
            queued.may_goto_depth += 1;
            if let Some(p) = state.parent.and_then(|p| find_prev_entry(env, p, pc)) {
                let old = env.explored[p].state.clone();
                widen_imprecise_scalars(env, &old, &mut queued);
            }
            push_branch(env, stack, queued, pc + 1, pc);
            Ok(Step::Next((pc as i64 + 1 + off as i64) as usize))
        }
        Insn::Jump {
            width,
            cond,
            dst,
            src,
            off,
        } => {
            env.counters.jmps_processed += 1;
            let target = (pc as i64 + 1 + off as i64) as usize;
            if let bpfemu_isa::Source::Reg(s) = src {
                let mut flags = 0;
                if state.reg(s).ty == RegType::Stack {
                    flags |= crate::state::frame::INSN_F_SRC_REG_STACK;
                }
                if state.reg(dst).ty == RegType::Stack {
                    flags |= crate::state::frame::INSN_F_DST_REG_STACK;
                }
                if flags != 0 {
                    push_jmp_history(env, state, flags);
                }
            } else if state.reg(dst).ty == RegType::Stack {
                push_jmp_history(env, state, crate::state::frame::INSN_F_DST_REG_STACK);
            }
            match check_cond_jmp(env, state, width, cond, dst, src)? {
                Branch::Taken => Ok(Step::Next(target)),
                Branch::NotTaken => Ok(Step::Next(next)),
                Branch::Both(other) => {
                    push_branch(env, stack, *other, target, pc);
                    Ok(Step::Next(next))
                }
            }
        }
        Insn::Call(target) => {
            env.counters.jmps_processed += 1;
            // Static subprograms may run under the lock from 6.12 (their own calls are checked
            // there); helpers may not, except the unlock; kfuncs neither, except the numbers
            // iterator's from 6.18 (`kfunc_spin_allowed`; its graph and resilient-lock kfuncs
            // are not modelled, so stay refused).
            let kernel = env.input.kernel.version();
            let iterators_under_lock = crate::behaviour::allows_iterators_under_lock(kernel);
            let subprograms_under_lock = crate::behaviour::calls_subprograms_under_lock(kernel);
            let helper_not_unlock = matches!(target, CallTarget::Kfunc { btf_id, off }
                    if off != 0 || !iterators_under_lock || !is_iter_num_kfunc(env, btf_id))
                || matches!(target, CallTarget::Local(_) if !subprograms_under_lock)
                || matches!(target, CallTarget::Helper(id) if id != call::proto::SPIN_UNLOCK);
            if state.active_locks > 0 && helper_not_unlock {
                return Err(env.reject(
                    Errno::Einval,
                    "function calls are not allowed while holding a lock",
                ));
            }
            let frames = state.frames.len();
            let next_pc = match target {
                CallTarget::Local(rel) => call::subprog::check_func_call(env, state, pc, rel)?,
                CallTarget::Kfunc { btf_id, off } => {
                    call::kfunc::check_kfunc_call(env, state, pc, btf_id, off)?;
                    // bpf_throw ends the program from any frame (`process_bpf_exit_full` with
                    // `exception_exit`).
                    if call::kfunc::is_throw(env.input.vmlinux_btf(), btf_id, off) {
                        env.seen_exception = true;
                        check_resource_leak(env, state, true)?;
                        return Ok(Step::PathDone);
                    }
                    next
                }
                CallTarget::Helper(id)
                    if id == call::proto::TAIL_CALL
                        && frames > 1
                        && crate::behaviour::leaves_subprograms_by_tail_call(
                            env.input.kernel.version(),
                        ) =>
                {
                    call::helper::check_helper_call(env, state, pc, id)?;
                    return tail_call_in_subprogram(env, state, pc);
                }
                CallTarget::Helper(id) => {
                    call::helper::check_helper_call(env, state, pc, id)?;
                    if state.frames.len() > frames {
                        stack_liveness::leave_callchain(env);
                        let sp = state.cur().subprogno as usize;
                        env.subprogs[sp].start
                    } else {
                        next
                    }
                }
            };
            env.log.scratch_reg(Reg::R0);
            Ok(Step::Next(next_pc))
        }
        Insn::Exit => {
            env.counters.jmps_processed += 1;
            check_resource_leak(env, state, false)?;
            if state.frames.len() > 1 {
                stack_liveness::update(env, state);
                let next_pc = call::subprog::prepare_func_exit(env, state)?;
                *do_print_state = true;
                return Ok(Step::Next(next_pc));
            }
            check_return_code(env, state)?;
            Ok(Step::PathDone)
        }
    }
}

/// A tail call from a subprogram (6.18's `check_helper_call`): when it fails, the walk goes
/// on after it, a path queued as it stands; when it succeeds, the program it jumps to returns
/// to this subprogram's caller, so the walk returns there at once, with R0 whatever that
/// program returned and every packet pointer gone (it may have moved the packet).
fn tail_call_in_subprogram(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    pc: usize,
) -> Result<Step, Reject> {
    env.log.scratch_reg(Reg::R0);
    env.pending.push((state.clone(), pc + 1, pc));
    state.invalidate_packet_pointers();
    *state.reg_mut(Reg::R0) = crate::state::reg::RegState::unknown_scalar();
    stack_liveness::leave_callchain(env);
    let next = call::subprog::prepare_func_exit(env, state)?;
    Ok(Step::Next(next))
}

/// `check_resource_leak` at `exit` (or at `bpf_throw`, an exception exit): locks and RCU,
/// irq and non-preemptible sections in the main program, and references not released
/// (`Unreleased reference`) in the main program or at any exception exit.
fn check_resource_leak(
    env: &mut Env<'_>,
    state: &VerifierState,
    exception_exit: bool,
) -> Result<(), Reject> {
    if !crate::behaviour::words_exit_leaks_by_resource(env.input.kernel.version()) {
        return check_exit_leaks_before_6_13(env, state, exception_exit);
    }
    const EXIT: &str = "BPF_EXIT instruction in main prog";
    let prefix: &str = if exception_exit { "bpf_throw" } else { EXIT };
    let main = state.frames.len() == 1;
    if main && state.active_locks > 0 {
        return Err(env.reject(
            Errno::Einval,
            format!("{prefix} cannot be used inside bpf_spin_lock-ed region"),
        ));
    }
    if main || exception_exit {
        let leaks = unreleased_references(state);
        if !leaks.is_empty() {
            for line in leaks {
                env.verbose(&format!("{line}\n"));
            }
            return Err(env.reject(
                Errno::Einval,
                format!("{prefix} would lead to reference leak"),
            ));
        }
    }
    if main && state.active_irq_id != 0 {
        return Err(env.reject(
            Errno::Einval,
            format!("{prefix} cannot be used inside bpf_local_irq_save-ed region"),
        ));
    }
    if main && state.active_rcu_lock > 0 {
        return Err(env.reject(
            Errno::Einval,
            format!("{prefix} cannot be used inside bpf_rcu_read_lock-ed region"),
        ));
    }
    if main && state.active_preempt_locks > 0 {
        return Err(env.reject(
            Errno::Einval,
            format!("{prefix} cannot be used inside bpf_preempt_disable-ed region"),
        ));
    }
    Ok(())
}

/// An `exit` holding what must be released, in the words of the kernels before
/// [`crate::behaviour::words_exit_leaks_by_resource`]: a lock, RCU or a non-preemptible
/// section "is missing" its release; a reference leaked ends the log with its own
/// `Unreleased reference` line. 5.10 and 6.1 refuse an exit holding a lock from any frame.
/// 6.12 checks a `bpf_throw` (`exception_exit`) as an exit, in the same words.
fn check_exit_leaks_before_6_13(
    env: &mut Env<'_>,
    state: &VerifierState,
    exception_exit: bool,
) -> Result<(), Reject> {
    let main = state.frames.len() == 1;
    let lock_checked_in_every_frame = env.input.kernel.version() < KernelVersion::V6_12;
    if state.active_locks > 0 && (main || lock_checked_in_every_frame) {
        return Err(env.reject(Errno::Einval, "bpf_spin_unlock is missing"));
    }
    if main && state.active_rcu_lock > 0 {
        return Err(env.reject(Errno::Einval, "bpf_rcu_read_unlock is missing"));
    }
    if main && state.active_preempt_locks > 0 {
        let n = state.active_preempt_locks;
        let missing = if n == 1 { " is" } else { "(s) are" };
        return Err(env.reject(
            Errno::Einval,
            format!("{n} bpf_preempt_enable{missing} missing"),
        ));
    }
    // `bpf_throw` leaves the program from any frame: Debian's 6.12 checks its references
    // there, with the exit's words (the probes kfunc_throw/throw_*_reference_bad).
    if !main && !exception_exit {
        return Ok(());
    }
    let mut leaks = unreleased_references(state);
    let Some(last) = leaks.pop() else {
        return Ok(());
    };
    for line in &leaks {
        env.verbose(&format!("{line}\n"));
    }
    Err(env.reject(Errno::Einval, last))
}

/// `check_reference_leak`'s lines: one per pointer reference still held.
fn unreleased_references(state: &VerifierState) -> Vec<String> {
    state
        .refs
        .iter()
        .filter(|r| r.kind == crate::state::RefKind::Ptr)
        .map(|r| format!("Unreleased reference id={} alloc_insn={}", r.id, r.insn_idx))
        .collect()
}

/// `check_return_code` for the main program.
fn check_return_code(env: &mut Env<'_>, state: &mut VerifierState) -> Result<(), Reject> {
    alu::check_reg_read(env, state, Reg::R0)?;
    let r0 = *state.reg(Reg::R0);
    if state.cur().in_async_callback_fn {
        return check_async_callback_return(env, state);
    }
    if state.cur().subprogno != 0 {
        // A global function verified on its own returns a scalar, nothing else.
        if r0.ty != RegType::Scalar {
            let name = crate::log::reg_type_name(env, &r0);
            return Err(env.reject(
                Errno::Einval,
                format!("At subprogram exit the register R0 is not a scalar value ({name})"),
            ));
        }
        return Ok(());
    }
    let Some(range) = env.prog_type.return_range(env.input.expected_attach_type) else {
        return Ok(());
    };
    if r0.ty != RegType::Scalar {
        let name = crate::log::reg_type_name(env, &r0);
        return Err(env.reject(
            Errno::Einval,
            format!("At program exit the register R0 is not a known value ({name})"),
        ));
    }
    let (min, max) = (range.min as i64, range.max as i64);
    if r0.smin_value < min || r0.smax_value > max {
        let msg = call::subprog::invalid_scalar_message(&r0, (min, max), "At program exit", "R0");
        return Err(env.reject(Errno::Einval, msg));
    }
    Ok(())
}

/// 6.1's `check_return_code` at the end of a timer callback: R0's tnum within zero's.
fn check_async_callback_return_6_1(env: &mut Env<'_>, r0: &RegState) -> Result<(), Reject> {
    if r0.ty != RegType::Scalar {
        let name = crate::log::reg_type_name(env, r0);
        return Err(env.reject(
            Errno::Einval,
            format!("In async callback the register R0 is not a known value ({name})"),
        ));
    }
    let zero = crate::state::tnum::Tnum::constant(0);
    if !call::subprog::tnum_within(zero, r0.var_off) {
        let msg = call::subprog::invalid_scalar_message_6_1(r0, zero, "At async callback", "R0");
        return Err(env.reject(Errno::Einval, msg));
    }
    Ok(())
}

/// `check_return_code` at the end of a timer callback: R0 must be a known value in the
/// callback's range (0).
fn check_async_callback_return(env: &mut Env<'_>, state: &mut VerifierState) -> Result<(), Reject> {
    const CTX: &str = "At async callback return";
    let r0 = *state.reg(Reg::R0);
    if !crate::behaviour::checks_return_ranges_by_bounds(env.input.kernel.version()) {
        return check_async_callback_return_6_1(env, &r0);
    }
    if r0.ty != RegType::Scalar {
        let name = crate::log::reg_type_name(env, &r0);
        return Err(env.reject(
            Errno::Einval,
            format!("{CTX} the register R0 is not a known value ({name})"),
        ));
    }
    crate::precision::mark_chain_precision(env, state, Reg::R0)?;
    let (min, max) = state.cur().callback_ret_range;
    if r0.smin_value < min || r0.smax_value > max {
        let msg = call::subprog::invalid_scalar_message(&r0, (min, max), CTX, "R0");
        return Err(env.reject(Errno::Einval, msg));
    }
    Ok(())
}

/// `check_ld_imm`.
fn check_ld_imm(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    dst: Reg,
    kind: bpfemu_isa::LdImm64Kind,
    imm: i32,
    next_imm: i32,
) -> Result<(), Reject> {
    use bpfemu_isa::LdImm64Kind as K;
    alu::check_reg_write(env, dst)?;
    let reg = match kind {
        K::Imm => RegState::known(Insn::imm64(imm, next_imm)),
        K::Func => {
            let target = (env.insn_idx as i64 + 1 + imm as i64) as usize;
            // A callback's address needs the subprograms' BTF linkage, from func_info.
            if env.input.func_info.is_empty() {
                return Err(env.reject(Errno::Einval, "missing btf func_info"));
            }
            let linkage =
                crate::call::global::func_type(env.input.btf, env.input.func_info, target);
            if linkage.is_some_and(|(_, global)| global) {
                return Err(env.reject(Errno::Einval, "callback function not static"));
            }
            let mut r = RegState::pointer(RegType::Func);
            r.subprogno = env.subprog_at(target).unwrap_or(0) as u32;
            r
        }
        K::MapFd | K::MapIdx | K::MapValue | K::MapIdxValue => {
            let Some(map) = env
                .map(imm as u32)
                .filter(|_| imm >= 0 && (imm as usize) < env.input.maps.len())
            else {
                return Err(env.reject(
                    Errno::Ebadf_or_inval(),
                    format!("fd {imm} is not pointing to valid bpf_map"),
                ));
            };
            let idx = env.insn_idx;
            env.aux[idx].map_index = Some(imm as u32);
            if matches!(kind, K::MapValue | K::MapIdxValue) {
                if map.map_type == bpfemu_isa::uapi::BPF_MAP_TYPE_ARENA {
                    RegState::unknown_scalar()
                } else {
                    let mut r = RegState::pointer(RegType::MapValue);
                    r.map = Some(imm as u32);
                    r.off = next_imm;
                    r
                }
            } else {
                let mut r = RegState::pointer(RegType::ConstPtrToMap);
                r.map = Some(imm as u32);
                r
            }
        }
        K::BtfId => match call::ksym::check_pseudo_btf_id(
            env.input.vmlinux_btf(),
            imm,
            next_imm,
            env.input.kernel.version(),
        ) {
            Ok(ksym) => call::ksym::ksym_reg(ksym),
            Err(e) => return Err(env.reject(Errno::Einval, e.message)),
        },
    };
    *state.reg_mut(dst) = reg;
    Ok(())
}

impl Errno {
    /// `EBADF`'s stand-in: the kernel fails an unknown map fd with EBADF, which bpfemu reports
    /// as EINVAL (its errno set has no EBADF).
    #[allow(non_snake_case)]
    fn Ebadf_or_inval() -> Errno {
        Errno::Einval
    }
}

/// After a callback body returns to its helper call: widen imprecise scalars against the
/// checkpoint of the previous iteration at the call (`prepare_func_exit`).
pub fn widen_after_callback(env: &Env<'_>, state: &mut VerifierState, callsite: usize) {
    if let Some(prev) = find_prev_in(env, state, callsite) {
        let old = env.explored[prev].state.clone();
        widen_imprecise_scalars(env, &old, state);
    }
}

/// `find_prev_entry`: a checkpoint at `pc` on the current path, older than checkpoint `cur`.
pub(crate) fn find_prev_entry(env: &Env<'_>, cur: usize, pc: usize) -> Option<usize> {
    find_prev_in(env, &env.explored[cur].state, pc)
}

fn find_prev_in(env: &Env<'_>, cur_state: &VerifierState, pc: usize) -> Option<usize> {
    let bucket = bucket_of(env, cur_state, pc);
    env.buckets[bucket].iter().rev().copied().find(|&i| {
        let e = &env.explored[i];
        e.state.insn_idx == pc
            && e.branches > 0
            && same_callsites(&e.state, cur_state)
            && e.state.dfs_depth < cur_state.dfs_depth
    })
}

/// `widen_imprecise_scalars`: loop iterations of `may_goto` forget imprecise scalars that
/// changed, so that the loop converges.
pub(crate) fn widen_imprecise_scalars(env: &Env<'_>, old: &VerifierState, cur: &mut VerifierState) {
    let mut idmap = crate::prune::IdMap::new(env.id_gen, env.input.kernel.version());
    let widen = |o: &RegState, c: &mut RegState, idmap: &mut crate::prune::IdMap| {
        if o.ty != RegType::Scalar || c.ty != RegType::Scalar || o.precise || c.precise {
            return;
        }
        if crate::prune::regsafe(o, c, idmap, Exact::Exact) {
            return;
        }
        *c = RegState::unknown_scalar();
    };
    for (fo, fc) in old.frames.iter().zip(cur.frames.iter_mut()) {
        for (o, c) in fo.regs.iter().zip(fc.regs.iter_mut()) {
            widen(o, c, &mut idmap);
        }
        for (so, sc) in fo.stack.iter().zip(fc.stack.iter_mut()) {
            if so.is_spilled_reg() && sc.is_spilled_reg() {
                widen(&so.spilled_ptr, &mut sc.spilled_ptr, &mut idmap);
            }
        }
    }
}

/// `optimize_bpf_loop`'s stack: a subprogram with a `bpf_loop` call the kernel inlines (flags
/// known zero and one callback on every visit) gets 3 more stack slots, where the inlined
/// loop keeps R6-R8; the closing `stack depth` line counts them.
fn add_bpf_loop_inline_stack(env: &mut Env<'_>) {
    const SPILLED_LOOP_REGS: u32 = 3 * 8;
    let inlined: Vec<usize> = (0..env.len())
        .filter(|&pc| matches!(env.aux[pc].loop_inline, Some((true, _))))
        .collect();
    for pc in inlined {
        let subprog = env
            .subprogs
            .partition_point(|s| s.start <= pc)
            .saturating_sub(1);
        let s = &mut env.subprogs[subprog];
        if !s.loop_stack_added {
            s.stack_depth = s.stack_depth.next_multiple_of(8) + SPILLED_LOOP_REGS;
            s.loop_stack_added = true;
        }
    }
}

/// `is_bpf_iter_num_api_kfunc`: the vmlinux kfunc `btf_id` is one of the numbers iterator's.
fn is_iter_num_kfunc(env: &Env<'_>, btf_id: i32) -> bool {
    env.input
        .vmlinux_btf()
        .and_then(|btf| btf.name_of(btf_id as bpfemu_loader::btf::TypeId))
        .is_some_and(|name| {
            matches!(
                name,
                "bpf_iter_num_new" | "bpf_iter_num_next" | "bpf_iter_num_destroy"
            )
        })
}
