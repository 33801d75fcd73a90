//! The bpf_conformance ISA suite run through the real kernel, and compared with bpfemu.
//!
//! The kernel has no "run these instructions with r1 = a buffer" entry point, and an XDP program
//! returns only 32 bits, so each test program is wrapped in an XDP program whose main function
//!
//! 1. copies the test's memory block onto its own stack (8-byte chunks through `ld_imm64` +
//!    `stxdw`, so the verifier knows them as constants; the tail byte by byte with `stb`),
//! 2. sets r1 = the address of that copy (0 without a block) and r2 = its length,
//! 3. calls the test program, appended unchanged after the wrapper, as a bpf-to-bpf
//!    subprogram (`call pc+N`): its own `call local` targets stay relative inside it and become
//!    further subprograms, and its `exit`s return to the wrapper,
//! 4. stores the full 64-bit r0 into the value of a one-element ARRAY map, addressed directly
//!    with `ld_imm64 rX, map_value(fd)` (no lookup, no stack slot for a key: the wrapper
//!    adds nothing to the combined stack depth when there is no block), and returns XDP_PASS.
//!
//! The program is loaded with a level-1 verifier log, run once with BPF_PROG_TEST_RUN over a
//! 64-byte packet, and the map is read back. bpfemu runs the same test with the suite's own
//! convention ([`bpfemu_vm::run_on_buffer`]), and the two results are compared.
//!
//! Helper 5 is the suite's echo helper, but `bpf_ktime_get_ns` in the kernel. A test that calls
//! it is still loaded and run, but compared only when r0 cannot depend on the helper's return
//! value (the instruction after every such call overwrites r0 without reading it, as in
//! `call_unwind_fail`); otherwise the report says the helper semantics differ.

use super::runner::{self, Outcome, SuiteHelpers};
use super::suite::{self, Expectation, TestCase};
use bpfemu_isa::opcode::*;
use bpfemu_isa::{AluOp, CallTarget, Insn, Program, RawInsn, Source};
use bpfemu_kernel::{
    self as kernel, BPF_LOG_LEVEL1, BPF_PROG_TYPE_XDP, LoadOptions, MapSpec, verifier_error_line,
};
use serde::Serialize;
use std::fmt;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

/// XDP_PASS, what the wrapper returns.
const XDP_PASS: u32 = 2;

/// The packet handed to BPF_PROG_TEST_RUN (XDP needs at least an Ethernet header).
const PACKET_LEN: usize = 64;

/// Level-1 logs are short; the kernel keeps the tail when one is not.
const LOG_SIZE: usize = 1 << 20;

/// Written into the result map before each run.
const RESULT_SENTINEL: u64 = 0xdead_beef_dead_beef;

/// The helper id the suite gives its echo helper (`bpf_ktime_get_ns` in the kernel).
const SUITE_ECHO_HELPER: i32 = 5;

/// What the kernel made of one test.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelVerdict {
    /// The verifier accepted the wrapped program and the run stored this r0.
    Result(u64),
    /// BPF_PROG_LOAD failed: the errno and the verifier's error line (the last meaningful line
    /// of the level-1 log).
    Rejected {
        errno: i32,
        verifier_error_line: String,
    },
    /// Loaded, but BPF_PROG_TEST_RUN or the map read-back failed, or the wrapper did not
    /// return XDP_PASS.
    RunFailed { errno: i32, what: String },
    /// Not sent to the kernel.
    Skipped(String),
}

/// What bpfemu made of the same test, under the suite's convention.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BpfemuVerdict {
    Result(u64),
    /// Assembling, decoding or running stopped with this error.
    Error(String),
    Skipped(String),
}

impl fmt::Display for KernelVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KernelVerdict::Result(r0) => write!(f, "r0 = {r0:#x}"),
            KernelVerdict::Rejected {
                errno,
                verifier_error_line,
            } => write!(f, "rejected (errno {errno}): {verifier_error_line}"),
            KernelVerdict::RunFailed { errno, what } => write!(f, "{what} (errno {errno})"),
            KernelVerdict::Skipped(reason) => write!(f, "skipped: {reason}"),
        }
    }
}

impl fmt::Display for BpfemuVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BpfemuVerdict::Result(r0) => write!(f, "r0 = {r0:#x}"),
            BpfemuVerdict::Error(e) => write!(f, "error: {e}"),
            BpfemuVerdict::Skipped(reason) => write!(f, "skipped: {reason}"),
        }
    }
}

