//! bpfemu's JIT: eBPF programs compiled by Cranelift into native code that runs over the vm's
//! runtime (its memory regions, maps and helpers) with the interpreter's exact results.
//!
//! Two tiers ([`Tier`]): Cranelift (optimised code, some 13 ms per 1,000 instructions to
//! compile trusted code) and, on x86-64, the [`baseline`] compiler, which emits x86-64
//! machine code straight from each instruction as the kernel's JIT does (about 0.16 ms per
//! 1,000 instructions) into functions with the same signature, run context, statuses and
//! exact budget, driven by the same [`runtime`]: `Jit::new(Mode::Trusted).baseline()`, and
//! for checked code `Jit::new(Mode::Checked).baseline()`, whose accesses are validated as
//! [`bounds`] validates Cranelift's (the same inline region cache, the same runtime entry
//! points and faults, a frame per call).
//!
//! The shape follows wasmtime's bytecode translator, one file per concern:
//! - [`compile`]: the driver. Finds the functions of a program set (entries, bpf-to-bpf call
//!   targets, callbacks), cuts them into basic blocks and hands each to the translator.
//! - [`translate`]: one match arm per instruction: ALU with 32-bit zero extension, the
//!   kernel's division rules, sign extension, byte swaps, jumps of both widths, loads and
//!   stores, real atomic instructions, calls, `may_goto`, exits.
//! - [`bounds`]: the memory-check strategy of each [`Mode`], apart from the opcodes;
//!   `ctx_loads` finds the trusted 4-byte loads that cannot read the ctx.
//! - [`environ`]: the [`RuntimeEnv`](environ::RuntimeEnv) trait, the only door from
//!   translated code to the runtime (memory checks, helper calls with tail calls and
//!   callbacks, kfunc calls, stack frames, errors).
//! - [`inline`]: the helpers inlined where the kernel inlines them (array map lookups,
//!   `bpf_get_smp_processor_id`).
//! - [`runtime`]: the run-time half: the context compiled code receives and the entry points
//!   it calls.
//! - [`baseline`]: the baseline tier, apart from Cranelift: its driver, x86-64 encoder and
//!   one file of templates per instruction class.
//!
//! Two modes: [`Mode::Checked`] validates every access against the live regions and reports
//! faults as the interpreter does ([`VmError::Memory`] with the instruction index), for
//! programs nobody verified; [`Mode::Trusted`] reaches host memory directly, for programs a
//! verifier accepted. Code memory is writable while it is generated and executable after,
//! never both at once.
//!
//! ```
//! use bpfemu_isa::{AluOp, Insn, Program, Reg, Size, Source, Width};
//! use bpfemu_jit::{Jit, Mode};
//! use bpfemu_vm::{Engine, Memory, NoHelpers, RegionKind};
//!
//! // r0 = *(u32 *)(r1 + 4); r0 += r2; exit
//! let prog = Program::from_insns(&[
//!     Insn::Load { size: Size::W, sign_extend: false, dst: Reg::R0, src: Reg::R1, off: 4 },
//!     Insn::Alu { width: Width::W64, op: AluOp::Add, dst: Reg::R0, src: Source::Reg(Reg::R2) },
//!     Insn::Exit,
//! ])
//! .unwrap();
//! // Checked code from either tier.
//! for jit in [Jit::new(Mode::Checked), Jit::new(Mode::Checked).baseline()] {
//!     let mut exe = jit.prepare(&prog).unwrap();
//!     let mut mem = Memory::new();
//!     let buf = mem.add_copy(RegionKind::Input, &[0, 0, 0, 0, 0x10, 0, 0, 0], true);
//!     let addr = mem.region(buf).unwrap().base();
//!     assert_eq!(exe.run([addr, 8, 0, 0, 0], &mut mem, &mut NoHelpers), Ok(0x18));
//!
//!     // Past the end of the buffer: the interpreter's fault, not undefined behaviour.
//!     let err = exe.run([addr + 2, 8, 0, 0, 0], &mut mem, &mut NoHelpers).unwrap_err();
//!     assert_eq!(
//!         err.to_string(),
//!         "insn 0: invalid read of 4 bytes at input+6: 2 bytes past the end of input buffer (8 bytes)"
//!     );
//! }
//! ```

#[cfg(target_arch = "x86_64")]
pub mod baseline;
pub mod bounds;
pub mod compile;
mod ctx_loads;
mod engine;
pub mod environ;
pub mod inline;
pub mod runtime;
pub mod translate;

pub use engine::Engine;

use bpfemu_isa::Program;
use bpfemu_vm::maps::InlineArray;
use bpfemu_vm::{Engine as VmEngine, Executable, Options, VmError};

