//! bpfemu's JIT: eBPF programs compiled into native code that runs over the vm's runtime (its
//! memory regions, maps and helpers) with the interpreter's exact results.
//!
//! Two tiers ([`Tier`]), peers over one shared layer: Cranelift (optimised code, for any host
//! Cranelift supports) and, on x86-64, the [`baseline`] compiler, which emits x86-64 machine
//! code straight from each instruction as the kernel's JIT does, and compiles far faster (the
//! README's Speed section has the measurements). Both make functions with the same
//! signature, run context, statuses and exact budget, driven by the same [`runtime`]:
//! `Jit::new(Mode::Trusted).baseline()`, and for checked code
//! `Jit::new(Mode::Checked).baseline()`.
//!
//! ## Layout
//!
//! Shared, tier-neutral (no shared module imports a tier's):
//! - [`plan`]: what both tiers decide before emitting code: the [`Mode`], the set's plan
//!   (inlined arrays and their per-CPU tables, call frames and what a call zeroes), the
//!   functions and their basic blocks, and which helper calls are inlined (the kernel's
//!   policy, [`bpfemu_isa::inline_policy`], which the verifier's xlated program follows too).
//! - `ctx_loads`: which 4-byte loads of trusted code cannot read the ctx.
//! - [`runtime`]: the run-time half: the context compiled code receives, the `extern "C"`
//!   entry points it calls (memory checks, helpers with tail calls and callbacks, kfuncs,
//!   frames, errors; unaligned atomics through the interpreter's own
//!   [`bpfemu_vm::atomic`]), and the [`Executable`] that runs either tier's code.
//! - `code_memory` (x86-64): the executable pages of code a tier emits itself.
//!
//! The tiers, each importing only the shared layer:
//! - [`cranelift`]: the driver, a per-instruction translator to Cranelift IR, the memory
//!   checks, the environment through which translated code reaches the runtime, and the
//!   inlined helpers' fast paths.
//! - [`baseline`] (x86-64): its driver, x86-64 encoder and one file of templates per
//!   instruction class.
//!
//! ## Memory in each mode
//!
//! [`Mode::Checked`] validates every access against the live regions and reports faults as
//! the interpreter does ([`VmError::Memory`] with the instruction index), for programs nobody
//! verified. Both tiers use the same strategy: an access inside the function's own stack
//! frame, or inside the region the runtime found for the last checked read (or write), is done
//! inline; anything else goes to the runtime, which forgets the cached regions whenever
//! regions may change, and each call gets a frame of its own. [`Mode::Trusted`] reaches host
//! memory directly, for programs a verifier accepted; a 4-byte load that may read the
//! converted ctx (`struct xdp_md`, 64-bit fields underneath) reads the field's value from the
//! runtime instead. Code memory is writable while it is generated and executable after, never
//! both at once.
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
#[cfg(target_arch = "x86_64")]
mod code_memory;
pub mod cranelift;
mod ctx_loads;
mod engine;
pub mod plan;
pub mod runtime;

pub use cranelift::Opt;
pub use plan::Mode;

pub use engine::Engine;

use bpfemu_isa::Program;
use bpfemu_vm::maps::InlineArray;
use bpfemu_vm::{Engine as VmEngine, Executable, Options, VmError};

/// Which compiler makes the code.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Tier {
    /// [`cranelift`]: optimised code, the slower compiler.
    #[default]
    Cranelift,
    /// The [`baseline`] compiler: one x86-64 template per instruction, no IR, no register
    /// allocation, no optimiser; both modes, on x86-64 only (other hosts stay on Cranelift).
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
    /// stack frame ([`cranelift::compile`]).
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
            _ => cranelift::compile(progs, self.mode, options, arrays, self.stack_bound)?,
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
