//! Cranelift's driver: turns a program set into native functions.
//!
//! A *function* starts at an entry ([`crate::plan::find_entries`]) and holds every
//! instruction reachable from there by jumps. Each is split into the basic blocks of
//! [`crate::plan::Cfg`], the baseline tier's too, so that the budget is counted once per block
//! yet stops the run exactly where the interpreter stops it, with the same side effects done.
//! The blocks go to [`super::translate`] one instruction at a time.

use super::environ::VmEnv;
use super::translate::{Flow, FuncTranslator};
use crate::ctx_loads;
use crate::plan::{
    ArrayLookup, Cfg, FramePlan, KnownArgs, Mode, SetPlan, find_entries, successors,
};
use crate::runtime::{
    Code, Compiled, FRAME_SLOT, JitFn, MAY_GOTO_SLOT, REG_SLOTS, Shared, offsets,
};
use bpfemu_isa::{Insn, Program, Reg};
use bpfemu_vm::maps::InlineArray;
use bpfemu_vm::{Options, STACK_SIZE, VmError};
use cranelift_codegen::ir::{
    AbiParam, InstBuilder, MemFlagsData, Signature, StackSlotData, StackSlotKind, UserFuncName,
    types::I64,
};
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{FuncId, Linkage, Module, default_libcall_names};
use std::collections::HashMap;
use std::sync::OnceLock;

/// Whether Cranelift optimises the code it makes (`BPFEMU_JIT_OPT=speed|none`,
/// [`opt_level`]). `none` compiles faster and its code runs a little slower (the README has
/// the measurements): replaying many packets repays the optimiser, so trusted code keeps it
/// by default; checked code, dominated by its checks, gains nothing from it and compiles
/// without.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Opt {
    /// Cranelift's optimiser (`opt_level=speed`): the default of trusted code.
    Speed,
    /// No optimiser: the default of checked code.
    None,
}

/// Compiles `progs` into native code; lookups in `arrays` (by map handle) are inlined.
/// `stack_bound`, for trusted code: the verifier found that no function uses more than that
/// many bytes of its frame, so the code can write no lower and a frame coming back is zeroed
/// only from there (the bytes helpers wrote are tracked by the memory itself). Ignored in
/// checked mode, whose programs nobody verified.
pub fn compile(
    progs: &[Program],
    mode: Mode,
    options: Options,
    arrays: &[(u64, InlineArray)],
    stack_bound: Option<u32>,
) -> Result<Compiled, VmError> {
    let SetPlan {
        arrays,
        cpu_tables,
        written_from,
        frames,
    } = SetPlan::new(progs, mode, arrays, stack_bound);
    let opt = opt_level(mode)?;
    let mut module = new_module(opt)?;
    let entries = find_entries(progs);
    let sig = jit_signature(&module);
    let mut ids = HashMap::new();
    for (i, &(prog, pc)) in entries.iter().enumerate() {
        let id = module
            .declare_function(&format!("bpf_{prog}_{pc}_{i}"), Linkage::Local, &sig)
            .map_err(|e| compile_error(pc, e))?;
        ids.insert((prog, pc), id);
    }
    let mut static_errors = Vec::new();
    let mut ctx = module.make_context();
    let mut fctx = FunctionBuilderContext::new();
    for &(prog, pc) in &entries {
        ctx.func.signature = sig.clone();
        ctx.func.name = UserFuncName::user(0, ids[&(prog, pc)].as_u32());
        build_function(
            &mut module,
            &mut ctx.func,
            &mut fctx,
            Target {
                progs,
                prog,
                entry: pc,
                mode,
                options,
                arrays: &arrays,
                frames,
            },
            &ids,
            &mut static_errors,
        );
        module
            .define_function(ids[&(prog, pc)], &mut ctx)
            .map_err(|e| compile_error(pc, format!("{e:?}")))?;
        module.clear_context(&mut ctx);
    }
    module
        .finalize_definitions()
        .map_err(|e| compile_error(0, e))?;
    let mut entries: Vec<_> = ids
        .iter()
        .map(|(&key, &id)| {
            let code = module.get_finalized_function(id);
            // SAFETY: `code` is a function compiled with `jit_signature`, which is JitFn's.
            (key, unsafe {
                std::mem::transmute::<*const u8, JitFn>(code)
            })
        })
        .collect();
    entries.sort_unstable_by_key(|(key, _)| *key);
    let shared = Shared {
        programs: progs.to_vec(),
        entries,
        static_errors,
        may_goto_loops: options.may_goto_loops,
        stack_written_from: written_from,
        cpu_tables,
        frame_mode: frames.mode,
    };
    Ok(Compiled::new(
        Code::Cranelift(Box::new(module)),
        shared,
        options.insn_budget,
    ))
}

fn compile_error(pc: usize, e: impl std::fmt::Display) -> VmError {
    VmError::Compile {
        pc,
        message: e.to_string(),
    }
}

