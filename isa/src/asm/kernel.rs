//! The kernel's instruction syntax: what the verifier log and `bpftool prog dump xlated` print,
//! and what [`crate::disasm::insn_text`] produces, read back into instructions.
//!
//! One instruction per line, optionally behind the log's `N: (op) ` prefix; when the prefix is
//! there its opcode byte must match what the line assembles to, so a pasted log line cannot
//! silently mean something else. `;` starts a comment (bpftool's source-line annotations, and
//! the register states a level-2 log appends). Blank lines are skipped. For hand-written
//! programs, `name:` defines a label that `goto`, `gotol`, `may_goto`, `if ... goto` and
//! `call` accept in place of `pc+N`.
//!
//! Numbers are read as the kernel prints them, and the spelling picks the instruction where the
//! kernel's text does: `r1 = 5` (decimal) is the ALU move, `r1 = 0x5` (hex, how `ld_imm64`
//! prints) is `ld_imm64`; an `ll` suffix (`r1 = 5 ll`, the LLVM spelling) also selects
//! `ld_imm64`. A `call NAME#ID` is a helper call when NAME is a helper name or `unknown`, and a
//! kfunc call otherwise (the kernel prints `kernel-function` or the kfunc's BTF name).
//!
//! What the text cannot carry, and so does not come back (the kernel prints it this way by
//! design): the `src_reg` kind of an `ld_imm64` (map fds, map values, BTF ids, functions and
//! fd-array indexes all print as a bare value, and map pointers as `0x0` to unprivileged
//! readers), and the module BTF fd (`off`) of a kfunc call. These assemble as a plain 64-bit
//! constant and as a vmlinux kfunc (`off` 0).
//!
//! Every instruction is checked by decoding what it encodes to, so text that parses but names
//! no real instruction (`w0 = (s32)w1`, a 1-byte `atomic_fetch_add`) is an error.

use super::AsmError;
use super::labels::{Assembly, Target, TargetField};
use super::lex::{
    Literal, PResult, SyntaxError, blanks, column, expect, failure, identifier, keyword, literal,
    literal_in_range, signed_literal, strip_comment,
};
use crate::helpers::helper_id;
use crate::insn::{
    AluOp, AtomicOp, ByteOrder, CallTarget, Insn, JmpCond, LdImm64Kind, RawInsn, Reg, Size, Source,
    Width,
};
use nom::Parser;
use nom::branch::alt;
use nom::bytes::complete::{tag, take_while1};
use nom::character::complete::{char, digit1, hex_digit1, space0, space1};
use nom::combinator::{opt, value};
use nom::sequence::{delimited, preceded, terminated};

/// Assembles kernel-syntax text (verifier log, `bpftool prog dump xlated`, [`crate::disasm`]).
///
/// ```
/// use bpfemu_isa::asm::assemble_kernel;
///
/// let slots = assemble_kernel("0: (b7) r0 = 1\n1: (95) exit\n").unwrap();
/// assert_eq!(slots[0].to_u64(), 0x0000_0001_0000_00b7);
/// assert!(assemble_kernel("0: (b4) r0 = 1").is_err()); // (b4) would be w0 = 1
/// ```
pub fn assemble_kernel(src: &str) -> Result<Vec<RawInsn>, AsmError> {
    let mut assembly = Assembly::default();
    for (index, text) in src.lines().enumerate() {
        assemble_line(&mut assembly, index + 1, text)?;
    }
    assembly.finish()
}

/// A parsed instruction and, when it jumps to a label, the label and the field it patches.
struct Statement<'a> {
    insn: Insn,
    label: Option<(&'a str, TargetField)>,
}

impl From<Insn> for Statement<'_> {
    fn from(insn: Insn) -> Self {
        Statement { insn, label: None }
    }
}

/// What one line holds; every part is optional.
struct Line<'a> {
    label: Option<&'a str>,
    /// The opcode byte of an `N: (op) ` prefix and where it is written.
    opcode: Option<(u8, &'a str)>,
    statement: Option<(Statement<'a>, &'a str)>,
}

