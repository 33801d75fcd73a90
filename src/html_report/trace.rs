//! What the verifier's log says about each instruction, read back from the log's own lines
//! (the kernel's format, `bpfemu_verifier::log`; bpfvv reads the same lines): how often the
//! walk visited an instruction, where it pruned (`safe`), which loop of the control-flow
//! graph it is in, and the register state after each visit; from the level-1 log, which is
//! the path to the error and nothing else, the path and the state the error was found in.
//!
//! The log prints the whole state only where a walk starts (a popped branch, a callee, a
//! global function) and, after every instruction, what the instruction touched; the state
//! beside an instruction is rebuilt from the two, as the kernel's `print_verifier_state`
//! would print it with every register scratched.

use std::collections::{BTreeMap, BTreeSet};

/// How many visits of one instruction keep their state: enough to see a loop's first
/// iterations, few enough that the report stays bounded by the program's size, not by how
/// long the walk was.
pub const KEPT_VISITS: usize = 8;

/// One frame's registers, stack slots and references as the log prints them (`R1=pkt(r=14)`,
/// `fp-8=mmmmmmmm`, `refs=1`), in the log's order: registers, then the stack, then the rest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct State {
    /// The frame these belong to (0: the program; 1 and up: called functions).
    pub frame: u32,
    pub entries: BTreeMap<Key, String>,
    /// The entries the last instruction read or wrote (the log prints those after it).
    pub touched: BTreeSet<Key>,
}

/// Where an entry sorts: `R0`..`R10` by number, stack slots from `fp-8` down, then the rest.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Key {
    Reg(u32),
    Stack(u32),
    Other(String),
}

impl Key {
    fn parse(name: &str) -> Key {
        if let Some(n) = name.strip_prefix('R').and_then(|n| n.parse().ok()) {
            return Key::Reg(n);
        }
        if let Some(n) = name.strip_prefix("fp-").and_then(|n| n.parse().ok()) {
            return Key::Stack(n);
        }
        Key::Other(name.to_owned())
    }

    /// The name as the log prints it.
    pub fn name(&self) -> String {
        match self {
            Key::Reg(n) => format!("R{n}"),
            Key::Stack(n) => format!("fp-{n}"),
            Key::Other(s) => s.clone(),
        }
    }
}

/// A state as one line of the log prints it: the frame and its `name=value` items.
#[derive(Debug, PartialEq, Eq)]
struct Printed {
    frame: u32,
    items: Vec<(Key, String)>,
}

/// Splits `R1=pkt(r=14) R2=scalar(var_off=(0x0; 0xff)) frame1: ...` at the spaces outside
/// parentheses (a value's `var_off=(0x0; 0xff)` holds one).
fn split_items(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, None);
    for (i, c) in text.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ' ' if depth <= 0 => {
                if let Some(s) = start.take() {
                    out.push(&text[s..i]);
                }
                continue;
            }
            _ => {}
        }
        start.get_or_insert(i);
    }
    if let Some(s) = start {
        out.push(&text[s..]);
    }
    out
}

/// Reads a printed state; `None` when `text` is not one (a message that happens to follow a
/// number and a colon).
fn parse_printed(text: &str) -> Option<Printed> {
    let mut printed = Printed {
        frame: 0,
        items: Vec::new(),
    };
    for item in split_items(text) {
        if let Some(n) = item.strip_prefix("frame").and_then(|f| f.strip_suffix(':')) {
            printed.frame = n.parse().ok()?;
            continue;
        }
        let (name, value) = item.split_once('=')?;
        let starts_like_state = name.starts_with('R') || name.starts_with("fp") || name == "refs";
        if printed.items.is_empty() && !starts_like_state {
            return None;
        }
        printed.items.push((Key::parse(name), value.to_owned()));
    }
    Some(printed)
}

/// The state of every frame on the current path, rebuilt line by line.
#[derive(Debug, Default)]
struct Frames {
    frames: Vec<State>,
    current: u32,
}

