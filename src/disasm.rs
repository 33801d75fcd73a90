//! `bpfemu disasm`: each program's loaded instructions in the layout of
//! `bpftool prog dump xlated` (`dump_xlated_plain` in bpftool's `xlated_dumper.c`), so the two
//! can be diffed: a `FUNC signature:` line where func_info starts a function, `; source` lines
//! from line_info found as bpftool's `bpf_prog_linfo__lfind` finds them, then `%4u: (op) text`.
//!
//! What bpftool shows as `map[id:N]` we show as `map[name:NAME]` (there are no map ids before
//! a kernel load); subprogram calls print `pc+N#NAME` where bpftool prints
//! `pc+N#bpf_prog_TAG_NAME`. An xlated dump is after the verifier's rewrites (helper calls
//! resolved to kernel functions, ctx accesses converted, dead code removed); this is before.

use crate::isa::disasm::{Symbols, insn_text_with};
use crate::isa::{CallTarget, Insn, LdImm64Kind};
use bpfemu_loader::btf::{Btf, BtfKind, Linkage, TypeId};
use bpfemu_loader::{Object, ProgramSpec, SourceLine};
use std::fmt::Write;

/// The text for every program of `obj` (or only `only`), blank-line separated; `None` when
/// `only` names no program.
pub fn render(obj: &Object, only: Option<&str>, kernel_btf: Option<&Btf>) -> Option<String> {
    let mut out = String::new();
    let chosen: Vec<&ProgramSpec> = obj
        .programs
        .iter()
        .filter(|p| only.is_none_or(|name| p.name == name))
        .collect();
    if chosen.is_empty() && only.is_some() {
        return None;
    }
    for (i, prog) in chosen.iter().enumerate() {
        if only.is_none() {
            if i > 0 {
                out.push('\n');
            }
            let _ = writeln!(out, "{} (section {}):", prog.name, prog.section);
        }
        out.push_str(&program(obj, prog, kernel_btf));
    }
    Some(out)
}

/// [`render`] of the xlated programs: each chosen program verified by bpfemu's verifier and
/// shown after the kernel's rewrites (`bpfemu disasm --xlated`, to diff with `bpftool prog
/// dump xlated`). Source lines and function signatures are left out: the rewrites move
/// instructions. A program the verifier rejects is an error naming it and the message.
pub fn render_xlated(
    obj: &Object,
    only: Option<&str>,
    kernel_btf: Option<&Btf>,
) -> Option<Result<String, String>> {
    use bpfemu_verifier::{Options, ProgramInput, verify};
    let mut xlated = obj.clone();
    xlated
        .programs
        .retain(|p| only.is_none_or(|name| p.name == name));
    for prog in &mut xlated.programs {
        let input = ProgramInput::new(obj, prog);
        let verdict = verify(&input, &Options::default());
        let Some(x) = verdict.xlated() else {
            let msg = verdict.rejection().map_or("", |r| r.message.as_str());
            return Some(Err(format!(
                "program {}: rejected by the verifier: {msg}",
                prog.name
            )));
        };
        prog.insns = x.insns.clone();
        prog.line_info.clear();
        prog.func_info.clear();
    }
    render(&xlated, only, kernel_btf).map(Ok)
}

/// Whether any program calls a kfunc (then names come from the kernel's BTF).
pub fn calls_kfuncs(obj: &Object) -> bool {
    obj.programs
        .iter()
        .flat_map(|p| &p.insns)
        .any(|i| i.code == 0x85 && i.src == 2)
}

/// One line of a program's listing, in `dump_xlated_plain`'s order.
pub enum Listed<'a> {
    /// A function starts (func_info): its BTF signature.
    Function(String),
    /// A source line starts (line_info, found as bpftool finds it).
    Source(&'a SourceLine),
    /// An instruction: its index, opcode and text.
    Insn { pc: usize, code: u8, text: String },
}