fn assemble_line(assembly: &mut Assembly, line: usize, text: &str) -> Result<(), AsmError> {
    let code = strip_comment(text, ';');
    let parsed = parse_line(code).map_err(|e| match e {
        nom::Err::Error(e) | nom::Err::Failure(e) => AsmError::from_syntax(line, text, e),
        nom::Err::Incomplete(_) => AsmError::new(line, 1, "incomplete line"),
    })?;
    if let Some(name) = parsed.label {
        assembly.define_label(name, line, column(text, name))?;
    }
    let Some((statement, at)) = parsed.statement else {
        return Ok(());
    };
    let error_at = |at: &str, message: String| AsmError::new(line, column(text, at), message);
    let slots = statement.insn.encode();
    if let Err(e) = Insn::decode(&slots, 0) {
        return Err(error_at(at, format!("not a valid instruction: {}", e.kind)));
    }
    if let Some((opcode, opcode_at)) = parsed.opcode
        && opcode != slots[0].code
    {
        return Err(error_at(
            opcode_at,
            format!(
                "opcode ({opcode:02x}) does not match the instruction, which is ({:02x})",
                slots[0].code
            ),
        ));
    }
    if let Some((name, field)) = statement.label {
        assembly.refer_to_label(name, field, line, column(text, name));
    }
    assembly.push(&slots);
    Ok(())
}

fn parse_line(code: &str) -> Result<Line<'_>, nom::Err<SyntaxError<'_>>> {
    let (rest, _) = space0(code)?;
    let (rest, opcode) = opt(log_prefix).parse(rest)?;
    let (rest, label) = opt(terminated(identifier, blanks(char(':')))).parse(rest)?;
    if rest.trim().is_empty() {
        return Ok(Line {
            label,
            opcode,
            statement: None,
        });
    }
    let statement_at = rest;
    let (rest, statement) = expect("an instruction", statement)(rest)?;
    let (rest, _) = space0(rest)?;
    if !rest.is_empty() {
        return Err(nom::Err::Failure(SyntaxError::new(
            rest,
            format!("unexpected `{}` after the instruction", rest.trim_end()),
        )));
    }
    Ok(Line {
        label,
        opcode,
        statement: Some((statement, statement_at)),
    })
}

/// `12: (b7) `: the instruction index (ignored) and the opcode byte.
fn log_prefix(input: &str) -> PResult<'_, (u8, &str)> {
    let (rest, _) = terminated(digit1, blanks(char(':'))).parse(input)?;
    let (rest, _) = char('(').parse(rest)?;
    let (after, hex) = expect("a hex opcode", hex_digit1)(rest)?;
    let Some(opcode) = u8::from_str_radix(hex, 16).ok().filter(|_| hex.len() <= 2) else {
        return failure(hex, format!("opcode `{hex}` is not one byte"));
    };
    let (after, _) = expect("`)`", char(')'))(after)?;
    let (after, _) = space0(after)?;
    Ok((after, (opcode, hex)))
}

fn statement(input: &str) -> PResult<'_, Statement<'_>> {
    alt((
        value(Insn::Exit, keyword("exit")).map(Statement::from),
        goto,
        call,
        conditional_jump,
        atomic_alu,
        store_release,
        store,
        assignment,
    ))
    .parse(input)
}

// ---------------------------------------------------------------------------------------------
// Operands

/// `rN`: a 64-bit register name.
fn reg64(input: &str) -> PResult<'_, Reg> {
    let (rest, (width, reg)) = register(input)?;
    if width != Width::W64 {
        return failure(input, "expected an `r` register here");
    }
    Ok((rest, reg))
}