/// How compiled code reaches memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Every access validated against the live regions, as the interpreter does.
    #[default]
    Checked,
    /// Direct host memory: only for programs a verifier accepted.
    Trusted,
}

/// Whether Cranelift optimises the code it makes (`BPFEMU_JIT_OPT=speed|none`,
/// [`compile::opt_level`]). Trusted code over the corpus, measured in one run on the
/// project's 2-core machine: `none` compiles in 0.65x the time of `speed` (8.4 against 12.8 ms
/// per 1,000 instructions, `cargo bench --bench jit_compile -- trusted`) and its code takes
/// 1.06x the time a packet (geometric mean of `scripts/bench_corpus.sh 20000`; 0.71x the
/// kernel's time against 0.67x; p4_parser 1.16x). Replaying many packets repays the
/// optimiser, so trusted code keeps it by default; checked code, dominated by its checks,
/// gains nothing from it and compiles without.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Opt {
    /// Cranelift's optimiser (`opt_level=speed`): the default of trusted code.
    Speed,
    /// No optimiser: the default of checked code.
    None,
}

/// Which compiler makes the code.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Tier {
    /// Cranelift: optimised code, about 13 ms per 1,000 instructions to compile.
    #[default]
    Cranelift,
    /// The [`baseline`] compiler: one x86-64 template per instruction, compiled some eighty
    /// times faster; both modes, on x86-64 only (other hosts stay on Cranelift).
    Baseline,
}

/// The JIT engine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Jit {
    mode: Mode,
    tier: Tier,
    options: Options,
    /// The verifier's bound on the stack bytes any function uses (trusted mode).
    stack_bound: Option<u32>,
}

impl Jit {
    pub fn new(mode: Mode) -> Jit {
        Jit {
            mode,
            tier: Tier::Cranelift,
            options: Options::default(),
            stack_bound: None,
        }
    }

    /// Code from the [`baseline`] compiler ([`Tier::Baseline`]), trusted or checked.
    pub fn baseline(self) -> Jit {
        self.with_tier(Tier::Baseline)
    }

    pub fn with_tier(self, tier: Tier) -> Jit {
        Jit { tier, ..self }
    }

    /// The tier that compiles this engine's code: the baseline applies on x86-64 only.
    pub fn tier(&self) -> Tier {
        match cfg!(target_arch = "x86_64") {
            true => self.tier,
            false => Tier::Cranelift,
        }
    }

    /// Trusted code whose verifier found that no function uses more than `bytes` of its
    /// stack frame ([`compile::compile`]).
    pub fn with_stack_bound(self, bytes: u32) -> Jit {
        Jit {
            stack_bound: Some(bytes),
            ..self
        }
    }

    /// With run limits other than the default (used by [`VmEngine::prepare`]).
    pub fn with_options(mode: Mode, options: Options) -> Jit {
        Jit {
            mode,
            tier: Tier::Cranelift,
            options,
            stack_bound: None,
        }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }
}

impl Jit {
    fn compile(
        &self,
        progs: &[Program],
        options: Options,
        arrays: &[(u64, InlineArray)],
    ) -> Result<Box<dyn Executable>, VmError> {
        let compiled = match self.tier() {
            #[cfg(target_arch = "x86_64")]
            Tier::Baseline => {
                baseline::compile(progs, self.mode, options, arrays, self.stack_bound)?
            }
            _ => compile::compile(progs, self.mode, options, arrays, self.stack_bound)?,
        };
        Ok(Box::new(compiled))
    }
}

impl VmEngine for Jit {
    fn name(&self) -> &'static str {
        match (self.mode, self.tier()) {
            (Mode::Checked, Tier::Cranelift) => "jit",
            (Mode::Checked, Tier::Baseline) => "jit-baseline-checked",
            (Mode::Trusted, Tier::Cranelift) => "jit-trusted",
            (Mode::Trusted, Tier::Baseline) => "jit-baseline",
        }
    }

    fn prepare(&self, prog: &Program) -> Result<Box<dyn Executable>, VmError> {
        self.prepare_set(std::slice::from_ref(prog), self.options)
    }

    fn prepare_set(
        &self,
        progs: &[Program],
        options: Options,
    ) -> Result<Box<dyn Executable>, VmError> {
        self.compile(progs, options, &[])
    }

    fn prepare_set_with_arrays(
        &self,
        progs: &[Program],
        options: Options,
        arrays: &[(u64, InlineArray)],
    ) -> Result<Box<dyn Executable>, VmError> {
        self.compile(progs, options, arrays)
    }
}