impl Frames {
    fn frame_mut(&mut self, frame: u32) -> &mut State {
        let n = frame as usize;
        while self.frames.len() <= n {
            let frame = self.frames.len() as u32;
            self.frames.push(State {
                frame,
                ..State::default()
            });
        }
        &mut self.frames[n]
    }

    /// A whole frame printed: it replaces what was known, and frames above it are gone.
    fn reset(&mut self, printed: Printed) {
        self.frames.truncate(printed.frame as usize + 1);
        let frame = self.frame_mut(printed.frame);
        frame.entries = printed.items.into_iter().collect();
        frame.touched.clear();
        self.current = printed.frame;
    }

    /// What one instruction touched: those entries change; references are printed whenever
    /// the path holds any, so their absence means none.
    fn apply(&mut self, printed: Printed) {
        let frame = self.frame_mut(printed.frame);
        frame.entries.remove(&Key::Other("refs".into()));
        for (key, value) in printed.items {
            frame.touched.insert(key.clone());
            frame.entries.insert(key, value);
        }
        self.current = printed.frame;
    }

    /// A new instruction: nothing touched yet.
    fn untouch(&mut self) {
        self.frames.iter_mut().for_each(|f| f.touched.clear());
    }

    /// A helper or kfunc call leaves R0-R5 unknown until the log prints R0.
    fn clobber_caller_saved(&mut self) {
        let frame = self.frame_mut(self.current);
        frame.entries.retain(|k, _| !matches!(k, Key::Reg(0..=5)));
    }

    fn current(&self) -> State {
        self.frames
            .get(self.current as usize)
            .cloned()
            .unwrap_or_default()
    }
}

/// What a log line is.
enum Line<'a> {
    /// `N: (op) text`, with what follows the text on the same line.
    Insn {
        pc: usize,
        rest: &'a str,
    },
    /// `N: <state>` or `from X to N: <state>`: the state before instruction N.
    State {
        from: bool,
        printed: Printed,
    },
    /// `N: safe` or `from X to N: safe`: pruned there.
    Safe {
        pc: usize,
    },
    /// A loop number in the `Live regs before insn:` listing.
    Scc {
        pc: usize,
        scc: u32,
    },
    /// `caller:`, `callee:`, `returning from callee:`, `to caller at N:`: a whole frame
    /// follows on the next line.
    FrameHeader,
    /// `Validating NAME() func#N...`: a global function's own walk starts.
    NewWalk,
    Other(&'a str),
}

/// `N: ` at the start of `line`: the number and the rest.
fn numbered(line: &str) -> Option<(usize, &str)> {
    let (n, rest) = line.split_once(": ")?;
    Some((n.parse().ok()?, rest))
}

/// `  1  12: 0......78. (61) ...`: the listing's loop number and instruction.
fn scc_listing(line: &str) -> Option<(usize, u32)> {
    let words: Vec<&str> = line.split_whitespace().take(3).collect();
    let (scc, pc, live) = match words.as_slice() {
        [scc, pc, live] if pc.ends_with(':') => (scc.parse().ok()?, *pc, *live),
        [pc, live, _] => (0, *pc, *live),
        _ => return None,
    };
    let pc = pc.strip_suffix(':')?.parse().ok()?;
    let live_ok = live.len() == 10 && live.bytes().all(|b| b == b'.' || b.is_ascii_digit());
    live_ok.then_some((pc, scc))
}

fn classify<'a>(
    line: &'a str,
    in_listing: bool,
    insn_text: &dyn Fn(usize) -> Option<String>,
) -> Line<'a> {
    if in_listing && let Some((pc, scc)) = scc_listing(line) {
        return Line::Scc { pc, scc };
    }
    if let Some(rest) = line.strip_prefix("from ") {
        // `from X to N: ...`
        let to = rest.split_once(" to ").and_then(|(_, to)| numbered(to));
        if let Some((pc, tail)) = to {
            if tail.starts_with("safe") {
                return Line::Safe { pc };
            }
            if let Some(printed) = parse_printed(tail) {
                return Line::State {
                    from: true,
                    printed,
                };
            }
        }
        return Line::Other(line);
    }
    if matches!(line, "caller:" | "callee:" | "returning from callee:")
        || line.starts_with("to caller at ")
    {
        return Line::FrameHeader;
    }
    if line.starts_with("Validating ") {
        return Line::NewWalk;
    }
    let Some((pc, tail)) = numbered(line) else {
        return Line::Other(line);
    };
    if tail == "safe" {
        return Line::Safe { pc };
    }
    if tail.starts_with('(')
        && let Some(expected) = insn_text(pc)
        && let Some(rest) = line.strip_prefix(expected.as_str())
    {
        return Line::Insn { pc, rest };
    }
    match parse_printed(tail) {
        Some(printed) => Line::State {
            from: false,
            printed,
        },
        None => Line::Other(line),
    }
}