/// `rN` or `wN`: a register and the operand width its name selects.
fn register(input: &str) -> PResult<'_, (Width, Reg)> {
    let (rest, width) =
        alt((value(Width::W64, char('r')), value(Width::W32, char('w')))).parse(input)?;
    let (rest, digits) = digit1(rest)?;
    if rest.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
        return Err(nom::Err::Error(SyntaxError::new(
            input,
            "expected a register",
        )));
    }
    let Some(reg) = digits.parse().ok().and_then(Reg::new) else {
        let name = &input[..input.len() - rest.len()];
        return failure(
            input,
            format!("invalid register `{name}`: registers are r0 to r10"),
        );
    };
    Ok((rest, (width, reg)))
}

/// A register of the same width as the destination.
fn register_of<'a>(width: Width) -> impl FnMut(&'a str) -> PResult<'a, Reg> {
    move |input| {
        let (rest, (w, reg)) = register(input)?;
        if w != width {
            return failure(input, "`r` and `w` registers mixed in one instruction");
        }
        Ok((rest, reg))
    }
}

/// A register of `width`, or an immediate.
fn source_of<'a>(width: Width) -> impl FnMut(&'a str) -> PResult<'a, Source> {
    move |input| alt((register_of(width).map(Source::Reg), imm32.map(Source::Imm))).parse(input)
}

fn imm32(input: &str) -> PResult<'_, i32> {
    literal_in_range("32-bit immediate", Literal::to_imm32)(input)
}

/// `+4`, `-8`: a signed 16-bit offset.
fn offset(input: &str) -> PResult<'_, i16> {
    let (rest, lit) = signed_literal(input)?;
    match lit.to_off16() {
        Some(off) => Ok((rest, off)),
        None => failure(input, "offset out of 16-bit range"),
    }
}

/// `u8`..`u64`, `s8`..`s32`: a memory access size and whether it sign-extends.
fn access_type(input: &str) -> PResult<'_, (Size, bool)> {
    alt((
        value((Size::B, false), keyword("u8")),
        value((Size::H, false), keyword("u16")),
        value((Size::W, false), keyword("u32")),
        value((Size::DW, false), keyword("u64")),
        value((Size::B, true), keyword("s8")),
        value((Size::H, true), keyword("s16")),
        value((Size::W, true), keyword("s32")),
    ))
    .parse(input)
}

/// `(u32 *)`.
fn pointer_type(input: &str) -> PResult<'_, (Size, bool)> {
    delimited(
        blanks(char('(')),
        expect("an access type like u32", access_type),
        (blanks(char('*')), expect("`)`", char(')'))),
    )
    .parse(input)
}

/// `(u32 *)` that must not be signed (every access but a plain load).
fn unsigned_pointer_type(input: &str) -> PResult<'_, Size> {
    let (rest, (size, signed)) = pointer_type(input)?;
    if signed {
        return failure(input, "only loads take a signed type");
    }
    Ok((rest, size))
}

/// `(r1 +4)`: a base register and offset (`+0` when left out).
fn address(input: &str) -> PResult<'_, (Reg, i16)> {
    let (rest, _) = blanks(char('(')).parse(input)?;
    let (rest, base) = expect("a base register", reg64)(rest)?;
    let (rest, _) = space0(rest)?;
    let (rest, off) = opt(offset).parse(rest)?;
    let (rest, _) = blanks(expect("`)`", char(')'))).parse(rest)?;
    Ok((rest, (base, off.unwrap_or(0))))
}

/// `pc+3` or a label: where a jump goes, range-checked for `field`.
fn target<'a>(field: TargetField) -> impl FnMut(&'a str) -> PResult<'a, Target<'a>> {
    move |input| {
        if let Ok((rest, lit)) = preceded(tag("pc"), signed_literal).parse(input) {
            let distance = match field {
                TargetField::Off => lit.to_off16().map(i32::from),
                TargetField::Imm => lit.to_imm32(),
            };
            return match distance {
                Some(distance) => Ok((rest, Target::Relative(distance))),
                None => failure(input, "jump offset out of range"),
            };
        }
        identifier.map(Target::Label).parse(input)
    }
}

