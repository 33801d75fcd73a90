//! Why a program was rejected, from the rejected path itself: the kernel's log lines of the
//! failing instruction, notes that name the instruction where the fact that failed was
//! established or lost (the branch that proved a packet range, the helper that returned
//! `_or_null`, the load that made a scalar unbounded, the stack slot nothing wrote, the loop
//! that exhausted the instruction budget), and the path from the entry to the error with the
//! state that matters at each step.
//!
//! The verifier's own walk records nothing: [`explain`] walks the program again with the path
//! recorded ([`crate::trace`]), which changes no verdict, log line or count, and explains the
//! rejection only when the second walk rejects the program exactly as the first did.

use crate::env::Env;
use crate::state::reg::{PTR_MAYBE_NULL, RegState, RegType};
use crate::trace::Trace;
use crate::{Errno, Options, ProgramInput, Reject, Verdict};
use bpfemu_isa::{AluOp, CallTarget, Insn, Source};
use bpfemu_loader::SourceLine;

/// A cause, placed at the instruction that established or lost the fact that failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    pub message: String,
    pub insn: Option<usize>,
    /// The source line of `insn`, from line_info.
    pub source: Option<SourceLine>,
}

/// One instruction of the rejected path that touched what failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathStep {
    pub insn: usize,
    /// As the kernel's log prints it (`7: (2d) if r3 > r2 goto pc+5`).
    pub text: String,
    /// The registers that matter as the instruction left them (`R1=pkt(off=23,r=14)`), and
    /// for a conditional jump whether it was taken on this path.
    pub state: String,
    pub source: Option<SourceLine>,
}

/// Why the program was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Explanation {
    /// The instruction that failed.
    pub insn: usize,
    /// The kernel's last log lines (level 1): the line of the failing instruction that
    /// qualifies the verdict, when the kernel logs one, then the verdict line.
    pub log_lines: Vec<String>,
    pub notes: Vec<Note>,
    /// The instructions of the path that touched what failed, entry first, the failing
    /// instruction last; `elided` of them left out in the middle of a long path.
    pub path: Vec<PathStep>,
    pub elided: usize,
    /// Instructions on the rejected path.
    pub path_len: usize,
}

/// How many of the last processed instructions keep their register changes.
pub const RECORDED_WINDOW: u64 = 1 << 16;

/// The explanation of `verdict`'s rejection of `input`, from a second, recorded walk; `None`
/// when `verdict` is not a rejection inside the walk, or the recorded walk does not reject
/// the program at the same instruction with the same message.
pub fn explain(input: &ProgramInput<'_>, opts: &Options, verdict: &Verdict) -> Option<Explanation> {
    let rejection = verdict.rejection()?;
    // The kernel's lines come from the level-1 log; a rejection for size has none, and its
    // level-1 log would be the whole budget's worth of lines.
    let log_level = if rejection.errno == Errno::E2big {
        0
    } else {
        crate::log::LEVEL1
    };
    let opts = Options {
        log_level,
        ..opts.clone()
    };
    // Registers are recorded for the last instructions of the walk only, which hold the
    // rejected path's end: the record stays small on a long walk.
    let changes_from = verdict
        .stats
        .processed_insns
        .saturating_sub(RECORDED_WINDOW);
    let (again, explanation) = crate::explore::run_traced(input, &opts, changes_from);
    let same = again
        .rejection()
        .is_some_and(|r| r.message == rejection.message && r.insn == rejection.insn);
    explanation.filter(|_| same)
}

