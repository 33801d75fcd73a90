//! libbpf's rewrite of a failed load's verifier log (`fixup_verifier_log` in libbpf 1.7).
//!
//! When the verifier refuses an instruction libbpf poisoned on purpose (a call to a weak
//! kfunc the kernel lacks, a CO-RE relocation with no target), the kernel can only say
//! `invalid func unknown#2002000000`. libbpf looks for that complaint among the log's last
//! ten lines and replaces it, and the instruction line before it, with the cause:
//!
//! ```text
//! 5: <invalid kfunc call>
//! kfunc 'bpf_foo' is referenced but wasn't resolved
//! ```
//!
//! This is the log a libbpf user sees, and what bpfemu reports: its verdicts and the
//! kernel's (through bpfemu's kernel door) both pass through here.

use crate::object::{Object, PoisonCause, PoisonedCall, ProgramSpec};

/// How many of the log's last lines libbpf searches for the complaint.
const LINES_SEARCHED: usize = 10;

impl PoisonedCall {
    /// What replaces the instruction's line in the log.
    fn marker(&self) -> &'static str {
        match self.cause {
            PoisonCause::UnresolvedKfunc(_) => "<invalid kfunc call>",
            PoisonCause::FailedCoreRelo(_) => "<invalid CO-RE relocation>",
        }
    }

    /// What replaces the verifier's complaint; `None` where libbpf leaves it (a relocation
    /// it cannot describe).
    fn cause_line(&self, obj: &Object) -> Option<String> {
        match &self.cause {
            PoisonCause::UnresolvedKfunc(name) => {
                Some(format!("kfunc '{name}' is referenced but wasn't resolved"))
            }
            PoisonCause::FailedCoreRelo(relo) => {
                let described = crate::core_relo::describe(obj.btf.as_ref()?, relo)?;
                Some(format!("failed to resolve CO-RE relocation {described}"))
            }
        }
    }
}

/// The complaint the verifier makes about a poisoned call (`invalid func unknown#N`) and the
/// instruction index from the line before it (`K: (85) call unknown#N`).
fn complaint(lines: &[&str], at: usize) -> Option<(usize, i32)> {
    let number: i32 = lines[at]
        .strip_prefix("invalid func unknown#")?
        .trim()
        .parse()
        .ok()?;
    let insn_line = lines.get(at.checked_sub(1)?)?;
    let (insn, rest) = insn_line.split_once(": (")?;
    let (_, call) = rest.split_once(") ")?;
    let called: i32 = call.trim().strip_prefix("call unknown#")?.parse().ok()?;
    (called == number).then_some(())?;
    Some((insn.parse().ok()?, number))
}

fn poisoned_at(program: &ProgramSpec, insn: usize) -> Option<&PoisonedCall> {
    program.poisoned_calls.iter().find(|p| p.insn == insn)
}

/// `log` as libbpf leaves it after a failed load of `program`; `None` when libbpf changes
/// nothing.
pub fn fixup_log(obj: &Object, program: &ProgramSpec, log: &str) -> Option<String> {
    let lines: Vec<&str> = log.lines().collect();
    let searched = lines.len().saturating_sub(LINES_SEARCHED)..lines.len();
    let at = searched
        .rev()
        .find(|&i| lines[i].starts_with("invalid func unknown#"))?;
    let (insn, _) = complaint(&lines, at)?;
    let poisoned = poisoned_at(program, insn)?;
    let cause = poisoned.cause_line(obj)?;
    let mut out = String::with_capacity(log.len());
    for line in &lines[..at - 1] {
        out.push_str(line);
        out.push('\n');
    }
    out.push_str(&format!("{insn}: {}\n{cause}\n", poisoned.marker()));
    for line in &lines[at + 1..] {
        out.push_str(line);
        out.push('\n');
    }
    Some(out)
}

/// The line libbpf's log ends with in place of the verifier's `message` about instruction
/// `insn` of `program`; `None` when libbpf leaves the message as it is.
pub fn error_line(
    obj: &Object,
    program: &ProgramSpec,
    insn: usize,
    message: &str,
) -> Option<String> {
    let number = message.strip_prefix("invalid func unknown#")?;
    let poisoned = poisoned_at(program, insn)?;
    let call = program.insns.get(insn)?;
    (number.parse::<i32>().ok()? == call.imm).then_some(())?;
    poisoned.cause_line(obj)
}