/// Builds the statement for a jump: a relative distance goes in now, a label later.
fn jump_statement<'a>(
    target: Target<'a>,
    field: TargetField,
    build: impl FnOnce(i32) -> Insn,
) -> Statement<'a> {
    match target {
        Target::Relative(distance) => Statement::from(build(distance)),
        Target::Label(name) => Statement {
            insn: build(0),
            label: Some((name, field)),
        },
    }
}

// ---------------------------------------------------------------------------------------------
// Control flow

/// `goto pc+N`, `gotol pc+N`, `may_goto pc+N` (or a label).
fn goto(input: &str) -> PResult<'_, Statement<'_>> {
    #[derive(Clone, Copy)]
    enum Kind {
        Short,
        Long,
        MayGoto,
    }
    let (rest, kind) = alt((
        value(Kind::Long, keyword("gotol")),
        value(Kind::Short, keyword("goto")),
        value(Kind::MayGoto, keyword("may_goto")),
    ))
    .parse(input)?;
    let field = match kind {
        Kind::Long => TargetField::Imm,
        Kind::Short | Kind::MayGoto => TargetField::Off,
    };
    let (rest, to) =
        preceded(space1, expect("a jump target like pc+1", target(field))).parse(rest)?;
    let statement = jump_statement(to, field, |distance| match kind {
        Kind::Short => Insn::Ja {
            off: distance,
            long: false,
        },
        Kind::Long => Insn::Ja {
            off: distance,
            long: true,
        },
        Kind::MayGoto => Insn::MayGoto {
            off: distance as i16,
        },
    });
    Ok((rest, statement))
}

/// `call bpf_map_lookup_elem#1`, `call unknown#300`, `call kernel-function#42`, `call pc+4`,
/// or `call NAME`: a helper by name, else a local function at label NAME.
fn call(input: &str) -> PResult<'_, Statement<'_>> {
    let (rest, _) = terminated(keyword("call"), space1).parse(input)?;
    let named = (
        take_while1(|c: char| c != '#' && !c.is_whitespace()),
        preceded(char('#'), expect("a call id", imm32)),
    );
    let (rest, statement) = alt((
        named.map(|(name, id)| Statement::from(Insn::Call(named_call(name, id)))),
        expect("a call target", target(TargetField::Imm)).map(unnamed_call),
    ))
    .parse(rest)?;
    Ok((rest, statement))
}

/// `call pc+4`, or `call NAME` without an id: the helper of that name, else label NAME.
fn unnamed_call(to: Target<'_>) -> Statement<'_> {
    if let Target::Label(name) = to
        && let Some(id) = helper_id(name)
    {
        return Statement::from(Insn::Call(CallTarget::Helper(id)));
    }
    jump_statement(to, TargetField::Imm, |distance| {
        Insn::Call(CallTarget::Local(distance))
    })
}

/// A helper when the name is one (or the kernel's `unknown`), otherwise a kfunc by BTF id.
fn named_call(name: &str, id: i32) -> CallTarget {
    if name == "unknown" || helper_id(name).is_some() {
        CallTarget::Helper(id)
    } else {
        CallTarget::Kfunc { btf_id: id, off: 0 }
    }
}

/// `if r1 > r6 goto pc+31`, `if w1 s< 0x5 goto pc-2`.
fn conditional_jump(input: &str) -> PResult<'_, Statement<'_>> {
    let (rest, _) = terminated(keyword("if"), space1).parse(input)?;
    let (rest, (width, dst)) = expect("a register", register)(rest)?;
    let (rest, cond) = blanks(expect("a comparison like == or s<", jump_condition)).parse(rest)?;
    let (rest, src) = expect("a register or an immediate", source_of(width))(rest)?;
    let (rest, _) = blanks(expect("`goto`", keyword("goto"))).parse(rest)?;
    let (rest, to) = expect("a jump target like pc+1", target(TargetField::Off))(rest)?;
    let statement = jump_statement(to, TargetField::Off, |distance| Insn::Jump {
        width,
        cond,
        dst,
        src,
        off: distance as i16,
    });
    Ok((rest, statement))
}

fn jump_condition(input: &str) -> PResult<'_, JmpCond> {
    alt((
        value(JmpCond::Sge, tag("s>=")),
        value(JmpCond::Sle, tag("s<=")),
        value(JmpCond::Sgt, tag("s>")),
        value(JmpCond::Slt, tag("s<")),
        value(JmpCond::Eq, tag("==")),
        value(JmpCond::Ne, tag("!=")),
        value(JmpCond::Ge, tag(">=")),
        value(JmpCond::Le, tag("<=")),
        value(JmpCond::Gt, tag(">")),
        value(JmpCond::Lt, tag("<")),
        value(JmpCond::Set, tag("&")),
    ))
    .parse(input)
}