/// The lines of one program as `dump_xlated_plain` lays it out; `bpfemu verify --html` shows
/// the same instructions as `bpfemu disasm`.
pub fn listing<'a>(
    obj: &Object,
    prog: &'a ProgramSpec,
    kernel_btf: Option<&Btf>,
) -> Vec<Listed<'a>> {
    let syms = LoadedSymbols {
        obj,
        prog,
        kernel_btf,
        pc: std::cell::Cell::new(0),
    };
    let mut out = Vec::new();
    let mut func_info = prog.func_info.iter().peekable();
    let mut lines = LineCursor::new(&prog.line_info);
    let mut pc = 0;
    while pc < prog.insns.len() {
        if let Some(&&(at, type_id)) = func_info.peek()
            && at == pc
        {
            func_info.next();
            if let Some(sig) = obj.btf.as_ref().and_then(|b| signature(b, type_id)) {
                out.push(Listed::Function(sig));
            }
        }
        if let Some(line) = lines.find(pc) {
            out.push(Listed::Source(line));
        }
        syms.pc.set(pc);
        let code = prog.insns[pc].code;
        let (text, slots) = match Insn::decode(&prog.insns, pc) {
            Ok((insn, slots)) => (insn_text_with(&insn, &syms), slots),
            Err(_) => (rewritten_text(prog.insns[pc]), 1),
        };
        out.push(Listed::Insn { pc, code, text });
        pc += slots;
    }
    out
}

/// One program as `dump_xlated_plain` lays it out.
fn program(obj: &Object, prog: &ProgramSpec, kernel_btf: Option<&Btf>) -> String {
    let mut out = String::new();
    for line in listing(obj, prog, kernel_btf) {
        let _ = match line {
            Listed::Function(sig) => writeln!(out, "{sig}:"),
            Listed::Source(line) => writeln!(out, "; {}", line.line_text.trim_start()),
            Listed::Insn { pc, code, text } => writeln!(out, "{pc:>4}: ({code:02x}) {text}"),
        };
    }
    out
}

/// The text of an instruction only the verifier's rewrites make: the per-CPU address move of
/// an inlined `bpf_get_smp_processor_id`, and the scratch register `r11` (`BPF_REG_AX`) of
/// division guards.
fn rewritten_text(raw: crate::isa::RawInsn) -> String {
    if raw.code == 0xbf && raw.off == -1 {
        return format!("r{} = &(void __percpu *)(r{})", raw.dst, raw.src);
    }
    // r11 printed through a register the instruction does not use, then renamed.
    let stand_in = if raw.dst == 9 || raw.src == 9 { 8 } else { 9 };
    let swap = |r: u8| if r == 11 { stand_in } else { r };
    let renamed =
        crate::isa::RawInsn::new(raw.code, swap(raw.dst), swap(raw.src), raw.off, raw.imm);
    match Insn::decode(&[renamed], 0) {
        Ok((insn, _)) => {
            crate::isa::disasm::insn_text(&insn).replace(&format!("r{stand_in}"), "r11")
        }
        Err(_) => format!("unknown opcode {:02x}", raw.code),
    }
}

/// bpftool's use of `bpf_prog_linfo__lfind(linfo, insn, nr_skip)`: from the record after the
/// ones already printed, the last record at or before the instruction, if the next unprinted
/// one is not after it.
struct LineCursor<'a> {
    lines: &'a [SourceLine],
    skip: usize,
}

impl<'a> LineCursor<'a> {
    fn new(lines: &'a [SourceLine]) -> Self {
        LineCursor { lines, skip: 0 }
    }

    fn find(&mut self, pc: usize) -> Option<&'a SourceLine> {
        let rest = self.lines.get(self.skip..)?;
        if rest.first()?.insn > pc {
            return None;
        }
        let last = rest.iter().take_while(|l| l.insn <= pc).last()?;
        self.skip += 1;
        Some(last)
    }
}

/// Names for what the instructions point at, as bpftool's `print_imm` and `print_call` do.
struct LoadedSymbols<'a> {
    obj: &'a Object,
    prog: &'a ProgramSpec,
    kernel_btf: Option<&'a Btf>,
    /// The instruction being printed (calls are relative to it).
    pc: std::cell::Cell<usize>,
}

