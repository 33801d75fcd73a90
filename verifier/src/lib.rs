//! A Linux 6.18-faithful eBPF verifier for XDP programs.
//!
//! [`verify`] takes a program as `bpfemu-loader` leaves it ([`ProgramInput`]: instructions with
//! map references as map indices, subprograms, func_info/line_info, the object's maps and BTF)
//! and gives the kernel's [`Verdict`]: accepted (with the xlated program) or rejected with the
//! kernel's final error line and the instruction it names, the verifier log at the level asked
//! (the kernel's format, line for line) and the closing statistics.
//!
//! ```no_run
//! use bpfemu_loader::{LoadOptions, load_file};
//! use bpfemu_verifier::{Options, ProgramInput, verify};
//! use std::path::Path;
//!
//! let obj = load_file(Path::new("prog.o"), &LoadOptions::default()).unwrap();
//! let input = ProgramInput::new(&obj, &obj.programs[0]);
//! let verdict = verify(&input, &Options { log_level: 2, ..Options::default() });
//! match verdict.rejection() {
//!     None => println!("accepted, {} insns processed", verdict.stats.processed_insns),
//!     Some(r) => println!("rejected at insn {:?}: {}", r.insn, r.message),
//! }
//! ```
//!
//! # Shape (one concern per module; "what happens on a JGT" lives in `branch`)
//!
//! | module | what | kernel counterpart |
//! | --- | --- | --- |
//! | [`check`] | program checks before exploration: opcodes, jump targets, CFG, subprograms, prune points | `check_subprogs`, `check_cfg`, `resolve_pseudo_ldimm64` |
//! | [`state`] | registers ([`state::reg`]), tnums, bounds sync, stack slots, frames, references | `bpf_reg_state`, `tnum.c`, `reg_bounds_sync` |
//! | [`alu`], [`ptr_alu`] | scalar transfer functions; pointer arithmetic and its refusals | `adjust_scalar_min_max_vals`, `adjust_ptr_min_max_vals` |
//! | [`branch`] | conditional jumps: dead edges, refinement, packet ranges, null checks | `check_cond_jmp_op` |
//! | [`mem`] | loads, stores, atomics; helper memory arguments | `check_mem_access`, `check_helper_mem_access` |
//! | [`call`] | helpers ([`call::helper`]), kfuncs, open-coded iterators ([`call::iter`]), bpf-to-bpf calls, callbacks | `check_helper_call`, `check_kfunc_call`, `check_func_call` |
//! | [`prog_type`] | what depends on the program type: ctx layout, return range | `xdp_is_valid_access`, `check_return_code` |
//! | [`sock`] | loads through socket pointers | `check_sock_access`, `bpf_sock_is_valid_access` |
//! | [`explore`] | the depth-first walk, checkpoints, limits | `do_check`, `is_state_visited` |
//! | [`prune`], [`precision`], [`liveness`] | state equivalence, precision backtracking, read marks | `states_equal`, `mark_chain_precision` |
//! | [`scc`] | loops of the control-flow graph (numbered in the level-2 listing, named in loop visits) | `compute_scc` |
//! | [`loops`] | loops being explored: checkpoints compared strictly, back-edges and their precision | `maybe_enter_scc`, `propagate_backedges` |
//! | [`behaviour`] | where older or newer kernels' verifier code differs (one `fn` per switch, by version) | the kernel commits each cites |
//! | [`fixup`] | the xlated program | `convert_ctx_accesses`, `do_misc_fixups` |
//! | [`log`] | the kernel's log text | `print_verifier_state`, `log.c` |
//! | [`trace`], [`explain`] | the rejected path recorded on a second walk, and why it failed | (bpfemu's own; the kernel's log at level 1 is the path without the why) |
//!
//! # The interface contract between the parts
//!
//! - Every check gets `&mut Env` (the program, per-instruction [`env::InsnAux`], subprograms,
//!   the log, the id generator) and, during exploration, `&mut VerifierState` (the current
//!   path: frames with registers and stack, references). It returns `Result<_, Reject>`; a
//!   rejection is made with [`env::Env::reject`], which logs the message as the kernel's
//!   `verbose()` does; lines printed before the final one go through [`env::Env::verbose`].
//!   The final line is the [`Rejection::message`] and must equal the kernel's byte for byte.
//! - [`check::check_program`] runs first: it fills `env.subprogs` (entry first, sorted by
//!   start) and marks `prune_point` / `jmp_point` / `force_checkpoint` in `env.aux`.
//! - [`explore`] drives the walk. On `call` of a helper it calls
//!   [`call::helper::check_helper_call`], which checks the arguments against the prototype
//!   (memory arguments through [`mem::check_helper_mem_access`] and
//!   [`mem::check_mem_size_reg`]; constants it relies on through
//!   [`precision::mark_chain_precision`]), clobbers R1-R5
//!   ([`state::VerifierState::clobber_caller_saved`]), sets R0, drops packet pointers when the
//!   helper changes packet data ([`state::VerifierState::invalidate_packet_pointers`]) and may
//!   explore a callback ([`call::callback::push_callback_call`]): the state with the
//!   callback's frame pushed is queued as a branch of its own, and the current path goes on
//!   after the helper call, as the kernel's `push_callback_call` does.
//! - ctx loads ask [`prog_type::ProgTypeOps::ctx_access`]; the answer (the loaded register's
//!   type, the field for conversion) is kept in `InsnAux::ctx_access` for [`fixup`].
//! - At `exit` of the main program [`prog_type::ProgTypeOps::return_range`] gives R0's range.
//! - After acceptance [`fixup::xlate`] turns the program into the xlated one.