// ---------------------------------------------------------------------------------------------
// Stores and atomics that do not assign a register

/// `lock *(u64 *)(r0 +0) += r1` (also `|=`, `&=`, `^=`).
fn atomic_alu(input: &str) -> PResult<'_, Statement<'_>> {
    let (rest, _) = terminated(keyword("lock"), space0).parse(input)?;
    let (rest, _) = expect("`*`", char('*'))(rest)?;
    let (rest, size) = unsigned_pointer_type(rest)?;
    let (rest, (dst, off)) = expect("an address like (r1 +0)", address)(rest)?;
    let (rest, op) = blanks(expect(
        "+=, |=, &= or ^=",
        alt((
            value(AtomicOp::Add, tag("+=")),
            value(AtomicOp::Or, tag("|=")),
            value(AtomicOp::And, tag("&=")),
            value(AtomicOp::Xor, tag("^=")),
        )),
    ))
    .parse(rest)?;
    let (rest, src) = expect("a register", reg64)(rest)?;
    let insn = Insn::Atomic {
        size,
        op,
        dst,
        src,
        off,
    };
    Ok((rest, insn.into()))
}

/// `store_release((u16 *)(r10 -2), r1)`.
fn store_release(input: &str) -> PResult<'_, Statement<'_>> {
    let (rest, _) = terminated(keyword("store_release"), space0).parse(input)?;
    let (rest, _) = expect("`(`", char('('))(rest)?;
    let (rest, size) = unsigned_pointer_type(rest)?;
    let (rest, (dst, off)) = expect("an address like (r1 +0)", address)(rest)?;
    let (rest, _) = blanks(expect("`,`", char(','))).parse(rest)?;
    let (rest, src) = expect("a register", reg64)(rest)?;
    let (rest, _) = blanks(expect("`)`", char(')'))).parse(rest)?;
    let insn = Insn::Atomic {
        size,
        op: AtomicOp::StoreRelease,
        dst,
        src,
        off,
    };
    Ok((rest, insn.into()))
}

/// `*(u8 *)(r10 -8) = 1`, `*(u64 *)(r10 -8) = r1`.
fn store(input: &str) -> PResult<'_, Statement<'_>> {
    let (rest, _) = char('*').parse(input)?;
    let (rest, size) = unsigned_pointer_type(rest)?;
    let (rest, (dst, off)) = expect("an address like (r1 +0)", address)(rest)?;
    let (rest, _) = blanks(expect("`=`", char('='))).parse(rest)?;
    let (rest, src) = expect("a register or an immediate", source_of(Width::W64))(rest)?;
    let insn = match src {
        Source::Reg(src) => Insn::StoreReg {
            size,
            dst,
            src,
            off,
        },
        Source::Imm(imm) => Insn::Store {
            size,
            dst,
            off,
            imm,
        },
    };
    Ok((rest, insn.into()))
}

// ---------------------------------------------------------------------------------------------
// Assignments to a register

/// `rD OP= src` or `rD = expression`.
fn assignment(input: &str) -> PResult<'_, Statement<'_>> {
    let (rest, (width, dst)) = register(input)?;
    let (rest, _) = space0(rest)?;
    let (rest, insn) = alt((
        |i| compound_assignment(i, width, dst),
        preceded(
            terminated(char('='), space0),
            expect("an expression", |i| expression(i, width, dst)),
        ),
    ))
    .parse(rest)?;
    Ok((rest, insn.into()))
}