/// How the two verdicts compare.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "agreement", rename_all = "snake_case")]
pub enum Agreement {
    /// Both ran and returned the same 64-bit r0.
    Agree,
    /// The kernel ran the test and bpfemu returned another r0 or failed: a bpfemu bug.
    Differ { kernel: u64, bpfemu: BpfemuVerdict },
    /// The kernel's verifier rejected the wrapped program.
    KernelRejects,
    /// The kernel accepted the program but the run or the read-back failed.
    KernelRunFailed,
    /// Both ran, but the result may legitimately differ (helper 5 semantics).
    NotCompared { reason: String },
    /// Neither ran it (callx, a file stating no expectation, an undecodable program).
    Skipped { reason: String },
}

/// One test's line of the comparison.
#[derive(Clone, Debug, Serialize)]
pub struct KernelIsaReport {
    pub name: String,
    /// What the `.data` file expects, when it states a result.
    pub expected: Option<u64>,
    /// Where the wrapper put the memory block (absent without one, or when not run).
    pub block: Option<BlockPlacement>,
    pub kernel: KernelVerdict,
    pub bpfemu: BpfemuVerdict,
    #[serde(flatten)]
    pub agreement: Agreement,
}

/// Why the comparison as a whole could not run.
#[derive(Debug, thiserror::Error)]
pub enum KernelIsaError {
    #[error("{}: cannot list the suite: {source}", dir.display())]
    ListDir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("the kernel's bpf() is not usable here (not root, or no bpf syscall)")]
    KernelUnavailable,
    #[error("{test}: cannot create the result map (errno {errno})")]
    MapCreate { test: String, errno: i32 },
}

/// Totals of a comparison.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct KernelIsaSummary {
    pub total: usize,
    pub agree: usize,
    pub differ: usize,
    pub rejected: usize,
    pub run_failed: usize,
    pub not_compared: usize,
    pub skipped: usize,
}

impl fmt::Display for KernelIsaSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} tests: {} agree, {} differ, {} rejected by the kernel verifier",
            self.total, self.agree, self.differ, self.rejected
        )?;
        if self.run_failed > 0 {
            write!(f, ", {} failed to run in the kernel", self.run_failed)?;
        }
        if self.not_compared > 0 {
            write!(
                f,
                ", {} not compared (helper semantics differ)",
                self.not_compared
            )?;
        }
        write!(f, ", {} skipped", self.skipped)
    }
}

/// Counts the agreements.
pub fn summarize(reports: &[KernelIsaReport]) -> KernelIsaSummary {
    let mut s = KernelIsaSummary {
        total: reports.len(),
        ..Default::default()
    };
    for r in reports {
        match r.agreement {
            Agreement::Agree => s.agree += 1,
            Agreement::Differ { .. } => s.differ += 1,
            Agreement::KernelRejects => s.rejected += 1,
            Agreement::KernelRunFailed => s.run_failed += 1,
            Agreement::NotCompared { .. } => s.not_compared += 1,
            Agreement::Skipped { .. } => s.skipped += 1,
        }
    }
    s
}

/// The line printed for a report, or `None` for a plain agreement.
pub fn report_line(report: &KernelIsaReport) -> Option<String> {
    let name = &report.name;
    match &report.agreement {
        Agreement::Agree => None,
        Agreement::Differ { kernel, bpfemu } => Some(format!(
            "DIFFER {name}: kernel r0 = {kernel:#x}, bpfemu {bpfemu}"
        )),
        Agreement::KernelRejects => Some(format!(
            "REJECTED {name}: {} (bpfemu {})",
            report.kernel, report.bpfemu
        )),
        Agreement::KernelRunFailed => Some(format!(
            "RUN-FAILED {name}: {} (bpfemu {})",
            report.kernel, report.bpfemu
        )),
        Agreement::NotCompared { reason } => Some(format!(
            "NOT-COMPARED {name}: {reason}: kernel {}, bpfemu {}",
            report.kernel, report.bpfemu
        )),
        Agreement::Skipped { reason } => Some(format!("SKIP {name}: {reason}")),
    }
}

/// One line per test that is not a plain agreement, then the summary line.
pub fn format_reports(reports: &[KernelIsaReport]) -> String {
    let mut out = String::new();
    for line in reports.iter().filter_map(report_line) {
        out.push_str(&line);
        out.push('\n');
    }
    out.push_str(&summarize(reports).to_string());
    out.push('\n');
    out
}