pub mod alu;
pub mod behaviour;
pub mod branch;
pub mod btf_access;
pub mod btf_info;
pub mod call;
pub mod check;
pub mod const_fold;
pub mod div_mod;
pub mod env;
pub mod explain;
pub mod explore;
pub mod fastcall;
pub mod fixup;
pub mod liveness;
pub mod log;
pub mod loops;
pub mod maps_created;
pub mod mem;
pub mod precision;
pub mod profile;
pub mod prog_type;
pub mod prune;
pub mod ptr_alu;
pub mod read_marks;
pub mod scc;
pub mod sock;
pub mod stack_liveness;
pub mod stack_liveness_static;
pub mod state;
pub mod trace;

use bpfemu_isa::RawInsn;
use bpfemu_loader::btf::{Btf, TypeId};
use bpfemu_loader::{Kernel, MapSpec, Object, ProgramSpec, SourceLine};
use std::time::Duration;

/// The kernel's limit on processed instructions (`BPF_COMPLEXITY_LIMIT_INSNS`).
pub const COMPLEXITY_LIMIT_INSNS: u64 = 1_000_000;
/// The kernel's limit on pending branches (`BPF_COMPLEXITY_LIMIT_JMP_SEQ`).
pub const COMPLEXITY_LIMIT_JMP_SEQ: usize = 8192;
/// States kept per instruction before pruning gets pickier (`BPF_COMPLEXITY_LIMIT_STATES`).
pub const COMPLEXITY_LIMIT_STATES: u32 = 64;

/// A program to verify, as the loader leaves it.
#[derive(Clone, Copy, Debug)]
pub struct ProgramInput<'a> {
    /// The entry function's name (for messages).
    pub name: &'a str,
    /// `enum bpf_prog_type` (6: XDP).
    pub prog_type: u32,
    pub expected_attach_type: u32,
    /// `BPF_F_*` load flags (`BPF_F_XDP_HAS_FRAGS`, ...).
    pub prog_flags: u32,
    /// Instructions; `ld_imm64` map references hold the map's index in `maps`.
    pub insns: &'a [RawInsn],
    /// Function names and first instructions (entry first).
    pub functions: &'a [(String, usize)],
    /// func_info: (instruction, BTF FUNC type id).
    pub func_info: &'a [(usize, TypeId)],
    /// line_info, in the order libbpf sends it.
    pub line_info: &'a [SourceLine],
    /// The object's maps; `ld_imm64` indexes into this.
    pub maps: &'a [MapSpec],
    /// The object's BTF (func_info/line_info/map types refer to it).
    pub btf: Option<&'a Btf>,
    /// The kernel the program is loaded into: kfunc calls, kernel variables and `ptr_`
    /// accesses are judged against its BTF (read only when the program needs it).
    pub kernel: &'a Kernel,
    /// Whether the object's license lets the program call GPL-only helpers and kfuncs
    /// ([`license_is_gpl_compatible`]).
    pub gpl_compatible: bool,
    /// `ld_imm64`s whose imm is a map fd written in the object, not an index into `maps`
    /// (see `ProgramSpec::unrelocated_map_fds`).
    pub unrelocated_map_fds: &'a [usize],
}

/// The licenses the kernel takes as GPL-compatible (`license_is_gpl_compatible`,
/// include/linux/license.h): only these exact strings; anything else, or no `license`
/// section at all, may call no GPL-only helper and no kfunc.
pub fn license_is_gpl_compatible(license: &str) -> bool {
    matches!(
        license,
        "GPL"
            | "GPL v2"
            | "GPL and additional rights"
            | "Dual BSD/GPL"
            | "Dual MIT/GPL"
            | "Dual MPL/GPL"
    )
}

