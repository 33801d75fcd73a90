//! Why a run stops early. Every variant names the instruction index (`pc`, in slots).

use crate::helpers::{HelperError, Helpers};
use crate::memory::MemFault;
use bpfemu_isa::LdImm64Kind;
use std::fmt;

/// The deepest call chain a run holds: the entry function plus at most 15 nested calls, 7.2's
/// `MAX_CALL_FRAMES` (the kernels before it allow 8; their verifier refuses deeper programs
/// before any run, and the kernels' own engines have no frame limit of their own).
pub const MAX_CALL_FRAMES: usize = 16;

/// An error that ends a run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VmError {
    /// Boxed: faults are rare, and every `Result` that can carry one stays small.
    #[error("insn {pc}: {fault}")]
    Memory { pc: usize, fault: Box<MemFault> },
    #[error(
        "insn {pc}: call depth exceeded: a call to insn {target} would need frame {}, at most {} frames are allowed",
        MAX_CALL_FRAMES,
        MAX_CALL_FRAMES
    )]
    CallDepthExceeded { pc: usize, target: usize },
    #[error("insn {pc}: instruction budget exhausted: {budget} instructions executed")]
    BudgetExceeded { pc: usize, budget: u64 },
    #[error("insn {pc}: unknown helper {}: not provided by this environment", HelperLabel(*.id))]
    UnknownHelper { pc: usize, id: i32 },
    #[error("insn {pc}: helper {} failed: {source}", HelperLabel(*.id))]
    Helper {
        pc: usize,
        id: i32,
        source: HelperError,
    },
    #[error("insn {pc}: kfunc {} failed: {source}", KfuncLabel(*.btf_id, *.name))]
    Kfunc {
        pc: usize,
        btf_id: i32,
        /// Its name, when the environment knows it.
        name: Option<&'static str>,
        source: HelperError,
    },
    #[error("insn {pc}: unsupported instruction: {what}")]
    Unsupported { pc: usize, what: Unsupported },
    #[error("insn {pc}: jump to {target} is outside the program (insns 0..{len})")]
    JumpOutOfProgram { pc: usize, target: i64, len: usize },
    #[error("insn {pc}: jump to {target} lands in the second slot of an ld_imm64")]
    JumpIntoLdImm64 { pc: usize, target: usize },
    #[error("insn {pc}: execution fell off the end of the program without an exit")]
    FellOffEnd { pc: usize },
    #[error("insn {pc}: legacy packet load (LD_ABS/LD_IND), but no packet is configured")]
    NoPacket { pc: usize },
    /// The engine could not prepare the program (a JIT code generation failure).
    #[error("insn {pc}: cannot compile the program: {message}")]
    Compile { pc: usize, message: String },
}

impl VmError {
    /// The instruction index the error names.
    pub fn pc(&self) -> usize {
        match *self {
            VmError::Memory { pc, .. }
            | VmError::CallDepthExceeded { pc, .. }
            | VmError::BudgetExceeded { pc, .. }
            | VmError::UnknownHelper { pc, .. }
            | VmError::Helper { pc, .. }
            | VmError::Kfunc { pc, .. }
            | VmError::Unsupported { pc, .. }
            | VmError::JumpOutOfProgram { pc, .. }
            | VmError::JumpIntoLdImm64 { pc, .. }
            | VmError::FellOffEnd { pc }
            | VmError::NoPacket { pc }
            | VmError::Compile { pc, .. } => pc,
        }
    }
}

/// Instructions that decode but that this runtime cannot execute (yet).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unsupported {
    #[error("kfunc call (btf id {btf_id}, module btf {off}): kfuncs are not supported")]
    Kfunc { btf_id: i32, off: i16 },
    #[error(
        "ld_imm64 with unresolved {0:?} reference; programs with maps or subprogram pointers need the loader"
    )]
    PseudoLdImm64(LdImm64Kind),
    #[error("addr_space_cast to the arena address space: arenas are not supported")]
    ArenaCast,
}

/// The error of a call at `pc` of the kfunc `btf_id` (module BTF `off`) that `helpers` runs:
/// an environment without the kfunc makes the call an unsupported instruction.
pub fn kfunc_error(
    pc: usize,
    btf_id: i32,
    off: i16,
    helpers: &dyn Helpers,
    e: HelperError,
) -> VmError {
    match e {
        HelperError::Unknown(_) => VmError::Unsupported {
            pc,
            what: Unsupported::Kfunc { btf_id, off },
        },
        source => VmError::Kfunc {
            pc,
            btf_id,
            name: helpers.kfunc_name(btf_id, off),
            source,
        },
    }
}

/// Formats a kfunc's BTF id with its name when known: `bpf_iter_num_new (btf id 64242)`.
struct KfuncLabel(i32, Option<&'static str>);

impl fmt::Display for KfuncLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.1 {
            Some(name) => write!(f, "{name} (btf id {})", self.0),
            None => write!(f, "(btf id {})", self.0),
        }
    }
}

/// Formats a helper id with its name when the id is a known helper.
struct HelperLabel(i32);

impl fmt::Display for HelperLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match bpfemu_isa::helpers::helper_name(self.0) {
            Some(name) if self.0 != 0 => write!(f, "{} (bpf_{name})", self.0),
            _ => write!(f, "{}", self.0),
        }
    }
}