/// `r0 += 1`, `w1 s/= w2`, `r3 s>>= 4`.
fn compound_assignment(input: &str, width: Width, dst: Reg) -> PResult<'_, Insn> {
    let (rest, op) = terminated(alu_operator, space0).parse(input)?;
    let (rest, src) = expect("a register or an immediate", source_of(width))(rest)?;
    Ok((
        rest,
        Insn::Alu {
            width,
            op,
            dst,
            src,
        },
    ))
}

fn alu_operator(input: &str) -> PResult<'_, AluOp> {
    alt((
        value(AluOp::Arsh, tag("s>>=")),
        value(AluOp::SDiv, tag("s/=")),
        value(AluOp::SMod, tag("s%=")),
        value(AluOp::Lsh, tag("<<=")),
        value(AluOp::Rsh, tag(">>=")),
        value(AluOp::Add, tag("+=")),
        value(AluOp::Sub, tag("-=")),
        value(AluOp::Mul, tag("*=")),
        value(AluOp::Div, tag("/=")),
        value(AluOp::Or, tag("|=")),
        value(AluOp::And, tag("&=")),
        value(AluOp::Mod, tag("%=")),
        value(AluOp::Xor, tag("^=")),
    ))
    .parse(input)
}

/// The right-hand side of `dst = ...`.
fn expression(input: &str, width: Width, dst: Reg) -> PResult<'_, Insn> {
    alt((
        |i| negation(i, width, dst),
        |i| load(i, width, dst),
        |i| sign_extending_move(i, width, dst),
        |i| byte_swap(i, width, dst),
        |i| addr_space_cast(i, width, dst),
        |i| atomic_with_result(i, width, dst),
        |i| load_acquire(i, width, dst),
        register_of(width).map(move |src| Insn::Alu {
            width,
            op: AluOp::Mov,
            dst,
            src: Source::Reg(src),
        }),
        |i| constant(i, width, dst),
    ))
    .parse(input)
}

/// Fails at `at` unless the destination is a 64-bit (`r`) register.
fn require_r_register<'a>(
    at: &'a str,
    width: Width,
    what: &str,
) -> Result<(), nom::Err<SyntaxError<'a>>> {
    if width == Width::W64 {
        Ok(())
    } else {
        Err(nom::Err::Failure(SyntaxError::new(
            at,
            format!("{what} needs an `r` destination register"),
        )))
    }
}

/// Fails at `at` unless `found` is the destination register, as the syntax repeats it.
fn require_same<'a>(at: &'a str, found: Reg, dst: Reg) -> Result<(), nom::Err<SyntaxError<'a>>> {
    if found == dst {
        Ok(())
    } else {
        Err(nom::Err::Failure(SyntaxError::new(
            at,
            format!("expected {dst} here, as on the left-hand side"),
        )))
    }
}

/// `r0 = -r0`.
fn negation(input: &str, width: Width, dst: Reg) -> PResult<'_, Insn> {
    let (rest, _) = char('-').parse(input)?;
    let (after, src) = register_of(width)(rest)?;
    require_same(rest, src, dst)?;
    Ok((after, Insn::Neg { width, dst }))
}

/// `r0 = *(u32 *)(r1 +4)`, `r0 = *(s8 *)(r1 +2)`, `r0 = *(u16 *)skb[12]`,
/// `r0 = *(u16 *)skb[r7 + -2]`.
fn load(input: &str, width: Width, dst: Reg) -> PResult<'_, Insn> {
    let (rest, _) = char('*').parse(input)?;
    require_r_register(input, width, "a load")?;
    let (rest, (size, sign_extend)) = pointer_type(rest)?;
    let (rest, _) = space0(rest)?;
    if let Some(rest) = rest.strip_prefix("skb[") {
        return packet_load(input, rest, size, sign_extend, dst);
    }
    let (rest, (src, off)) = expect("an address like (r1 +0)", address)(rest)?;
    Ok((
        rest,
        Insn::Load {
            size,
            sign_extend,
            dst,
            src,
            off,
        },
    ))
}