impl<'a> ProgramInput<'a> {
    /// The input for one program of a loaded object.
    pub fn new(obj: &'a Object, prog: &'a ProgramSpec) -> ProgramInput<'a> {
        ProgramInput {
            name: &prog.name,
            prog_type: prog.prog_type,
            expected_attach_type: prog.expected_attach_type.unwrap_or(0),
            prog_flags: prog.prog_flags,
            insns: &prog.insns,
            functions: &prog.functions,
            func_info: &prog.func_info,
            line_info: &prog.line_info,
            maps: &obj.maps,
            btf: obj.btf.as_ref(),
            kernel: &obj.kernel,
            gpl_compatible: license_is_gpl_compatible(&obj.license),
            unrelocated_map_fds: &prog.unrelocated_map_fds,
        }
    }

    /// A bare instruction stream (assembled probes) for `kernel`: no BTF, no line info.
    pub fn raw(
        prog_type: u32,
        insns: &'a [RawInsn],
        maps: &'a [MapSpec],
        kernel: &'a Kernel,
    ) -> ProgramInput<'a> {
        ProgramInput {
            name: "prog",
            prog_type,
            expected_attach_type: 0,
            prog_flags: 0,
            insns,
            functions: &[],
            func_info: &[],
            line_info: &[],
            maps,
            btf: None,
            kernel,
            // As bpfemu's kernel door loads raw programs: under "GPL".
            gpl_compatible: true,
            unrelocated_map_fds: &[],
        }
    }

    /// The vmlinux BTF of [`ProgramInput::kernel`], read on first use; `None` when it cannot
    /// be read (each use refuses as the kernel does without BTF).
    pub fn vmlinux_btf(&self) -> Option<&'a Btf> {
        self.kernel.btf().ok()
    }
}

/// How to verify.
#[derive(Clone, Debug)]
pub struct Options {
    /// The kernel's `log_level` bits: 1 (`BPF_LOG_LEVEL1`), 2 (`BPF_LOG_LEVEL2`), 4
    /// (`BPF_LOG_STATS`); 0 builds no log.
    pub log_level: u32,
    /// Processed-instruction limit (the kernel's 1,000,000).
    pub insn_limit: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            log_level: 0,
            insn_limit: COMPLEXITY_LIMIT_INSNS,
        }
    }
}

/// The `errno` a rejection returns from `BPF_PROG_LOAD`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Errno {
    /// Permission denied: most safety violations.
    Eacces,
    /// Invalid argument: malformed programs and unsupported combinations.
    Einval,
    /// Too big: the complexity limits.
    E2big,
    /// Internal verifier error.
    Efault,
    /// Not supported (`ENOTSUPP`, 524).
    Enotsupp,
    /// Out of memory (too many states).
    Enomem,
    Eperm,
}

impl Errno {
    /// The number `BPF_PROG_LOAD` fails with.
    pub fn code(self) -> i32 {
        match self {
            Errno::Eacces => 13,
            Errno::Einval => 22,
            Errno::E2big => 7,
            Errno::Efault => 14,
            Errno::Enotsupp => 524,
            Errno::Enomem => 12,
            Errno::Eperm => 1,
        }
    }

    /// The variant for a number a load can fail with before the verifier runs (a map the
    /// kernel refuses); numbers without a variant read as EINVAL, the commonest. Never
    /// `Enotsupp`, which means bpfemu cannot judge.
    pub fn from_load_code(code: i32) -> Errno {
        [
            Errno::Eacces,
            Errno::E2big,
            Errno::Efault,
            Errno::Enomem,
            Errno::Eperm,
        ]
        .into_iter()
        .find(|e| e.code() == code)
        .unwrap_or(Errno::Einval)
    }
}

/// A check's refusal: the kernel's final error line (without newline) and the errno.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{msg}")]
pub struct Reject {
    pub errno: Errno,
    pub msg: String,
    /// Whether the kernel logs `msg`; false where it refuses without a word (`msg` is then
    /// bpfemu's own explanation, absent from the log).
    pub logged: bool,
}

/// Why the program was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// The kernel's final error line, e.g. `R0 invalid mem access 'map_value_or_null'`.
    pub message: String,
    /// The instruction being checked when the error arose (`None` for errors before
    /// exploration that name no instruction).
    pub insn: Option<usize>,
    /// The source line of that instruction, from line_info.
    pub source: Option<SourceLine>,
    pub errno: Errno,
    /// Whether `message` is the log's last line. False where the kernel refuses without a
    /// word (`bpf_snprintf`'s data_len not a multiple of 8, an empty program): `message` is
    /// then bpfemu's explanation, and the log ends, as the kernel's, at its statistics.
    pub logged: bool,
    /// bpfemu's word on why, where the kernel gives none (which rule refused a map).
    pub note: Option<String>,
}