impl Symbols for LoadedSymbols<'_> {
    fn call_name(&self, insn: &Insn) -> Option<String> {
        match *insn {
            Insn::Call(CallTarget::Local(rel)) => {
                let target = self.pc.get() as i64 + 1 + i64::from(rel);
                let name = self
                    .prog
                    .functions
                    .iter()
                    .find(|(_, start)| *start as i64 == target)
                    .map(|(name, _)| name.as_str());
                Some(match name {
                    Some(name) => format!("{rel:+}#{name}"),
                    None => format!("{rel:+}"),
                })
            }
            Insn::Call(CallTarget::Kfunc { btf_id, .. }) => {
                let btf = self.kernel_btf?;
                let name = btf.name_of(u32::try_from(btf_id).ok()?)?;
                (!name.is_empty()).then(|| name.to_string())
            }
            _ => None,
        }
    }

    fn imm64(&self, insn: &Insn, _value: u64) -> Option<String> {
        let Insn::LdImm64 {
            kind,
            imm,
            next_imm,
            ..
        } = *insn
        else {
            return None;
        };
        let map_name = || {
            self.obj
                .maps
                .get(usize::try_from(imm).ok()?)
                .map(|m| m.name.clone())
        };
        match kind {
            LdImm64Kind::MapFd => Some(format!("map[name:{}]", map_name()?)),
            LdImm64Kind::MapValue => Some(format!("map[name:{}][0]+{next_imm}", map_name()?)),
            LdImm64Kind::Func => Some(format!("subprog[{imm:+}]")),
            _ => None,
        }
    }

    fn allow_ptr_leaks(&self) -> bool {
        true
    }
}

/// bpftool's `btf_dumper_type_only` for a FUNC: `int xdp_prog(struct xdp_md * ctx)`; `None`
/// where bpftool prints nothing.
pub fn signature(btf: &Btf, type_id: TypeId) -> Option<String> {
    let mut out = String::new();
    type_only(btf, type_id, &mut out, 0)?;
    Some(out)
}

const MAX_DEPTH: usize = 32;

fn type_only(btf: &Btf, id: TypeId, out: &mut String, depth: usize) -> Option<()> {
    if depth > MAX_DEPTH {
        return None;
    }
    if id == 0 {
        out.push_str("void ");
        return Some(());
    }
    let t = btf.get(id)?;
    match &t.kind {
        BtfKind::Int { .. } | BtfKind::Typedef { .. } | BtfKind::Float { .. } => {
            let _ = write!(out, "{} ", t.name);
        }
        BtfKind::Struct { .. } => {
            let _ = write!(out, "struct {} ", t.name);
        }
        BtfKind::Union { .. } => {
            let _ = write!(out, "union {} ", t.name);
        }
        BtfKind::Enum { .. } | BtfKind::Enum64 { .. } => {
            let _ = write!(out, "enum {} ", t.name);
        }
        BtfKind::Array { elem, len, .. } => {
            type_only(btf, *elem, out, depth + 1)?;
            let _ = write!(out, "[{len}]");
        }
        BtfKind::Ptr { ty } => {
            type_only(btf, *ty, out, depth + 1)?;
            out.push_str("* ");
        }
        BtfKind::Fwd { union } => {
            let _ = write!(
                out,
                "{} {} ",
                if *union { "union" } else { "struct" },
                t.name
            );
        }
        BtfKind::Volatile { ty } => qualified(btf, "volatile ", *ty, out, depth)?,
        BtfKind::Const { ty } => qualified(btf, "const ", *ty, out, depth)?,
        BtfKind::Restrict { ty } => qualified(btf, "restrict ", *ty, out, depth)?,
        BtfKind::FuncProto { .. } => func(btf, id, None, out, depth)?,
        BtfKind::Func { proto, .. } => func(btf, *proto, Some(&t.name), out, depth)?,
        BtfKind::Var { ty, linkage } => {
            if *linkage == Linkage::Static {
                out.push_str("static ");
            }
            type_only(btf, *ty, out, depth + 1)?;
            let _ = write!(out, " {}", t.name);
        }
        BtfKind::DataSec { .. } => {
            let _ = write!(out, "section (\"{}\") ", t.name);
        }
        _ => return None,
    }
    Some(())
}

fn qualified(btf: &Btf, qualifier: &str, ty: TypeId, out: &mut String, depth: usize) -> Option<()> {
    out.push_str(qualifier);
    type_only(btf, ty, out, depth + 1)
}

/// bpftool's `btf_dump_func`.
fn func(
    btf: &Btf,
    proto: TypeId,
    name: Option<&str>,
    out: &mut String,
    depth: usize,
) -> Option<()> {
    let BtfKind::FuncProto { ret, params } = &btf.get(proto)?.kind else {
        return None;
    };
    type_only(btf, *ret, out, depth + 1)?;
    let _ = write!(out, "{}(", name.unwrap_or(""));
    for (i, p) in params.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        if p.ty == 0 {
            out.push_str("...");
            continue;
        }
        type_only(btf, p.ty, out, depth + 1)?;
        if !p.name.is_empty() {
            out.push_str(&p.name);
        } else if out.ends_with(' ') {
            out.pop();
        }
    }
    out.push(')');
    Some(())
}