/// Builds the explanation of `reject` from the recorded walk (called with the walk's `Env`).
pub(crate) fn build(env: &Env<'_>, trace: &Trace, reject: &Reject) -> Option<Explanation> {
    let failure = trace.failure.as_ref()?;
    let cx = Cx { env, trace };
    let log_lines = kernel_lines(&failure.log_text, reject);
    let mut found = Found::default();
    let reg = failing_register(&reject.msg, &log_lines, env.insn(failure.pc));
    if is_too_large(&reject.msg) {
        cx.loop_notes(&reject.msg, &mut found);
    } else if let Some(alloc) = allocation_insn(&log_lines) {
        cx.leak_note(alloc, &mut found);
    } else if let Some(reg) = reg {
        let r = failure.state.cur().regs[reg];
        found.follow(reg, cx.failing_step());
        let text = log_lines.join("\n");
        if let Some(off) = stack_offset(&reject.msg).or_else(|| stack_slot_of(&r, &text)) {
            cx.stack_notes(reg, off, &mut found);
        } else if r.is_pkt_pointer_any() && text.contains("packet") {
            cx.packet_notes(reg, &r, &log_lines, &mut found);
        } else if r.flags & PTR_MAYBE_NULL != 0 || reject.msg.contains("_or_null") {
            cx.null_notes(reg, &r, &mut found);
        } else if is_about_bounds(&text) {
            cx.bounds_notes(reg, &r, &mut found);
        } else if r.ty == RegType::NotInit {
            cx.unwritten_note(reg, &mut found);
        } else {
            cx.origin_note(reg, &r, &mut found);
        }
    }
    let (path, elided) = cx.path(&found);
    Some(Explanation {
        insn: failure.pc,
        log_lines,
        notes: found.notes,
        path,
        elided,
        path_len: trace.steps.len() + 1,
    })
}

/// What the analysis found: the notes, the registers followed (each up to the step where its
/// value moved on to the next one followed), the steps named.
#[derive(Default)]
struct Found {
    notes: Vec<Note>,
    regs: Vec<(usize, usize)>,
    steps: Vec<usize>,
}

impl Found {
    fn follow(&mut self, reg: usize, upto: usize) {
        if !self.regs.contains(&(reg, upto)) {
            self.regs.push((reg, upto));
        }
    }
}

fn is_too_large(msg: &str) -> bool {
    msg.starts_with("BPF program is too large") || msg.starts_with("The sequence of ")
}

fn is_about_bounds(text: &str) -> bool {
    [
        "unbounded",
        "min value",
        "max value",
        "outside of the allowed memory range",
        "negative",
        "invalid access to map value",
        "invalid access to memory",
        "out of bounds",
    ]
    .iter()
    .any(|w| text.contains(w))
}

/// The verdict line, after the line the failing instruction logged just before it when
/// there is one (`invalid access to packet, off=23 size=1, R1(id=0,off=23,r=14)`).
fn kernel_lines(text: &str, reject: &Reject) -> Vec<String> {
    if !reject.logged {
        return Vec::new();
    }
    let lines: Vec<&str> = text.lines().collect();
    match lines.as_slice() {
        // Lines after the instruction's own: the verdict must be the last of them, else the
        // kernel's log ends otherwise (a state dump) and only the verdict is quoted.
        [.., before, last] if *last == reject.msg && !before.is_empty() => {
            vec![(*before).to_owned(), reject.msg.clone()]
        }
        _ => vec![reject.msg.clone()],
    }
}

/// The register the message names first (`R1 offset is outside...`, or `arg #2` of a call:
/// R3), else the qualifying line's, else the scalar operand of an ALU instruction or the
/// address register of a memory instruction.
fn failing_register(msg: &str, lines: &[String], insn: Option<&Insn>) -> Option<usize> {
    first_register(msg)
        .or_else(|| argument_register(msg))
        .or_else(|| lines.iter().map(String::as_str).find_map(first_register))
        .or(match insn {
            Some(Insn::Alu {
                src: Source::Reg(src),
                ..
            }) => Some(src.index()),
            Some(Insn::Load { src, .. }) => Some(src.index()),
            Some(
                Insn::Store { dst, .. } | Insn::StoreReg { dst, .. } | Insn::Atomic { dst, .. },
            ) => Some(dst.index()),
            _ => None,
        })
}