/// Runs every `.data` file of `dir` through the kernel and through bpfemu.
pub fn run_dir_against_kernel(dir: &Path) -> Result<Vec<KernelIsaReport>, KernelIsaError> {
    run_dir_against_kernel_with(dir, |_, _| {})
}

/// As [`run_dir_against_kernel`], telling `on_file(done, total)` after each file (progress).
pub fn run_dir_against_kernel_with(
    dir: &Path,
    mut on_file: impl FnMut(usize, usize),
) -> Result<Vec<KernelIsaReport>, KernelIsaError> {
    let files = suite::list_dir(dir).map_err(|source| KernelIsaError::ListDir {
        dir: dir.to_owned(),
        source,
    })?;
    if !kernel::kernel_available() {
        return Err(KernelIsaError::KernelUnavailable);
    }
    let mut reports = Vec::with_capacity(files.len());
    for path in &files {
        let report = match suite::load(path) {
            Ok(case) => run_case_against_kernel(&case)?,
            Err(e) => {
                let reason = format!("malformed test file: {e}");
                KernelIsaReport {
                    name: path
                        .file_stem()
                        .map_or_else(String::new, |s| s.to_string_lossy().into_owned()),
                    expected: None,
                    block: None,
                    kernel: KernelVerdict::Skipped(reason.clone()),
                    bpfemu: BpfemuVerdict::Skipped(reason.clone()),
                    agreement: Agreement::Skipped { reason },
                }
            }
        };
        reports.push(report);
        on_file(reports.len(), files.len());
    }
    Ok(reports)
}

/// Runs one parsed test through the kernel and through bpfemu, and compares.
pub fn run_case_against_kernel(case: &TestCase) -> Result<KernelIsaReport, KernelIsaError> {
    let expected = match case.expect {
        Expectation::Result(r) => Some(r),
        _ => None,
    };
    let skipped = |reason: String| KernelIsaReport {
        name: case.name.clone(),
        expected,
        block: None,
        kernel: KernelVerdict::Skipped(reason.clone()),
        bpfemu: BpfemuVerdict::Skipped(reason.clone()),
        agreement: Agreement::Skipped { reason },
    };
    // The suite runner's own skip rules (callx, no expectation) apply to both sides.
    if let Outcome::Skip { reason } = runner::run_case(case, bpfemu_jit::Engine::Interp) {
        return Ok(skipped(reason));
    }
    let program = match runner::build_program(case) {
        Ok(p) => p,
        Err((stage, message)) => return Ok(skipped(format!("{stage}: {message}"))),
    };

    let mut mem = case.mem.clone();
    let bpfemu = match bpfemu_vm::run_on_buffer(&program, &mut mem, &mut SuiteHelpers) {
        Ok(r0) => BpfemuVerdict::Result(r0),
        Err(e) => BpfemuVerdict::Error(e.to_string()),
    };
    let KernelRun {
        verdict: kernel,
        placement,
    } = run_in_kernel(&case.name, &program, &case.mem)?;
    let agreement = match (&kernel, &bpfemu) {
        (KernelVerdict::Result(_), _) if helper_result_reaches_r0(&program) => {
            Agreement::NotCompared {
                reason: format!(
                    "helper {SUITE_ECHO_HELPER} is the suite's echo helper but bpf_ktime_get_ns in \
                     the kernel, and its return value can reach r0"
                ),
            }
        }
        (KernelVerdict::Result(k), BpfemuVerdict::Result(b)) if k == b => Agreement::Agree,
        (KernelVerdict::Result(k), b) => Agreement::Differ {
            kernel: *k,
            bpfemu: b.clone(),
        },
        (KernelVerdict::Rejected { .. }, _) => Agreement::KernelRejects,
        (KernelVerdict::RunFailed { .. }, _) => Agreement::KernelRunFailed,
        (KernelVerdict::Skipped(reason), _) => Agreement::Skipped {
            reason: reason.clone(),
        },
    };
    Ok(KernelIsaReport {
        name: case.name.clone(),
        expected,
        block: placement,
        kernel,
        bpfemu,
        agreement,
    })
}