fn new_module(opt: Opt) -> Result<JITModule, VmError> {
    Ok(JITModule::new(JITBuilder::with_isa(
        host_isa(opt)?,
        default_libcall_names(),
    )))
}

/// The host's ISA with the flags of `opt`, built once per process: detecting the CPU and
/// building the flags costs as much as compiling a small program.
fn host_isa(opt: Opt) -> Result<OwnedTargetIsa, VmError> {
    static SPEED: OnceLock<Result<OwnedTargetIsa, String>> = OnceLock::new();
    static NONE: OnceLock<Result<OwnedTargetIsa, String>> = OnceLock::new();
    let (cell, level) = match opt {
        Opt::Speed => (&SPEED, "speed"),
        Opt::None => (&NONE, "none"),
    };
    cell.get_or_init(|| build_isa(level).map_err(|e| e.to_string()))
        .clone()
        .map_err(|e| compile_error(0, e))
}

/// Cranelift's settings with the optimiser at `opt_level`. Every level keeps the backtracking
/// register allocator: the single-pass one compiles faster but its code runs much slower (the
/// README's Speed section has the figures). No unwind information: nothing unwinds through
/// compiled code (the runtime's entry points are `extern "C"`).
fn build_isa(opt_level: &str) -> Result<OwnedTargetIsa, Box<dyn std::error::Error>> {
    let mut flags = settings::builder();
    flags.set("opt_level", opt_level)?;
    flags.set("regalloc_algorithm", "backtracking")?;
    flags.set("unwind_info", "false")?;
    flags.set("use_colocated_libcalls", "false")?;
    flags.set("is_pic", "false")?;
    // Cranelift's IR verifier checks our translator, not the program: it runs in debug builds
    // (every test), and release builds skip its cost.
    let verify_ir = if cfg!(debug_assertions) {
        "true"
    } else {
        "false"
    };
    flags.set("enable_verifier", verify_ir)?;
    Ok(cranelift_native::builder()?.finish(settings::Flags::new(flags))?)
}

/// How code is compiled: `BPFEMU_JIT_OPT=speed|none` for both modes, read once per
/// process; without it trusted code is `speed` and checked code `none` (see [`Opt`]).
pub fn opt_level(mode: Mode) -> Result<Opt, VmError> {
    static CHOSEN: OnceLock<Result<Option<Opt>, String>> = OnceLock::new();
    let chosen = CHOSEN.get_or_init(|| match std::env::var("BPFEMU_JIT_OPT").as_deref() {
        Err(_) => Ok(None),
        Ok("speed") => Ok(Some(Opt::Speed)),
        Ok("none") => Ok(Some(Opt::None)),
        Ok(other) => Err(format!(
            "BPFEMU_JIT_OPT={other}: the JIT's level is speed or none"
        )),
    });
    match chosen {
        Ok(Some(opt)) => Ok(*opt),
        Ok(None) => Ok(match mode {
            Mode::Checked => Opt::None,
            Mode::Trusted => Opt::Speed,
        }),
        Err(e) => Err(compile_error(0, e)),
    }
}

/// `fn(ctx, regs) -> status`, all 64-bit.
fn jit_signature(module: &JITModule) -> Signature {
    let mut sig = module.make_signature();
    sig.params.push(AbiParam::new(I64));
    sig.params.push(AbiParam::new(I64));
    sig.returns.push(AbiParam::new(I64));
    sig
}

/// What one function is.
struct Target<'a> {
    progs: &'a [Program],
    prog: usize,
    entry: usize,
    mode: Mode,
    options: Options,
    arrays: &'a HashMap<u64, ArrayLookup>,
    frames: FramePlan,
}