/// `R<n>` as a word of its own (`R1 `, `R1(`, `R1,`), n at most 10.
fn first_register(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    (0..bytes.len()).find_map(|i| {
        let word_start = i == 0 || !bytes[i - 1].is_ascii_alphanumeric();
        if !word_start || bytes[i] != b'R' {
            return None;
        }
        let digits: String = text[i + 1..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        let after = text[i + 1 + digits.len()..].chars().next();
        let ends_word = after.is_none_or(|c| !c.is_ascii_alphanumeric() && c != '_');
        let n: usize = digits.parse().ok()?;
        (ends_word && n <= 10).then_some(n)
    })
}

/// The instruction that acquired a reference never released (`Unreleased reference id=2
/// alloc_insn=5`).
fn allocation_insn(lines: &[String]) -> Option<usize> {
    let line = lines
        .iter()
        .find(|l| l.starts_with("Unreleased reference"))?;
    let at = line.find("alloc_insn=")? + "alloc_insn=".len();
    line[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// The register of a call's argument the message names: `arg #2` (helpers) and `arg#2`
/// (kfuncs) count from 0, so R3.
fn argument_register(msg: &str) -> Option<usize> {
    let at = msg
        .find("arg #")
        .map(|i| i + 5)
        .or_else(|| msg.find("arg#").map(|i| i + 4))?;
    let digits: String = msg[at..].chars().take_while(char::is_ascii_digit).collect();
    let n: usize = digits.parse().ok()?;
    (n < 5).then_some(n + 1)
}

/// The frame offset a stack pointer points at, when the message is about what the slot
/// holds (`Expected an initialized dynptr as arg #2`).
fn stack_slot_of(r: &RegState, text: &str) -> Option<i64> {
    let about_contents = ["initialized", "uninit", "from stack"]
        .iter()
        .any(|w| text.contains(w));
    (r.ty == RegType::Stack && r.var_off.is_const() && about_contents)
        .then(|| r.off as i64 + r.var_off.value as i64)
}

/// The frame offset of a stack read the message refuses (`... from stack R2 off -16+0 size 8`).
fn stack_offset(msg: &str) -> Option<i64> {
    if !msg.contains("from stack") {
        return None;
    }
    let rest = &msg[msg.find(" off ")? + 5..];
    let word = rest.split_whitespace().next()?;
    let mut parts = word.splitn(2, '+');
    let base: i64 = parts.next()?.parse().ok()?;
    let extra: i64 = parts.next().map_or(Some(0), |p| p.parse().ok())?;
    Some(base + extra)
}

/// The recorded walk and its program, for the analyses.
struct Cx<'e, 'a> {
    env: &'e Env<'a>,
    trace: &'e Trace,
}

impl Cx<'_, '_> {
    fn failure_pc(&self) -> usize {
        self.trace.failure.as_ref().map_or(0, |f| f.pc)
    }

    /// The step index of the failing instruction (one past the recorded steps).
    fn failing_step(&self) -> usize {
        self.trace.steps.len()
    }

    fn frame(&self) -> usize {
        self.trace.frame_before(self.failing_step())
    }

    fn pc(&self, step: usize) -> usize {
        self.trace
            .steps
            .get(step)
            .map_or(self.failure_pc(), |s| s.pc as usize)
    }

    fn source(&self, pc: usize) -> Option<SourceLine> {
        let lines = self.env.input.line_info;
        let i = lines.partition_point(|l| l.insn <= pc);
        i.checked_sub(1).map(|i| lines[i].clone())
    }

    fn insn_text(&self, pc: usize) -> String {
        let Some(insn) = self.env.insn(pc) else {
            return format!("{pc}: ?");
        };
        let raw = &self.env.prog.raw()[pc];
        crate::explore::kfunc_named(
            self.env.input.kernel,
            raw,
            bpfemu_isa::disasm::log_line(pc, raw.code, insn),
        )
        .trim_end()
        .to_owned()
    }

    /// `insn 7 (`if r3 > r2 goto pc+5`)`.
    fn insn_words(&self, pc: usize) -> String {
        let text = self.insn_text(pc);
        let body = text.split_once(") ").map_or(text.as_str(), |(_, t)| t);
        format!("insn {pc} (`{body}`)")
    }

    fn reg_text(&self, reg: usize, r: &RegState) -> String {
        if r.ty == RegType::NotInit {
            return format!("R{reg} unwritten");
        }
        format!("R{reg}={}", crate::log::reg_state_text(self.env, r))
    }

    fn note_at(&self, found: &mut Found, step: Option<usize>, message: String) {
        let insn = step.map(|s| self.pc(s));
        if let Some(s) = step {
            found.steps.push(s);
        }
        found.notes.push(Note {
            message,
            insn,
            source: insn.and_then(|pc| self.source(pc)),
        });
    }

    /// The latest step before `before` that changed `reg` in the failing frame's life, within
    /// the recorded window.
    fn last_change(&self, reg: usize, before: usize) -> Option<usize> {
        let frame = self.frame();
        (self.trace.window_start()..before).rev().find_map(|j| {
            let s = self.trace.steps[j];
            match (s.frame as usize).cmp(&frame) {
                std::cmp::Ordering::Less => Some(None),
                std::cmp::Ordering::Equal => self.trace.change(j, reg).map(|_| Some(j)),
                std::cmp::Ordering::Greater => None,
            }
        })?
    }

    /// Where a value that held all along the record was from: the entry, or before the
    /// window of recorded registers.
    fn since_start(&self) -> &'static str {
        if self.trace.window_start() == 0 {
            "from the entry of the function"
        } else {
            "since before the last instructions recorded"
        }
    }

    /// The step where `holds` became true of `reg` (followed through moves from other
    /// registers), looking back from `before`; `None` when it held from the entry. Also the
    /// register it was established in.
    fn established(
        &self,
        mut reg: usize,
        mut before: usize,
        holds: impl Fn(&RegState) -> bool,
        found: &mut Found,
    ) -> Option<(usize, usize)> {
        // A loop-carried register changes once per iteration; past this many changes the
        // last one looked at is named.
        let mut budget = 4096;
        while let Some(j) = self.last_change(reg, before) {
            budget -= 1;
            let held_before = holds(&self.trace.before(j, reg));
            if !held_before || budget == 0 {
                match self.moved_from(j) {
                    Some(src) if holds(&self.trace.before(j, src)) && budget > 0 => {
                        found.follow(src, j);
                        reg = src;
                        before = j;
                        continue;
                    }
                    _ => return Some((j, reg)),
                }
            }
            before = j;
        }
        None
    }

    /// The source register of a plain `dst = src` move at step `j`.
    fn moved_from(&self, j: usize) -> Option<usize> {
        match self.env.insn(self.pc(j)) {
            Some(Insn::Alu {
                op: AluOp::Mov,
                src: Source::Reg(src),
                ..
            }) => Some(src.index()),
            _ => None,
        }
    }

    /// The register an instruction added to its destination (`r1 += r2`).
    fn added_from(&self, j: usize) -> Option<usize> {
        match self.env.insn(self.pc(j)) {
            Some(Insn::Alu {
                op: AluOp::Add | AluOp::Sub,
                src: Source::Reg(src),
                ..
            }) => Some(src.index()),
            _ => None,
        }
    }

    fn is_cond_jump(&self, step: usize) -> bool {
        matches!(self.env.insn(self.pc(step)), Some(Insn::Jump { .. }))
    }

    fn packet_notes(&self, reg: usize, r: &RegState, lines: &[String], found: &mut Found) {
        let here = self.failing_step();
        let range = r.range;
        let needed = access_end(lines).map_or(String::new(), |end| {
            format!(", and the access needs r>={end}")
        });
        let same_range = |x: &RegState| x.is_pkt_pointer_any() && x.range == range;
        let origin = self.established(reg, here, same_range, found);
        match origin {
            Some((j, _)) if range > 0 && self.is_cond_jump(j) => self.note_at(
                found,
                Some(j),
                format!(
                    "R{reg}'s packet range r={range} was proved by the branch at {}: only \
                     {range} bytes past the packet pointer it checked are known to be there{needed}",
                    self.insn_words(self.pc(j))
                ),
            ),
            Some((j, from)) if range > 0 => self.note_at(
                found,
                Some(j),
                format!(
                    "R{reg}'s packet range r={range} comes from R{from} at {}{needed}",
                    self.insn_words(self.pc(j))
                ),
            ),
            Some((j, from)) => self.note_at(
                found,
                Some(j),
                format!(
                    "R{from} became a packet pointer at {} and no branch on this path compared \
                     it with data_end, so no byte of the packet is known to be there (r=0){needed}",
                    self.insn_words(self.pc(j))
                ),
            ),
            None => {}
        }
        if r.off != 0 {
            let off = r.off;
            let same_off = |x: &RegState| x.is_pkt_pointer_any() && x.off == off;
            if let Some((j, _)) = self.established(reg, here, same_off, found)
                && !found.steps.contains(&j)
            {
                self.note_at(
                    found,
                    Some(j),
                    format!(
                        "R{reg} points {off} bytes past the checked pointer since {}",
                        self.insn_words(self.pc(j))
                    ),
                );
            }
        }
    }

    fn null_notes(&self, reg: usize, r: &RegState, found: &mut Found) {
        let ty = r.ty;
        let maybe_null = |x: &RegState| x.ty == ty && x.flags & PTR_MAYBE_NULL != 0;
        let what = crate::log::reg_type_name(self.env, r);
        let Some((j, from)) = self.established(reg, self.failing_step(), maybe_null, found) else {
            if self.trace.window_start() == 0 {
                self.note_at(
                    found,
                    None,
                    format!(
                        "R{reg} is {what} from the entry of the function (an argument that may \
                         be NULL), and no NULL check on this path comes before insn {}",
                        self.failure_pc()
                    ),
                );
            }
            return;
        };
        let by = match self.env.insn(self.pc(j)) {
            Some(Insn::Call(CallTarget::Helper(id))) => format!(
                "bpf_{}",
                bpfemu_isa::uapi::helpers::helper_name(*id).unwrap_or("helper")
            ),
            Some(Insn::Call(_)) => "the call".to_owned(),
            _ => "the instruction".to_owned(),
        };
        self.note_at(
            found,
            Some(j),
            format!(
                "R{from} is {what}: {by} at {} may return NULL, and no NULL check on this path \
                 comes between it and insn {}",
                self.insn_words(self.pc(j)),
                self.failure_pc()
            ),
        );
    }

    fn bounds_notes(&self, reg: usize, r: &RegState, found: &mut Found) {
        let here = self.failing_step();
        let (scalar_reg, scalar, before) = if r.ty == RegType::Scalar {
            (reg, *r, here)
        } else {
            // A pointer with a variable offset: the scalar added into it.
            let var_off = r.var_off;
            let ty = r.ty;
            let same_var = |x: &RegState| x.ty == ty && x.var_off == var_off;
            let Some((j, _)) = self.established(reg, here, same_var, found) else {
                return self.origin_note(reg, r, found);
            };
            let Some(src) = self.added_from(j) else {
                return self.origin_note(reg, r, found);
            };
            let s = self.trace.before(j, src);
            self.note_at(
                found,
                Some(j),
                format!(
                    "R{reg} got its variable offset from R{src} at {} (R{src} was {})",
                    self.insn_words(self.pc(j)),
                    crate::log::reg_state_text(self.env, &s)
                ),
            );
            found.follow(src, j);
            (src, s, j)
        };
        let loose = |x: &RegState| {
            x.ty == RegType::Scalar
                && x.umax_value >= scalar.umax_value
                && x.smin_value <= scalar.smin_value
                && x.smax_value >= scalar.smax_value
        };
        match self.established(scalar_reg, before, loose, found) {
            Some((j, from)) => self.note_at(
                found,
                Some(j),
                format!(
                    "R{from} is {} since {}, and nothing on this path bounds it before insn {}",
                    bounds_words(&scalar),
                    self.insn_words(self.pc(j)),
                    self.failure_pc()
                ),
            ),
            None => self.note_at(
                found,
                None,
                format!(
                    "R{scalar_reg} is {} {}",
                    bounds_words(&scalar),
                    self.since_start()
                ),
            ),
        }
    }

    fn stack_notes(&self, reg: usize, off: i64, found: &mut Found) {
        let pc = self.failure_pc();
        let slot = format!("fp{off}");
        let writers = self.stack_writers(off);
        let on_path: Vec<usize> = (0..self.failing_step())
            .filter(|&j| writers.contains(&self.pc(j)))
            .collect();
        let elsewhere: Vec<usize> = writers
            .iter()
            .copied()
            .filter(|w| !on_path.iter().any(|&j| self.pc(j) == *w))
            .collect();
        let mut message = match on_path.last() {
            Some(&j) => format!(
                "{slot} is written on this path by {}, but not as the read at insn {pc} needs \
                 it (the kernel's line says which bytes)",
                self.insn_words(self.pc(j))
            ),
            None => format!(
                "{slot} is read at insn {pc}, but no instruction on this path stores to it, so \
                 it holds nothing the read may use"
            ),
        };
        if let Some(&w) = elsewhere.first() {
            message.push_str(&format!(
                "; {} writes it, on another path",
                self.insn_words(w)
            ));
        }
        found.notes.push(Note {
            message,
            insn: Some(pc),
            source: self.source(pc),
        });
        if reg != 10 {
            let r = self.trace.before(self.failing_step(), reg);
            let pointer = |x: &RegState| x.ty == RegType::Stack && x.off == r.off;
            if let Some((j, from)) = self.established(reg, self.failing_step(), pointer, found) {
                self.note_at(
                    found,
                    Some(j),
                    format!(
                        "R{from} = {} (the slot read) since {}",
                        crate::log::reg_state_text(self.env, &r),
                        self.insn_words(self.pc(j))
                    ),
                );
            }
        }
    }

    /// Instructions that store through the frame pointer into the 8-byte slot holding `off`.
    fn stack_writers(&self, off: i64) -> Vec<usize> {
        let slot = off.div_euclid(8);
        self.env
            .prog
            .iter()
            .filter(|(_, insn)| match insn {
                Insn::Store {
                    size, dst, off: o, ..
                }
                | Insn::StoreReg {
                    size, dst, off: o, ..
                } => {
                    let (start, end) = (*o as i64, *o as i64 + size.bytes() as i64 - 1);
                    dst.index() == 10 && start.div_euclid(8) <= slot && slot <= end.div_euclid(8)
                }
                _ => false,
            })
            .map(|(pc, _)| pc)
            .collect()
    }

    fn origin_note(&self, reg: usize, r: &RegState, found: &mut Found) {
        let r = *r;
        let same = |x: &RegState| crate::trace::same_value(x, &r);
        if let Some((j, from)) = self.established(reg, self.failing_step(), same, found) {
            let was = self.trace.before(j, from);
            let is_call = matches!(self.env.insn(self.pc(j)), Some(Insn::Call(_)));
            if is_call && was.is_pkt_pointer_any() && !r.is_pkt_pointer_any() {
                return self.note_at(
                    found,
                    Some(j),
                    format!(
                        "R{from} was {} until the call at {}, which may change the packet and so \
                         invalidates every packet pointer",
                        crate::log::reg_state_text(self.env, &was),
                        self.insn_words(self.pc(j))
                    ),
                );
            }
            self.note_at(
                found,
                Some(j),
                format!(
                    "R{from} became {} at {}",
                    crate::log::reg_state_text(self.env, &r),
                    self.insn_words(self.pc(j))
                ),
            );
        }
    }

    /// A reference acquired on this path and not released before the exit.
    fn leak_note(&self, alloc: usize, found: &mut Found) {
        if let Some(step) = self
            .trace
            .steps
            .iter()
            .rposition(|s| s.pc as usize == alloc)
        {
            found.steps.push(step);
        }
        found.notes.push(Note {
            message: format!(
                "the reference acquired at {} is still held at insn {}: nothing on this path \
                 releases it",
                self.insn_words(alloc),
                self.failure_pc()
            ),
            insn: Some(alloc),
            source: self.source(alloc),
        });
    }

    /// A register read before anything wrote it on this path, or after a call took it.
    fn unwritten_note(&self, reg: usize, found: &mut Found) {
        let pc = self.failure_pc();
        let unwritten = |x: &RegState| x.ty == RegType::NotInit;
        match self.established(reg, self.failing_step(), unwritten, found) {
            Some((j, _)) => self.note_at(
                found,
                Some(j),
                format!(
                    "R{reg} lost its value at {}: a call leaves R1-R5 unreadable, and nothing \
                     writes R{reg} again before insn {pc}",
                    self.insn_words(self.pc(j))
                ),
            ),
            None if self.trace.window_start() == 0 => self.note_at(
                found,
                None,
                format!("R{reg} is never written on this path before insn {pc}"),
            ),
            None => {}
        }
    }

    /// The loop that spent the budget: the back-edge taken most often on the rejected path.
    fn loop_notes(&self, msg: &str, found: &mut Found) {
        let steps = &self.trace.steps;
        let mut counts: Vec<(usize, usize, u32)> = Vec::new();
        for (j, s) in steps.iter().enumerate() {
            let next = self.pc(j + 1);
            let is_jump = matches!(
                self.env.insn(s.pc as usize),
                Some(Insn::Jump { .. } | Insn::Ja { .. } | Insn::MayGoto { .. })
            );
            let same_frame = steps.get(j + 1).is_none_or(|n| n.frame == s.frame);
            if is_jump && same_frame && next <= s.pc as usize {
                match counts.iter_mut().find(|c| c.0 == s.pc as usize) {
                    Some(c) => c.2 += 1,
                    None => counts.push((s.pc as usize, next, 1)),
                }
            }
        }
        let ran_out = if msg.starts_with("The sequence of ") {
            format!(
                "the {}-branch queue overflowed",
                crate::COMPLEXITY_LIMIT_JMP_SEQ
            )
        } else {
            format!(
                "the {}-instruction budget ran out",
                crate::COMPLEXITY_LIMIT_INSNS
            )
        };
        match counts.iter().max_by_key(|c| c.2) {
            Some(&(edge, head, times)) => {
                let step = steps.iter().rposition(|s| s.pc as usize == edge);
                // The path shows the last walk around the loop, up to the error.
                let previous =
                    step.and_then(|last| steps[..last].iter().rposition(|s| s.pc as usize == edge));
                let from = previous
                    .map_or(0, |p| p + 1)
                    .max(steps.len().saturating_sub(64));
                found.steps.extend(from..steps.len());
                let total = self.trace.visits.get(edge).copied().unwrap_or(0);
                self.note_at(
                    found,
                    step,
                    format!(
                        "the loop from insn {head} back from {} was walked {times} times on \
                         this path (its back-edge processed {total} times in all) before \
                         {ran_out}: the verifier walks a bounded loop once per iteration",
                        self.insn_words(edge)
                    ),
                );
            }
            None => {
                let (pc, times) = self
                    .trace
                    .visits
                    .iter()
                    .enumerate()
                    .max_by_key(|(_, v)| **v)
                    .map_or((0, 0), |(pc, v)| (pc, *v));
                let step = steps.iter().rposition(|s| s.pc as usize == pc);
                self.note_at(
                    found,
                    step,
                    format!(
                        "no loop on this path before {ran_out}: {} was processed {times} \
                         times, once per path through the branches before it",
                        self.insn_words(pc)
                    ),
                );
            }
        }
    }

    /// The steps that touched the registers followed (while they held the value that
    /// failed, or that moved into it), the steps the notes name, and the failing
    /// instruction; a long list keeps its start and its end.
    fn path(&self, found: &Found) -> (Vec<PathStep>, usize) {
        const HEAD: usize = 8;
        const TAIL: usize = 32;
        let frame = self.frame();
        let windows: Vec<(usize, usize, usize)> = found
            .regs
            .iter()
            .map(|&(reg, upto)| (reg, self.lineage_start(reg, upto), upto))
            .collect();
        let shows = |j: usize, reg: usize| {
            windows
                .iter()
                .any(|&(r, since, upto)| r == reg && since <= j && j < upto)
        };
        let touched: Vec<usize> = (0..self.failing_step())
            .filter(|&j| {
                found.steps.contains(&j)
                    || (self.trace.steps[j].frame as usize == frame
                        && self
                            .trace
                            .changes_of(j)
                            .iter()
                            .any(|c| shows(j, c.reg as usize)))
            })
            .collect();
        let tail_start = touched.len().saturating_sub(TAIL);
        let mut path: Vec<PathStep> = touched
            .iter()
            .enumerate()
            .filter(|(i, j)| *i < HEAD || *i >= tail_start || found.steps.contains(j))
            .map(|(_, &j)| self.path_step(j, found.steps.contains(&j), &shows))
            .collect();
        let pc = self.failure_pc();
        let here = self.failing_step();
        let regs: Vec<String> = found
            .regs
            .iter()
            .filter(|&&(_, upto)| upto == here)
            .map(|&(r, _)| self.reg_text(r, &self.trace.before(here, r)))
            .collect();
        path.push(PathStep {
            insn: pc,
            text: self.insn_text(pc),
            state: if regs.is_empty() {
                "error".to_owned()
            } else {
                format!("error with {}", regs.join(" "))
            },
            source: self.source(pc),
        });
        let shown = path.len() - 1;
        (path, touched.len().saturating_sub(shown))
    }

    /// The first step of the run of changes to `reg` before `upto` that kept the type it
    /// has at `upto` (where the value's story starts).
    fn lineage_start(&self, reg: usize, upto: usize) -> usize {
        let ty = self.trace.before(upto, reg).ty;
        let mut start = upto;
        let mut before = upto;
        while let Some(j) = self.last_change(reg, before) {
            let after = self.trace.change(j, reg).map(|r| r.ty);
            if after != Some(ty) {
                break;
            }
            start = j;
            before = j;
            if self.trace.before(j, reg).ty != ty {
                break;
            }
        }
        start
    }

    /// Step `j` with the registers it changed that `shows` keeps (every one for a step a
    /// note `named`, such as the last walk around a loop).
    fn path_step(&self, j: usize, named: bool, shows: &dyn Fn(usize, usize) -> bool) -> PathStep {
        let pc = self.pc(j);
        let parts: Vec<String> = self
            .trace
            .changes_of(j)
            .iter()
            .filter(|c| named || shows(j, c.reg as usize))
            .map(|c| self.reg_text(c.reg as usize, &c.after))
            .collect();
        let mut state = parts.join(" ");
        if let Some(Insn::Jump { off, .. }) = self.env.insn(pc) {
            let taken = self.pc(j + 1) == (pc as i64 + 1 + *off as i64) as usize;
            let word = if taken { "taken" } else { "not taken" };
            state = if state.is_empty() {
                word.to_owned()
            } else {
                format!("{word}: {state}")
            };
        }
        PathStep {
            insn: pc,
            text: self.insn_text(pc),
            state,
            source: self.source(pc),
        }
    }
}

/// Where a packet access ends, from the kernel's line (`invalid access to packet, off=23
/// size=1, ...`: 24).
fn access_end(lines: &[String]) -> Option<i64> {
    let line = lines
        .iter()
        .find(|l| l.starts_with("invalid access to packet"))?;
    let field = |name: &str| -> Option<i64> {
        let at = line.find(name)? + name.len();
        let digits: String = line[at..]
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '-')
            .collect();
        digits.parse().ok()
    };
    Some(field("off=")? + field("size=")?)
}

/// A scalar's bounds in words: `unbounded`, `any value up to 65535`, `possibly negative`.
fn bounds_words(r: &RegState) -> String {
    if r.umax_value == u64::MAX && r.smin_value == i64::MIN {
        "unbounded (any 64-bit value)".to_owned()
    } else if r.smin_value == i64::MIN {
        format!("without a lower bound (max {})", r.smax_value)
    } else if r.smin_value < 0 {
        format!("possibly negative (min {})", r.smin_value)
    } else {
        format!("anywhere in [{}, {}]", r.umin_value, r.umax_value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_are_found_as_words() {
        assert_eq!(
            first_register("R1 offset is outside of the packet"),
            Some(1)
        );
        assert_eq!(
            first_register("invalid access to packet, off=23 size=1, R10(id=0)"),
            Some(10)
        );
        assert_eq!(first_register("BPF_EXIT instruction in main prog"), None);
        assert_eq!(first_register("R11 is invalid"), None);
    }

    #[test]
    fn stack_offsets_are_read_from_the_message() {
        assert_eq!(
            stack_offset("invalid read from stack R2 off -16+0 size 8"),
            Some(-16)
        );
        assert_eq!(
            stack_offset("invalid indirect read from stack R1 off -32+4 size 4"),
            Some(-28)
        );
        assert_eq!(stack_offset("R1 offset is outside of the packet"), None);
    }
}