/// Whether the return value of a helper-5 call may reach r0: true unless the instruction after
/// every such call overwrites r0 without reading it.
fn helper_result_reaches_r0(program: &Program) -> bool {
    program.iter().any(|(pc, insn)| {
        if *insn != Insn::Call(CallTarget::Helper(SUITE_ECHO_HELPER)) {
            return false;
        }
        let overwritten = match program.insn(pc + 1) {
            Some(Insn::Alu {
                op: AluOp::Mov,
                dst,
                src,
                ..
            }) => dst.index() == 0 && !matches!(src, Source::Reg(r) if r.index() == 0),
            Some(Insn::LdImm64 { dst, .. }) => dst.index() == 0,
            Some(Insn::Load { dst, src, .. }) => dst.index() == 0 && src.index() != 0,
            _ => false,
        };
        !overwritten
    })
}

/// The kernel's verdict and, when it ran, where the block was.
struct KernelRun {
    verdict: KernelVerdict,
    placement: Option<BlockPlacement>,
}

/// Loads the wrapped test into the kernel, runs it once, reads r0 back. The block goes on the
/// stack, at the first shift the verifier's alignment rule accepts, else into a map value.
fn run_in_kernel(name: &str, program: &Program, mem: &[u8]) -> Result<KernelRun, KernelIsaError> {
    let map_err = |errno| KernelIsaError::MapCreate {
        test: name.to_owned(),
        errno,
    };
    let result_map = kernel::map_create(&MapSpec::array(8, 1)).map_err(map_err)?;
    if mem.is_empty() {
        let insns = wrap_program(program.raw(), Block::None, kernel::fd_imm(&result_map));
        return Ok(KernelRun {
            verdict: load_and_run(&insns, &result_map),
            placement: None,
        });
    }
    let mut first_rejection = None;
    for shift in 0..8u8 {
        let insns = wrap_program(
            program.raw(),
            Block::Stack { bytes: mem, shift },
            kernel::fd_imm(&result_map),
        );
        let verdict = load_and_run(&insns, &result_map);
        let misplaced = matches!(&verdict, KernelVerdict::Rejected { verifier_error_line, .. }
            if is_placement_error(verifier_error_line));
        if !misplaced {
            return Ok(KernelRun {
                verdict,
                placement: Some(BlockPlacement::Stack { shift }),
            });
        }
        first_rejection.get_or_insert(verdict);
    }
    // No stack placement works: the block in a map value.
    let block_map = kernel::map_create(&MapSpec::array(mem.len() as u32, 1)).map_err(map_err)?;
    kernel::map_update(&block_map, &0u32.to_ne_bytes(), mem, 0).map_err(map_err)?;
    let insns = wrap_program(
        program.raw(),
        Block::MapValue {
            map_fd: kernel::fd_imm(&block_map),
            len: mem.len(),
        },
        kernel::fd_imm(&result_map),
    );
    let verdict = load_and_run(&insns, &result_map);
    if let KernelVerdict::Rejected { .. } = verdict {
        // Rejected either way: the stack placement's reason is the one to report.
        return Ok(KernelRun {
            verdict: first_rejection.unwrap_or(verdict),
            placement: Some(BlockPlacement::Stack { shift: 0 }),
        });
    }
    Ok(KernelRun {
        verdict,
        placement: Some(BlockPlacement::MapValue),
    })
}

/// Whether a rejection is about where the wrapper put the block, not about the test.
fn is_placement_error(line: &str) -> bool {
    line.starts_with("misaligned stack access") || line.contains("combined stack size")
}

/// One BPF_PROG_LOAD (level-1 log), one BPF_PROG_TEST_RUN, one read-back of r0.
fn load_and_run(insns: &[RawInsn], result_map: &OwnedFd) -> KernelVerdict {
    let mut opts = LoadOptions::new(BPF_PROG_TYPE_XDP, insns);
    opts.log_level = BPF_LOG_LEVEL1;
    opts.log_size = LOG_SIZE;
    let mut loaded = kernel::prog_load(&opts);
    if matches!(loaded.fd, Err(libc::ENOSPC)) {
        // The log did not fit (the kernel kept its tail, where the error line is); the verdict
        // itself comes from a load without a log.
        let mut quiet = opts.clone();
        quiet.log_level = 0;
        loaded.fd = kernel::prog_load(&quiet).fd;
    }
    let prog: OwnedFd = match loaded.fd {
        Ok(fd) => fd,
        Err(errno) => {
            return KernelVerdict::Rejected {
                errno,
                verifier_error_line: verifier_error_line(&loaded.log),
            };
        }
    };
    // A sentinel, so that a run that never stores is not read as r0 = 0.
    if let Err(errno) = kernel::map_update(
        result_map,
        &0u32.to_ne_bytes(),
        &RESULT_SENTINEL.to_ne_bytes(),
        0,
    ) {
        return KernelVerdict::RunFailed {
            errno,
            what: "resetting the result map failed".into(),
        };
    }
    let packet = [0u8; PACKET_LEN];
    let run = match kernel::test_run(prog.as_fd(), &packet, None, 1) {
        Ok(run) => run,
        Err(errno) => {
            return KernelVerdict::RunFailed {
                errno,
                what: "BPF_PROG_TEST_RUN failed".into(),
            };
        }
    };
    if run.retval != XDP_PASS {
        return KernelVerdict::RunFailed {
            errno: 0,
            what: format!("the wrapper returned {} instead of XDP_PASS", run.retval),
        };
    }
    let mut value = [0u8; 8];
    if let Err(errno) = kernel::map_lookup(result_map, &0u32.to_ne_bytes(), &mut value) {
        return KernelVerdict::RunFailed {
            errno,
            what: "reading the result map back failed".into(),
        };
    }
    KernelVerdict::Result(u64::from_ne_bytes(value))
}