/// What a reader of the log is told, in the log's order.
pub trait Sink {
    /// The walk reached `pc` in `before`.
    fn insn(&mut self, pc: usize, before: &State);
    /// The state after the last instruction reached.
    fn after(&mut self, pc: usize, state: &State);
    /// The walk stopped at `pc`: an earlier state there covers this one.
    fn safe(&mut self, pc: usize);
    /// `pc` is in loop `scc` of the control-flow graph.
    fn scc(&mut self, pc: usize, scc: u32);
    /// Any other line (messages, the error, the statistics).
    fn other(&mut self, line: &str);
}

/// Reads `log` line by line into `sink`. `insn_text` gives the instruction line the log
/// prints for an index (`12: (71) r1 = *(u8 *)(r2 +0)`) and `is_helper_call` whether the
/// instruction calls a helper or kfunc (which clobbers R0-R5).
pub fn read(
    log: &str,
    insn_text: &dyn Fn(usize) -> Option<String>,
    is_helper_call: &dyn Fn(usize) -> bool,
    sink: &mut dyn Sink,
) {
    let mut frames = Frames::default();
    // The instruction whose state-after is still being printed.
    let mut pending: Option<usize> = None;
    let mut previous_was_insn = false;
    let mut frame_follows = false;
    let mut in_listing = false;
    let flush = |pending: &mut Option<usize>, frames: &Frames, sink: &mut dyn Sink| {
        if let Some(pc) = pending.take() {
            sink.after(pc, &frames.current());
        }
    };
    for line in log.lines() {
        if line == "Live regs before insn:" {
            in_listing = true;
            continue;
        }
        if frame_follows {
            frame_follows = false;
            if let Some(printed) = line.strip_prefix(' ').and_then(parse_printed) {
                frames.reset(printed);
                previous_was_insn = false;
                continue;
            }
        }
        let kind = classify(line, in_listing, insn_text);
        if !matches!(kind, Line::Scc { .. }) {
            in_listing = false;
        }
        let was_insn = std::mem::replace(&mut previous_was_insn, false);
        match kind {
            Line::Scc { pc, scc } => sink.scc(pc, scc),
            Line::Insn { pc, rest } => {
                flush(&mut pending, &frames, sink);
                sink.insn(pc, &frames.current());
                frames.untouch();
                if is_helper_call(pc) {
                    frames.clobber_caller_saved();
                }
                pending = Some(pc);
                previous_was_insn = true;
                let rest = rest.trim_start();
                if let Some(delta) = rest.strip_prefix(';') {
                    if let Some(printed) = parse_printed(delta.trim_start()) {
                        frames.apply(printed);
                    }
                } else if let Some(printed) = numbered(rest).and_then(|(_, s)| parse_printed(s)) {
                    // Level 1: the log went back to where this instruction pushed the branch
                    // being popped, and the popped state follows on the same line.
                    frames.reset(printed);
                    flush(&mut pending, &frames, sink);
                }
            }
            Line::State {
                from: true,
                printed,
                ..
            } => {
                flush(&mut pending, &frames, sink);
                frames.reset(printed);
            }
            Line::State { printed, .. } if was_insn => {
                // Level 1: a popped branch's whole state, right under the instruction that
                // pushed it. What an instruction changed joins its line, or stands on its own
                // only after other lines (precision, calls): never right under it.
                frames.reset(printed);
                flush(&mut pending, &frames, sink);
            }
            Line::State { printed, .. } => frames.apply(printed),
            Line::Safe { pc } => {
                flush(&mut pending, &frames, sink);
                sink.safe(pc);
            }
            Line::FrameHeader => frame_follows = true,
            Line::NewWalk => {
                flush(&mut pending, &frames, sink);
                frames = Frames::default();
                sink.other(line);
            }
            Line::Other(text) => sink.other(text),
        }
    }
    flush(&mut pending, &frames, sink);
}