impl Rejection {
    /// The line a differential test compares with the kernel's last meaningful log line:
    /// `message` when the kernel logs it, `None` when the kernel logs no reason.
    pub fn kernel_error_line(&self) -> Option<&str> {
        self.logged.then_some(self.message.as_str())
    }
}

/// The program the kernel would run: instructions after its rewrites.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Xlated {
    pub insns: Vec<RawInsn>,
    /// Instructions (of the program as given) that read kernel memory: a map's kernel
    /// structure or pointers found in it. The kernel runs them; bpfemu's interpreter and JIT
    /// have no kernel structures to read, so a program with any must not run unchecked.
    pub kernel_reads: Vec<usize>,
    /// Instructions where the verifier, answering as a kernel that does so, accepted what is
    /// unsafe to run (see [`KernelFlaw`]): the kernel loads the program, so `verify` accepts
    /// it, but it must not run unchecked.
    pub kernel_flaws: Vec<(usize, KernelFlaw)>,
}

/// A known unsoundness of a kernel bpfemu answers as, which the verdict follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelFlaw {
    /// `scalar += fp` kept the scalar's frame number (before 7.2): the result's accesses were
    /// checked against another frame's stack.
    MisframedStackPointer,
    /// A NULL constant passed for a global function's memory argument that is not nullable
    /// (before 7.2): the function, verified as if it were valid, dereferences it.
    NullForNonNullArgument,
}

impl KernelFlaw {
    /// What the verdict took on trust, for the refusal of the trusted engines.
    pub fn describe(self) -> &'static str {
        match self {
            KernelFlaw::MisframedStackPointer => {
                "a stack pointer (scalar += r10) taken for another frame's, so its accesses \
                 were checked against the wrong stack"
            }
            KernelFlaw::NullForNonNullArgument => {
                "a NULL passed for a global function's argument that may not be NULL, which \
                 the function dereferences as valid"
            }
        }
    }
}

/// Accepted or rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Accepted(Xlated),
    Rejected(Rejection),
}

/// What the closing log line and `BPF_LOG_STATS` report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub processed_insns: u64,
    pub total_states: u64,
    pub peak_states: u64,
    pub max_states_per_insn: u32,
    pub mark_read: u64,
    /// Stack depth per subprogram, as the kernel prints `stack depth 16+0`.
    pub stack_depth: Vec<u32>,
    /// Wall time of the verification.
    pub time: Duration,
}

/// The verifier's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub outcome: Outcome,
    /// The log at the level asked (empty at level 0).
    pub log: String,
    pub stats: Stats,
}

impl Verdict {
    pub fn is_accepted(&self) -> bool {
        matches!(self.outcome, Outcome::Accepted(_))
    }

    /// Whether the accepted program reads kernel memory (see [`Xlated::kernel_reads`]).
    pub fn reads_kernel_memory(&self) -> bool {
        matches!(&self.outcome, Outcome::Accepted(x) if !x.kernel_reads.is_empty())
    }

    /// The first kernel flaw the acceptance follows (see [`Xlated::kernel_flaws`]).
    pub fn kernel_flaw(&self) -> Option<KernelFlaw> {
        match &self.outcome {
            Outcome::Accepted(x) => x.kernel_flaws.first().map(|(_, f)| *f),
            Outcome::Rejected(_) => None,
        }
    }

    /// Whether the program uses something bpfemu's verifier does not check yet ("not yet
    /// supported: ..."): bpfemu cannot say what the kernel would.
    pub fn is_undecided(&self) -> bool {
        self.rejection().is_some_and(|r| r.errno == Errno::Enotsupp)
    }

    pub fn rejection(&self) -> Option<&Rejection> {
        match &self.outcome {
            Outcome::Rejected(r) => Some(r),
            Outcome::Accepted(_) => None,
        }
    }

    pub fn xlated(&self) -> Option<&Xlated> {
        match &self.outcome {
            Outcome::Accepted(x) => Some(x),
            Outcome::Rejected(_) => None,
        }
    }
}

/// Verifies one program as Linux 6.18's `bpf_check()` does.
pub fn verify(input: &ProgramInput<'_>, opts: &Options) -> Verdict {
    explore::run(input, opts)
}

/// Why `verdict` (of [`verify`] on `input` with `opts`) rejects the program, from a second
/// walk that records the rejected path; see [`explain::explain`].
pub fn explain(
    input: &ProgramInput<'_>,
    opts: &Options,
    verdict: &Verdict,
) -> Option<explain::Explanation> {
    explain::explain(input, opts, verdict)
}