/// The legacy packet loads, after `skb[`: `12]` (LD_ABS) or `r7 + -2]` (LD_IND).
fn packet_load<'a>(
    start: &'a str,
    input: &'a str,
    size: Size,
    sign_extend: bool,
    dst: Reg,
) -> PResult<'a, Insn> {
    if sign_extend || dst != Reg::R0 {
        return failure(start, "packet loads are written `r0 = *(uN *)skb[...]`");
    }
    let (rest, index) = opt(terminated(reg64, blanks(char('+')))).parse(input)?;
    let (rest, imm) = blanks(expect("an immediate", imm32)).parse(rest)?;
    let (rest, _) = expect("`]`", char(']'))(rest)?;
    let insn = match index {
        Some(src) => Insn::LdInd { size, src, imm },
        None => Insn::LdAbs { size, imm },
    };
    Ok((rest, insn))
}

/// `r0 = (s16)r1`, `w0 = (s8)w1`.
fn sign_extending_move(input: &str, width: Width, dst: Reg) -> PResult<'_, Insn> {
    let (rest, bits) = delimited(
        char('('),
        alt((
            value(8u8, tag("s8")),
            value(16u8, tag("s16")),
            value(32u8, tag("s32")),
        )),
        char(')'),
    )
    .parse(input)?;
    let (rest, src) = preceded(space0, expect("a register", register_of(width))).parse(rest)?;
    Ok((
        rest,
        Insn::MovSx {
            width,
            dst,
            src,
            bits,
        },
    ))
}

/// `r1 = be16 r1`, `r1 = le32 r1`, `r1 = bswap64 r1`.
fn byte_swap(input: &str, width: Width, dst: Reg) -> PResult<'_, Insn> {
    let (rest, order) = alt((
        value(ByteOrder::Swap, tag("bswap")),
        value(ByteOrder::ToBe, tag("be")),
        value(ByteOrder::ToLe, tag("le")),
    ))
    .parse(input)?;
    let (rest, bits) = alt((
        value(16u8, tag("16")),
        value(32u8, tag("32")),
        value(64u8, tag("64")),
    ))
    .parse(rest)?;
    require_r_register(input, width, "a byte swap")?;
    let (rest, _) = space1(rest)?;
    let (after, src) = expect("a register", reg64)(rest)?;
    require_same(rest, src, dst)?;
    Ok((after, Insn::Endian { order, bits, dst }))
}

/// `r1 = addr_space_cast(r2, 0, 1)`: destination and source address spaces.
fn addr_space_cast(input: &str, width: Width, dst: Reg) -> PResult<'_, Insn> {
    let (rest, _) = terminated(keyword("addr_space_cast"), blanks(char('('))).parse(input)?;
    require_r_register(input, width, "addr_space_cast")?;
    let (rest, src) = expect("a register", reg64)(rest)?;
    let address_space = |what| literal_in_range(what, Literal::to_u16);
    let (rest, to) = preceded(blanks(char(',')), address_space("address space")).parse(rest)?;
    let (rest, from) = preceded(blanks(char(',')), address_space("address space")).parse(rest)?;
    let (rest, _) = blanks(expect("`)`", char(')'))).parse(rest)?;
    let imm = ((u32::from(to) << 16) | u32::from(from)) as i32;
    Ok((rest, Insn::AddrSpaceCast { dst, src, imm }))
}