/// Per instruction, what the level-2 log says.
#[derive(Clone, Debug, Default)]
pub struct InsnTrace {
    /// Times the walk reached it (each counts as a processed instruction).
    pub visits: u64,
    /// Times the walk stopped there because an earlier state covered the current one (each
    /// counts as a processed instruction too).
    pub pruned: u64,
    /// Its loop (strongly connected component) in the level-2 listing; 0 outside loops.
    pub scc: u32,
    /// The state after each of its first [`KEPT_VISITS`] visits.
    pub states: Vec<State>,
}

/// The level-2 log read per instruction.
#[derive(Debug, Default)]
pub struct Trace {
    pub insns: Vec<InsnTrace>,
}

impl Trace {
    /// Processed instructions as the log shows them: every visit and every pruned arrival.
    pub fn processed(&self) -> u64 {
        self.insns.iter().map(|i| i.visits + i.pruned).sum()
    }
}

impl Sink for Trace {
    fn insn(&mut self, pc: usize, _before: &State) {
        if let Some(i) = self.insns.get_mut(pc) {
            i.visits += 1;
        }
    }

    fn after(&mut self, pc: usize, state: &State) {
        if let Some(i) = self.insns.get_mut(pc)
            && i.states.len() < KEPT_VISITS
        {
            i.states.push(state.clone());
        }
    }

    fn safe(&mut self, pc: usize) {
        if let Some(i) = self.insns.get_mut(pc) {
            i.pruned += 1;
        }
    }

    fn scc(&mut self, pc: usize, scc: u32) {
        if let Some(i) = self.insns.get_mut(pc) {
            i.scc = scc;
        }
    }

    fn other(&mut self, _line: &str) {}
}

/// The path to the error, from the level-1 log.
#[derive(Debug, Default)]
pub struct Path {
    /// Per instruction: times the path went through it (more than once in a loop).
    pub visits: Vec<u64>,
    /// Per instruction: the state after the path's last pass through it.
    pub after: Vec<Option<State>>,
    /// The last instruction the path reached, with the state it was reached in and the lines
    /// the log printed after it (the error, then the statistics).
    pub last: Option<(usize, State)>,
    pub lines_after_last: Vec<String>,
}

impl Path {
    pub fn on_path(&self, pc: usize) -> bool {
        self.visits.get(pc).is_some_and(|&v| v > 0)
    }

    /// The log's lines after the last instruction up to the statistics: the kernel's error
    /// and the lines that explain it.
    pub fn error_lines(&self) -> impl Iterator<Item = &str> {
        self.lines_after_last
            .iter()
            .map(String::as_str)
            .take_while(|l| !l.starts_with("processed "))
            .filter(|l| !l.is_empty() && !l.starts_with("; "))
    }
}

impl Sink for Path {
    fn insn(&mut self, pc: usize, before: &State) {
        if let Some(v) = self.visits.get_mut(pc) {
            *v += 1;
        }
        self.last = Some((pc, before.clone()));
        self.lines_after_last.clear();
    }

    fn after(&mut self, pc: usize, state: &State) {
        if let Some(slot) = self.after.get_mut(pc) {
            *slot = Some(state.clone());
        }
    }

    fn safe(&mut self, _pc: usize) {}

    fn scc(&mut self, _pc: usize, _scc: u32) {}

    fn other(&mut self, line: &str) {
        // Bounded: what follows the last instruction is the error and the statistics.
        if self.lines_after_last.len() < 64 {
            self.lines_after_last.push(line.to_owned());
        }
    }
}