/// Where the wrapper puts the test's memory block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockPlacement {
    /// On the wrapper's stack, `shift` bytes past an 8-byte boundary. The verifier insists on
    /// naturally aligned stack accesses (`check_ptr_alignment` is strict for PTR_TO_STACK), so
    /// a test that loads a word from offset 2 of its block runs with the block at shift 2.
    Stack { shift: u8 },
    /// In the value of a second one-element ARRAY map (filled with BPF_MAP_UPDATE_ELEM), when
    /// no stack placement satisfies the verifier: map values have no alignment rule on this
    /// machine.
    MapValue,
}

/// The test's memory block, as the wrapper provides it.
#[derive(Clone, Copy, Debug)]
pub enum Block<'a> {
    /// No block: r1 = 0, r2 = 0.
    None,
    /// Copied onto the wrapper's stack, `shift` (0..8) bytes past an 8-byte boundary.
    Stack { bytes: &'a [u8], shift: u8 },
    /// The value of this one-element ARRAY map (of `len` bytes) holds it.
    MapValue { map_fd: i32, len: usize },
}

/// The wrapped program: the wrapper's main function, then the test's instructions unchanged.
///
/// `result_map_fd` is a one-element ARRAY map with an 8-byte value, which receives r0.
pub fn wrap_program(test: &[RawInsn], block: Block<'_>, result_map_fd: i32) -> Vec<RawInsn> {
    let mut out = Vec::new();
    let ld_imm64 = |out: &mut Vec<RawInsn>, dst: u8, src: u8, imm: i32, next_imm: i32| {
        out.push(RawInsn::new(BPF_LD | BPF_DW | BPF_IMM, dst, src, 0, imm));
        out.push(RawInsn::new(0, 0, 0, 0, next_imm));
    };
    let len = match block {
        Block::None => {
            out.push(RawInsn::new(BPF_ALU64 | BPF_MOV | BPF_K, 1, 0, 0, 0));
            0
        }
        Block::Stack { bytes, shift } => {
            // The 8-byte slots [r10 - size, r10) cover the block at r10 - size + shift; each
            // is written whole (zero around the block) so every store is aligned.
            let shift = usize::from(shift);
            let size = (bytes.len() + shift).div_ceil(8) * 8;
            let mut image = vec![0u8; size];
            image[shift..shift + bytes.len()].copy_from_slice(bytes);
            for (i, slot) in image.chunks_exact(8).enumerate() {
                let word = u64::from_le_bytes(slot.try_into().expect("slot of 8"));
                let off = (i * 8) as i64 - size as i64;
                ld_imm64(
                    &mut out,
                    1,
                    0,
                    word as u32 as i32,
                    (word >> 32) as u32 as i32,
                );
                out.push(RawInsn::new(
                    BPF_STX | BPF_DW | BPF_MEM,
                    10,
                    1,
                    off as i16,
                    0,
                ));
            }
            out.push(RawInsn::new(BPF_ALU64 | BPF_MOV | BPF_X, 1, 10, 0, 0));
            out.push(RawInsn::new(
                BPF_ALU64 | BPF_ADD | BPF_K,
                1,
                0,
                0,
                (shift as i64 - size as i64) as i32,
            ));
            bytes.len()
        }
        Block::MapValue { map_fd, len } => {
            ld_imm64(&mut out, 1, BPF_PSEUDO_MAP_VALUE, map_fd, 0);
            len
        }
    };
    out.push(RawInsn::new(
        BPF_ALU64 | BPF_MOV | BPF_K,
        2,
        0,
        0,
        len as i32,
    ));
    // After the call: ld_imm64 (2 slots), stxdw, mov, exit.
    const AFTER_CALL: i32 = 5;
    out.push(RawInsn::new(
        BPF_JMP | BPF_CALL,
        0,
        BPF_PSEUDO_CALL,
        0,
        AFTER_CALL,
    ));
    let after = out.len();
    // r1 = &result_map[0] (offset 0 into the value), *(u64 *)r1 = r0.
    ld_imm64(&mut out, 1, BPF_PSEUDO_MAP_VALUE, result_map_fd, 0);
    out.push(RawInsn::new(BPF_STX | BPF_DW | BPF_MEM, 1, 0, 0, 0));
    out.push(RawInsn::new(
        BPF_ALU64 | BPF_MOV | BPF_K,
        0,
        0,
        0,
        XDP_PASS as i32,
    ));
    out.push(RawInsn::new(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
    debug_assert_eq!(out.len() - after, AFTER_CALL as usize);
    out.extend_from_slice(test);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapper_decodes_and_calls_the_test() {
        let test = [
            RawInsn::new(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 7),
            RawInsn::new(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
        ];
        let mem = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
        let wrapped = wrap_program(
            &test,
            Block::Stack {
                bytes: &mem,
                shift: 2,
            },
            3,
        );
        let prog = Program::decode(wrapped.clone()).unwrap();
        let start = wrapped.len() - test.len();
        let (call_pc, insn) = prog
            .iter()
            .find(|(_, i)| matches!(i, Insn::Call(CallTarget::Local(_))))
            .unwrap();
        let Insn::Call(CallTarget::Local(off)) = insn else {
            unreachable!()
        };
        assert_eq!(call_pc as i64 + 1 + *off as i64, start as i64);
        assert_eq!(&wrapped[start..], &test);
        // 2 + 10 bytes: two aligned slots, [r10-16, r10), the block at r10-14.
        assert_eq!(
            Insn::imm64(wrapped[0].imm, wrapped[1].imm),
            u64::from_le_bytes([0, 0, 1, 2, 3, 4, 5, 6])
        );
        assert_eq!(
            wrapped[2],
            RawInsn::new(BPF_STX | BPF_DW | BPF_MEM, 10, 1, -16, 0)
        );
        assert_eq!(
            Insn::imm64(wrapped[3].imm, wrapped[4].imm),
            u64::from_le_bytes([7, 8, 9, 10, 0, 0, 0, 0])
        );
        assert_eq!(
            wrapped[5],
            RawInsn::new(BPF_STX | BPF_DW | BPF_MEM, 10, 1, -8, 0)
        );
        assert_eq!(
            wrapped[7],
            RawInsn::new(BPF_ALU64 | BPF_ADD | BPF_K, 1, 0, 0, -14)
        );
        assert_eq!(
            wrapped[8],
            RawInsn::new(BPF_ALU64 | BPF_MOV | BPF_K, 2, 0, 0, 10)
        );
    }

    #[test]
    fn map_value_block_and_no_block() {
        let test = [RawInsn::new(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)];
        let wrapped = wrap_program(&test, Block::MapValue { map_fd: 4, len: 6 }, 3);
        assert_eq!(
            wrapped[0],
            RawInsn::new(BPF_LD | BPF_DW | BPF_IMM, 1, BPF_PSEUDO_MAP_VALUE, 0, 4)
        );
        assert_eq!(
            wrapped[2],
            RawInsn::new(BPF_ALU64 | BPF_MOV | BPF_K, 2, 0, 0, 6)
        );
        let wrapped = wrap_program(&test, Block::None, 3);
        assert_eq!(
            wrapped[0],
            RawInsn::new(BPF_ALU64 | BPF_MOV | BPF_K, 1, 0, 0, 0)
        );
        assert_eq!(wrapped.len(), 9);
        Program::decode(wrapped).unwrap();
    }

    #[test]
    fn helper_result_is_dead_in_call_unwind_fail() {
        let call = Insn::Call(CallTarget::Helper(5)).encode();
        let mut dead = call.clone();
        dead.push(RawInsn::new(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 2));
        dead.push(RawInsn::new(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
        assert!(!helper_result_reaches_r0(&Program::decode(dead).unwrap()));
        let mut live = call;
        live.push(RawInsn::new(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
        assert!(helper_result_reaches_r0(&Program::decode(live).unwrap()));
    }
}