fn build_function(
    module: &mut JITModule,
    func: &mut cranelift_codegen::ir::Function,
    fctx: &mut FunctionBuilderContext,
    target: Target,
    ids: &HashMap<(usize, usize), FuncId>,
    static_errors: &mut Vec<VmError>,
) {
    let prog = &target.progs[target.prog];
    let cfg = Cfg::of(prog, target.entry, target.mode);
    let host_word_loads = match target.mode {
        Mode::Trusted => ctx_loads::host_word_loads(
            prog,
            target.entry,
            |pc| cfg.reached(pc),
            |pc, insn| successors(prog, pc, insn),
        ),
        Mode::Checked => Vec::new(),
    };
    let mut b = FunctionBuilder::new(func, fctx);
    let entry_block = b.create_block();
    b.append_block_params_for_function_params(entry_block);
    b.switch_to_block(entry_block);
    let params = b.block_params(entry_block).to_vec();
    let (ctx, in_regs) = (params[0], params[1]);
    let call_conv = module.isa().default_call_conv();
    let mut env = VmEnv::new(ctx, call_conv, static_errors).with_frames(target.frames);

    let regs: [_; Reg::COUNT] = std::array::from_fn(|_| b.declare_var(I64));
    let may_goto = b.declare_var(I64);
    let flags = MemFlagsData::trusted();
    for (i, &var) in regs.iter().enumerate() {
        let v = b.ins().load(I64, flags, in_regs, i as i32 * 8);
        b.def_var(var, v);
    }
    let v = b.ins().load(I64, flags, in_regs, MAY_GOTO_SLOT as i32 * 8);
    b.def_var(may_goto, v);
    let fp = b.ins().load(I64, flags, in_regs, FRAME_SLOT as i32 * 8);
    // Trusted code counts executed instructions in a variable (see `count_block`).
    let count = (target.mode == Mode::Trusted).then(|| {
        let var = b.declare_var(I64);
        let executed = b.ins().load(I64, flags, ctx, offsets::EXECUTED);
        b.def_var(var, executed);
        env.keep_count_in(var);
        (var, b.ins().load(I64, flags, ctx, offsets::BUDGET))
    });
    let frame_bottom = b.ins().iadd_imm_s(fp, -(STACK_SIZE as i64));
    let out_regs = b.create_sized_stack_slot(StackSlotData::new(
        StackSlotKind::ExplicitSlot,
        REG_SLOTS as u32 * 8,
        3,
    ));
    let jit_sig = b.import_signature(jit_signature(module));
    let mut callees = HashMap::new();
    for (&(p, pc), &id) in ids {
        if p == target.prog && prog.insn(pc).is_some() {
            callees.insert(pc, module.declare_func_in_func(id, b.func));
        }
    }

    let blocks: HashMap<usize, _> = cfg.leaders().map(|pc| (pc, b.create_block())).collect();
    let propagate = b.create_block();
    let status = b.append_block_param(propagate, I64);
    let budget_block = b.create_block();
    let start = b.append_block_param(budget_block, I64);
    let before = b.append_block_param(budget_block, I64);
    b.ins().jump(blocks[&target.entry], &[]);

    let mut t = FuncTranslator {
        b,
        env,
        mode: target.mode,
        prog_index: target.prog,
        prog,
        regs,
        may_goto,
        ctx,
        in_regs,
        out_regs,
        fp,
        frame_bottom,
        blocks,
        propagate,
        budget_block,
        callees,
        jit_sig,
        may_goto_loops: target.options.may_goto_loops,
        pending_errors: Vec::new(),
        arrays: target.arrays,
        known: KnownArgs::default(),
        count,
        host_word_loads,
    };
    let mut counted = false;
    for leader in cfg.leaders() {
        // Straight-line knowledge flows into a block only from the one before it, and only
        // when nothing jumps there.
        if leader == target.entry || cfg.is_jump_target(leader) {
            t.known = KnownArgs::default();
        }
        counted = translate_block(&mut t, &cfg, leader, counted);
    }
    t.emit_error_blocks();
    // The shared exits.
    t.enter(t.propagate);
    t.b.ins().return_(&[status]);
    t.enter(t.budget_block);
    // The count before the block that ran out is what the runtime reads.
    match t.count {
        Some((var, _)) => t.b.def_var(var, before),
        None => t.env.store_field(&mut t.b, offsets::EXECUTED, before),
    }
    let s = t.env.budget_exhausted(&mut t.b, t.prog_index, start);
    t.b.ins().return_(&[s]);
    t.b.seal_all_blocks();
    t.b.finalize(module.isa().frontend_config());
}

/// Translates the basic block that starts at `leader`. `counted`: the block before, its only
/// predecessor, already tested the budget for it. Returns whether this block did so for the
/// block after it: when it falls through into a block nothing jumps to, the test ends this
/// block instead of opening that one, which saves a block a test (a third of the blocks of
/// most programs, and of the register allocator's work).
fn translate_block(
    t: &mut FuncTranslator<'_, '_>,
    cfg: &Cfg,
    leader: usize,
    counted: bool,
) -> bool {
    let insns: Vec<(usize, Insn)> = cfg.block(t.prog, leader, t.mode).collect();
    let block = t.blocks[&leader];
    if cfg.is_loop_head(leader) {
        t.b.switch_to_block(block);
    } else {
        t.enter(block);
    }
    if !counted {
        let body = t.b.create_block();
        t.count_block(leader, insns.len() as u64, body);
        t.enter(body);
    }
    for &(pc, insn) in &insns {
        if let Flow::Ended = t.translate(pc, insn) {
            return false;
        }
    }
    let (pc, insn) = *insns.last().expect("a block has an instruction");
    let next_pc = pc + insn.slots();
    let next = t.next_block(next_pc);
    let only_from_here =
        cfg.is_leader(next_pc) && !cfg.is_jump_target(next_pc) && next_pc != cfg.entry;
    if only_from_here {
        let len = cfg.block(t.prog, next_pc, t.mode).count();
        t.count_block(next_pc, len as u64, next);
    } else {
        t.b.ins().jump(next, &[]);
    }
    only_from_here
}