/// `r1 = atomic64_fetch_add((u64 *)(r0 +0), r1)`, `r2 = atomic_xchg((u32 *)(r1 +0), r2)`,
/// `r0 = atomic64_cmpxchg((u64 *)(r1 +0), r0, r2)`.
fn atomic_with_result(input: &str, width: Width, dst: Reg) -> PResult<'_, Insn> {
    let (rest, _) = tag("atomic").parse(input)?;
    require_r_register(input, width, "an atomic operation")?;
    let (rest, wide) = opt(tag("64")).map(|w| w.is_some()).parse(rest)?;
    let (rest, op) = preceded(
        char('_'),
        expect(
            "fetch_add, fetch_and, fetch_or, fetch_xor, xchg or cmpxchg",
            alt((
                value(AtomicOp::FetchAdd, keyword("fetch_add")),
                value(AtomicOp::FetchAnd, keyword("fetch_and")),
                value(AtomicOp::FetchOr, keyword("fetch_or")),
                value(AtomicOp::FetchXor, keyword("fetch_xor")),
                value(AtomicOp::Xchg, keyword("xchg")),
                value(AtomicOp::Cmpxchg, keyword("cmpxchg")),
            )),
        ),
    )
    .parse(rest)?;
    let (rest, _) = blanks(expect("`(`", char('('))).parse(rest)?;
    let type_at = rest;
    let (rest, size) = unsigned_pointer_type(rest)?;
    if wide != (size == Size::DW) {
        return failure(
            type_at,
            "atomic64_ goes with u64, atomic_ with a narrower type",
        );
    }
    let (rest, (base, off)) = expect("an address like (r1 +0)", address)(rest)?;
    let (rest, _) = blanks(expect("`,`", char(','))).parse(rest)?;
    let rest = if op == AtomicOp::Cmpxchg {
        require_same(rest, Reg::R0, dst)?;
        let (after, compared) = expect("r0", reg64)(rest)?;
        require_same(rest, compared, Reg::R0)?;
        blanks(expect("`,`", char(','))).parse(after)?.0
    } else {
        rest
    };
    let (after, src) = expect("a register", reg64)(rest)?;
    if op != AtomicOp::Cmpxchg {
        require_same(rest, src, dst)?;
    }
    let (after, _) = blanks(expect("`)`", char(')'))).parse(after)?;
    Ok((
        after,
        Insn::Atomic {
            size,
            op,
            dst: base,
            src,
            off,
        },
    ))
}

/// `r0 = load_acquire((u8 *)(r10 -1))`.
fn load_acquire(input: &str, width: Width, dst: Reg) -> PResult<'_, Insn> {
    let (rest, _) = terminated(keyword("load_acquire"), blanks(char('('))).parse(input)?;
    require_r_register(input, width, "load_acquire")?;
    let (rest, size) = unsigned_pointer_type(rest)?;
    let (rest, (base, off)) = expect("an address like (r1 +0)", address)(rest)?;
    let (rest, _) = blanks(expect("`)`", char(')'))).parse(rest)?;
    Ok((
        rest,
        Insn::Atomic {
            size,
            op: AtomicOp::LoadAcquire,
            dst,
            src: base,
            off,
        },
    ))
}

/// `r0 = 5` / `w0 = -1` (a move), `r1 = 0x1234` / `r1 = 5 ll` (`ld_imm64`).
fn constant(input: &str, width: Width, dst: Reg) -> PResult<'_, Insn> {
    let (rest, lit) = literal(input)?;
    let (rest, ll) = opt(preceded(space1, keyword("ll")))
        .map(|ll| ll.is_some())
        .parse(rest)?;
    if !(lit.hex || ll) {
        let Some(imm) = lit.to_imm32() else {
            return failure(
                input,
                "32-bit immediate out of range (write it in hex for ld_imm64)",
            );
        };
        let insn = Insn::Alu {
            width,
            op: AluOp::Mov,
            dst,
            src: Source::Imm(imm),
        };
        return Ok((rest, insn));
    }
    require_r_register(input, width, "ld_imm64")?;
    let Some(value) = lit.to_imm64() else {
        return failure(input, "64-bit immediate out of range");
    };
    let insn = Insn::LdImm64 {
        dst,
        kind: LdImm64Kind::Imm,
        imm: value as u32 as i32,
        next_imm: (value >> 32) as u32 as i32,
    };
    Ok((rest, insn))
}
