//! bpfemu's runtime: checked memory regions and the reference interpreter, with the runtime
//! semantics of Linux 6.18 (`___bpf_prog_run` in kernel/bpf/core.c, the verifier's runtime
//! rewrites in `do_misc_fixups`, and the x86-64 JIT where the C interpreter defers to the
//! hardware).
//!
//! - [`memory`]: [`Memory`], the live [`Region`]s a program may touch. Programs see real host
//!   addresses, but every access is validated against the regions; an access outside them is a
//!   [`VmError::Memory`] naming the pc, the place relative to the nearest region (`pkt+54`,
//!   `fp-8`: never the host address, which changes from run to run), the size and the region.
//! - [`interp`]: the [`Interpreter`] and its [`Options`] (instruction budget, `may_goto`
//!   count).
//! - [`helpers`]: the [`Helpers`] trait through which programs call helper functions and
//!   kfuncs.
//! - [`maps`]: BPF maps with the kernel's semantics, their values in [`Memory`] regions.
//! - [`xdp`]: the XDP runtime: an object's programs run on packets as `BPF_PROG_TEST_RUN`
//!   runs them, with the kernel's XDP helpers and the kfuncs of [`xdp::kfuncs`].
//! - [`engine`]: the [`Engine`] trait the interpreter and the JIT share.
//! - [`alu`]: the arithmetic of single instructions.
//! - [`atomic`]: the read-modify-write of atomic instructions, for every engine.
//! - [`error`]: [`VmError`], what ends a run early.
//!
//! ```
//! use bpfemu_isa::{AluOp, Insn, Program, Reg, Size, Source, Width};
//! use bpfemu_vm::{run_on_buffer, NoHelpers};
//!
//! // r0 = *(u32 *)(r1 + 4); r0 += r2; exit   (r1 = buffer address, r2 = its length)
//! let prog = Program::from_insns(&[
//!     Insn::Load { size: Size::W, sign_extend: false, dst: Reg::R0, src: Reg::R1, off: 4 },
//!     Insn::Alu { width: Width::W64, op: AluOp::Add, dst: Reg::R0, src: Source::Reg(Reg::R2) },
//!     Insn::Exit,
//! ])
//! .unwrap();
//! let mut buf = [0, 0, 0, 0, 0x10, 0, 0, 0];
//! assert_eq!(run_on_buffer(&prog, &mut buf, &mut NoHelpers), Ok(0x10 + 8));
//!
//! // Reading past the end of the buffer is a reported fault, not undefined behaviour.
//! let mut short = [0u8; 6];
//! let err = run_on_buffer(&prog, &mut short, &mut NoHelpers).unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     "insn 0: invalid read of 4 bytes at input+4: 2 bytes past the end of input buffer (6 bytes)"
//! );
//! ```

pub mod alu;
pub mod atomic;
pub mod coverage;
pub mod engine;
pub mod error;
mod error_watch;
pub mod fib;
pub mod helpers;
pub mod interp;
pub mod maps;
pub mod memory;
pub mod rng;
pub mod sockets;
pub mod taint;
pub mod xdp;

pub use coverage::Coverage;
pub use engine::{Engine, Executable};
pub use error::{MAX_CALL_FRAMES, Unsupported, VmError};
pub use helpers::{
    CallbackDriver, CallbackLoop, CallbackStep, CountedLoop, HelperError, HelperOutcome, Helpers,
    MapOp, NoHelpers, TailJump,
};
pub use interp::{BPF_MAX_LOOPS, DEFAULT_INSN_BUDGET, Interpreter, Options, PreparedProgram};
pub use maps::{Errno, Map, MapEnv, MapError, MapSpec, MapType, Maps};
pub use memory::{
    Access, CtxFields, CtxSpan, FaultCause, MemFault, Memory, Position, Region, RegionId,
    RegionInfo, RegionKind, STACK_SIZE,
};

use bpfemu_isa::Program;

/// Runs `prog` with the bpf_conformance convention: `buf` becomes a writable region, r1 = its
/// address (0 when `buf` is empty, and then there is no region) and r2 = its length. What the
/// program writes is copied back into `buf`, whatever the outcome.
pub fn run_on_buffer(
    prog: &Program,
    buf: &mut [u8],
    helpers: &mut dyn Helpers,
) -> Result<u64, VmError> {
    run_on_buffer_with(&Interpreter::default(), prog, buf, helpers)
}

/// [`run_on_buffer`] with any [`Engine`] (the JIT); an engine that cannot prepare the
/// program answers with that error.
pub fn run_on_buffer_with(
    engine: &dyn Engine,
    prog: &Program,
    buf: &mut [u8],
    helpers: &mut dyn Helpers,
) -> Result<u64, VmError> {
    let mut exe = engine.prepare(prog)?;
    let mut mem = Memory::new();
    let input = (!buf.is_empty()).then(|| mem.add_copy(RegionKind::Input, buf, true));
    let addr = input.map_or(0, |id| mem.region(id).expect("just added").base());
    let result = exe.run([addr, buf.len() as u64, 0, 0, 0], &mut mem, helpers);
    if let Some(region) = input.and_then(|id| mem.region(id)) {
        buf.copy_from_slice(region.bytes());
    }
    result
}