/// Reads the level-2 log of a program of `len` instructions.
pub fn trace(
    log: &str,
    len: usize,
    insn_text: &dyn Fn(usize) -> Option<String>,
    is_helper_call: &dyn Fn(usize) -> bool,
) -> Trace {
    let mut t = Trace {
        insns: vec![InsnTrace::default(); len],
    };
    read(log, insn_text, is_helper_call, &mut t);
    t
}

/// Reads the level-1 log (the path to the error) of a program of `len` instructions.
pub fn path(
    log: &str,
    len: usize,
    insn_text: &dyn Fn(usize) -> Option<String>,
    is_helper_call: &dyn Fn(usize) -> bool,
) -> Path {
    let mut p = Path {
        visits: vec![0; len],
        after: vec![None; len],
        ..Path::default()
    };
    read(log, insn_text, is_helper_call, &mut p);
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_of<'a>(lines: &'a [(usize, &'static str)]) -> impl Fn(usize) -> Option<String> + 'a {
        move |pc| {
            lines
                .iter()
                .find(|(p, _)| *p == pc)
                .map(|(p, t)| format!("{p}: {t}"))
        }
    }

    fn show(s: &State) -> String {
        let items: Vec<String> = s
            .entries
            .iter()
            .map(|(k, v)| format!("{}={v}", k.name()))
            .collect();
        items.join(" ")
    }

    #[test]
    fn items_split_outside_parentheses() {
        assert_eq!(
            split_items("R1=scalar(smin=0,var_off=(0x0; 0xff)) R2=fp[0]-16  refs=1"),
            [
                "R1=scalar(smin=0,var_off=(0x0; 0xff))",
                "R2=fp[0]-16",
                "refs=1"
            ]
        );
        assert!(parse_printed("invalid access to packet").is_none());
        assert!(parse_printed("safe").is_none());
        let p = parse_printed("frame1: R0=0 fp-8=mmmmmmmm").expect("a state");
        assert_eq!(p.frame, 1);
        assert_eq!(p.items[1], (Key::Stack(8), "mmmmmmmm".into()));
    }

    #[test]
    fn listing_lines_give_loops() {
        assert_eq!(
            scc_listing("  1  12: 0......78. (61) r1 = *(u32 *)(r0 +0)"),
            Some((12, 1))
        );
        assert_eq!(
            scc_listing("     22: ........8. (b4) w6 = 1"),
            Some((22, 0))
        );
        assert_eq!(scc_listing("0: R1=ctx() R10=fp0"), None);
    }

    /// A level-2 log: deltas join the instruction lines or stand on their own after
    /// precision lines; a popped branch's whole state replaces the path's; a helper call
    /// clobbers R1-R5; `safe` lines count.
    #[test]
    fn level2_states_are_rebuilt_from_deltas_and_whole_states() {
        let insns = [
            (0, "(bf) r6 = r1"),
            (1, "(85) call bpf_get_prandom_u32#7"),
            (2, "(15) if r0 == 0x0 goto pc+1"),
            (3, "(b7) r0 = 1"),
            (4, "(95) exit"),
        ];
        let log = "\
0: R1=ctx() R10=fp0
0: (bf) r6 = r1                       ; R1=ctx() R6=ctx()
1: (85) call bpf_get_prandom_u32#7    ; R0=scalar()
2: (15) if r0 == 0x0 goto pc+1
mark_precise: frame0: last_idx 2 first_idx 0 subseq_idx -1
3: R0=scalar(smin=1,var_off=(0x0; 0xff))
3: (b7) r0 = 1                        ; R0=1
4: (95) exit

from 2 to 4: R0=0 R6=ctx() R10=fp0
4: safe
processed 6 insns (limit 1000000) max_states_per_insn 0 total_states 1 peak_states 1 mark_read 0
";
        let texts = text_of(&insns);
        let t = trace(log, 5, &texts, &|pc| pc == 1);
        let visits: Vec<u64> = t.insns.iter().map(|i| i.visits).collect();
        assert_eq!(visits, [1, 1, 1, 1, 1]);
        assert_eq!(t.insns[4].pruned, 1);
        assert_eq!(t.processed(), 6);
        assert_eq!(show(&t.insns[0].states[0]), "R1=ctx() R6=ctx() R10=fp0");
        // The call left R1 unknown; R0 is the helper's.
        assert_eq!(show(&t.insns[1].states[0]), "R0=scalar() R6=ctx() R10=fp0");
        assert_eq!(
            show(&t.insns[2].states[0]),
            "R0=scalar(smin=1,var_off=(0x0; 0xff)) R6=ctx() R10=fp0"
        );
        assert_eq!(show(&t.insns[3].states[0]), "R0=1 R6=ctx() R10=fp0");
        let touched: Vec<Key> = t.insns[0].states[0].touched.iter().cloned().collect();
        assert_eq!(touched, [Key::Reg(1), Key::Reg(6)]);
        assert!(t.insns[4].states.is_empty() || t.insns[4].states[0].touched.is_empty());
    }

    /// A level-1 log: the path, its popped state written on the jump's line or under it, and
    /// the error lines after the last instruction.
    #[test]
    fn level1_path_takes_popped_states_whole() {
        let insns = [
            (0, "(b7) r2 = 5"),
            (1, "(15) if r1 == 0x0 goto pc+1"),
            (3, "(71) r0 = *(u8 *)(r1 +0)"),
        ];
        let log = "\
0: R1=ctx() R10=fp0
0: (b7) r2 = 5                        ; R2=5
1: (15) if r1 == 0x0 goto pc+1
3: R1=map_value_or_null(id=1,ks=4,vs=8) R10=fp0
3: (71) r0 = *(u8 *)(r1 +0)
R1 invalid mem access 'map_value_or_null'
processed 3 insns (limit 1000000) max_states_per_insn 0 total_states 0 peak_states 0 mark_read 0
";
        let texts = text_of(&insns);
        let p = path(log, 4, &texts, &|_| false);
        assert_eq!(p.visits, [1, 1, 0, 1]);
        let (pc, before) = p.last.clone().expect("a last instruction");
        assert_eq!(pc, 3);
        // R2 was set on the path before the branch, but the popped state has no R2.
        assert_eq!(
            show(&before),
            "R1=map_value_or_null(id=1,ks=4,vs=8) R10=fp0"
        );
        assert_eq!(
            p.error_lines().collect::<Vec<_>>(),
            ["R1 invalid mem access 'map_value_or_null'"]
        );
        // The popped state on the jump's line, or under a jump line that has its own changes.
        for variant in [
            log.replace("pc+1\n3: R1", "pc+1 3: R1"),
            log.replace("pc+1\n", "pc+1     ; R1=ctx()\n"),
        ] {
            let p = path(&variant, 4, &texts, &|_| false);
            assert_eq!(p.visits, [1, 1, 0, 1], "{variant}");
            assert_eq!(
                show(&p.last.expect("last").1),
                "R1=map_value_or_null(id=1,ks=4,vs=8) R10=fp0",
                "{variant}"
            );
        }
    }

    /// A call into a function: the callee's frame, then the caller's again on return.
    #[test]
    fn frames_follow_calls_and_returns() {
        let insns = [
            (0, "(85) call pc+1"),
            (1, "(95) exit"),
            (2, "(b7) r0 = 0"),
            (3, "(95) exit"),
        ];
        let log = "\
0: R1=ctx() R10=fp0
0: (85) call pc+1
caller:
 R10=fp0
callee:
 frame1: R1=ctx() R10=fp0
2: frame1: R1=ctx() R10=fp0
2: (b7) r0 = 0                        ; frame1: R0=0
3: (95) exit
returning from callee:
 frame1: R0=0 R1=ctx() R10=fp0
to caller at 1:
 R0=0 R10=fp0
1: (95) exit
";
        let texts = text_of(&insns);
        let t = trace(log, 4, &texts, &|_| false);
        assert_eq!(t.processed(), 4);
        assert_eq!(t.insns[2].states[0].frame, 1);
        assert_eq!(show(&t.insns[2].states[0]), "R0=0 R1=ctx() R10=fp0");
        assert_eq!(t.insns[3].states[0].frame, 0);
        assert_eq!(show(&t.insns[3].states[0]), "R0=0 R10=fp0");
    }
}
