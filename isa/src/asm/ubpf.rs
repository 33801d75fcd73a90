//! The uBPF assembly dialect, as the bpf_conformance suite writes its programs.
//!
//! One instruction per line: a mnemonic, then operands separated by commas or blanks.
//! Registers are `%r0`..`%r10`, memory operands `[%rN+off]`, numbers decimal or `0x` hex,
//! jump targets a label or `+N`/`-N`. `#` starts a comment anywhere; `name:` defines a label;
//! the first `exit` instruction also defines the label `exit`.
//!
//! Mnemonics: ALU `add sub mul div sdiv or and lsh rsh mod smod xor mov arsh neg` (a `32`
//! suffix selects the 32-bit class), `movsx{8,16,32}{32,64}` (source bits, then class width),
//! `le`/`be`/`swap`/`bswap` `{16,32,64}`, loads `ldx{b,h,w,dw}` and sign-extending
//! `ldxs{b,h,w}`, stores `st{b,h,w,dw}` (immediate) and `stx{b,h,w,dw}` (register), `lddw`
//! (64-bit immediate), `ja`, `ja32` (the long jump, offset in imm), the conditional jumps
//! `jeq jgt jge jset jne jsgt jsge jlt jle jslt jsle` (and `32` forms), `call`, `exit`, and
//! `lock [fetch] add|and|or|xor|xchg|cmpxchg[32] [%rN+off], %rM`.
//!
//! `call` takes a helper id (`call 5`, `call helper 5`), a helper name (`call
//! bpf_map_lookup_elem`), a register (`call %r2`, the uBPF register call, opcode 0x8d, which
//! Linux does not have), a local function (`call local label`) or a kernel function by BTF id
//! (`call runtime 42`).
//!
//! Immediates are range-checked instead of silently truncated: a decimal must fit i32, a hex
//! number u32 (`0xffffffff` is -1); offsets likewise i16 / 0xffff; `lddw` takes any 64-bit value.
//! Instructions are encoded as written, without checking that the kernel would accept them:
//! the conformance suite also tests how a VM rejects odd encodings.

use super::AsmError;
use super::labels::{Assembly, Target, TargetField};
use super::lex::{
    Literal, PResult, SyntaxError, column, expect, identifier, literal, out_of_range_message,
    signed_literal, strip_comment,
};
use crate::helpers::helper_id;
use crate::insn::RawInsn;
use crate::opcode::*;
use nom::Parser;
use nom::bytes::complete::take_while;
use nom::character::complete::{char, space0};
use nom::combinator::{opt, recognize};
use nom::sequence::{pair, terminated};

/// Assembles a program in the uBPF dialect of the bpf_conformance suite.
///
/// ```
/// use bpfemu_isa::asm::assemble_ubpf;
///
/// let slots = assemble_ubpf("mov32 %r0, 1\nja +0 # no-op\nexit").unwrap();
/// assert_eq!(slots[0].to_u64(), 0x0000_0001_0000_00b4);
/// assert_eq!(slots.len(), 3);
/// ```
pub fn assemble_ubpf(src: &str) -> Result<Vec<RawInsn>, AsmError> {
    let mut assembly = Assembly::default();
    for (index, text) in src.lines().enumerate() {
        assemble_line(&mut assembly, index + 1, text)?;
    }
    assembly.finish()
}

fn assemble_line(assembly: &mut Assembly, line: usize, text: &str) -> Result<(), AsmError> {
    let syntax_error = |e: SyntaxError<'_>| AsmError::from_syntax(line, text, e);
    let code = strip_comment(text, '#');
    let (label, instruction) = parse_line(code).map_err(|e| match e {
        nom::Err::Error(e) | nom::Err::Failure(e) => syntax_error(e),
        nom::Err::Incomplete(_) => AsmError::new(line, 1, "incomplete line"),
    })?;
    if let Some(name) = label {
        assembly.define_label(name, line, column(text, name))?;
    }
    let Some(instruction) = instruction else {
        return Ok(());
    };
    if instruction.mnemonic == "exit" {
        assembly.define_implicit_label("exit");
    }
    let encoded = encode(&instruction).map_err(syntax_error)?;
    if let Some((name, field)) = encoded.label {
        assembly.refer_to_label(name, field, line, column(text, name));
    }
    assembly.push(&encoded.slots);
    Ok(())
}

/// One instruction as written: the mnemonic and its operands, each with its position.
struct Instruction<'a> {
    mnemonic: &'a str,
    operands: Vec<Operand<'a>>,
}

/// An operand and the text it was parsed from (for error positions).
#[derive(Clone, Copy)]
struct Operand<'a> {
    text: &'a str,
    kind: OperandKind<'a>,
}

#[derive(Clone, Copy)]
enum OperandKind<'a> {
    /// `%r1`, still unchecked (`%r50` is reported when it is used).
    Register(&'a str),
    /// `[%r1+8]`: the base register and the signed offset with its text.
    Memory {
        base: &'a str,
        offset: Option<(Literal, &'a str)>,
    },
    Number(Literal),
    /// A bare word: a label, `fetch`, an atomic operation, a call mode or a helper name.
    Word(&'a str),
}

type Parsed<'a> = (Option<&'a str>, Option<Instruction<'a>>);

/// `[label:] [mnemonic operand, operand...]`.
fn parse_line(code: &str) -> Result<Parsed<'_>, nom::Err<SyntaxError<'_>>> {
    let (rest, _) = space0(code)?;
    let (rest, label) = opt(terminated(identifier, char(':'))).parse(rest)?;
    let (rest, _) = space0(rest)?;
    if rest.is_empty() {
        return Ok((label, None));
    }
    let (rest, mnemonic) = expect("a mnemonic", identifier)(rest)?;
    let (_, operands) = operand_list(rest)?;
    Ok((label, Some(Instruction { mnemonic, operands })))
}

/// Operands up to the end of the line, separated by a comma and/or blanks.
fn operand_list(mut input: &str) -> PResult<'_, Vec<Operand<'_>>> {
    let mut operands = Vec::new();
    loop {
        let (rest, _) = space0(input)?;
        if rest.is_empty() {
            return Ok((rest, operands));
        }
        let rest = if operands.is_empty() {
            rest
        } else {
            opt(pair(char(','), space0)).parse(rest)?.0
        };
        let (rest, operand) = expect("an operand", operand)(rest)?;
        operands.push(operand);
        input = rest;
    }
}

fn operand(input: &str) -> PResult<'_, Operand<'_>> {
    let (rest, kind) = nom::branch::alt((
        register_text.map(OperandKind::Register),
        memory,
        literal.map(OperandKind::Number),
        identifier.map(OperandKind::Word),
    ))
    .parse(input)?;
    let text = &input[..input.len() - rest.len()];
    Ok((rest, Operand { text, kind }))
}

/// `%` and the name after it; whether it names a register is checked where it is used.
fn register_text(input: &str) -> PResult<'_, &str> {
    recognize(pair(
        char('%'),
        take_while(|c: char| c.is_ascii_alphanumeric()),
    ))
    .parse(input)
}

/// `[%rN]`, `[%rN+off]`, `[%rN-off]`.
fn memory(input: &str) -> PResult<'_, OperandKind<'_>> {
    let (rest, _) = char('[').parse(input)?;
    let (rest, _) = space0(rest)?;
    let (rest, base) = expect("a base register", register_text)(rest)?;
    let (rest, _) = space0(rest)?;
    let before_offset = rest;
    let (rest, offset) = opt(signed_literal).parse(rest)?;
    let offset_text = &before_offset[..before_offset.len() - rest.len()];
    let offset = offset.map(|lit| (lit, offset_text));
    let (rest, _) = space0(rest)?;
    let (rest, _) = expect("`]`", char(']'))(rest)?;
    Ok((rest, OperandKind::Memory { base, offset }))
}

/// The slots of one instruction and, when it jumps to a label, the label and the field.
struct Encoded<'a> {
    slots: Vec<RawInsn>,
    label: Option<(&'a str, TargetField)>,
}

impl Encoded<'_> {
    fn one(raw: RawInsn) -> Self {
        Encoded {
            slots: vec![raw],
            label: None,
        }
    }
}

type Encoding<'a> = Result<Encoded<'a>, SyntaxError<'a>>;

/// What a mnemonic assembles to and which operands it takes.
#[derive(Clone, Copy, Debug)]
enum Form {
    /// `op dst, src|imm`; `off` distinguishes sdiv/smod.
    Alu {
        class: u8,
        op: u8,
        off: i16,
    },
    Neg {
        class: u8,
    },
    MovSx {
        class: u8,
        bits: i16,
    },
    /// Byte order: full opcode and width.
    Endian {
        code: u8,
        bits: i32,
    },
    Load {
        code: u8,
    },
    StoreImm {
        code: u8,
    },
    StoreReg {
        code: u8,
    },
    Lddw,
    Ja,
    Ja32,
    CondJump {
        class: u8,
        op: u8,
    },
    Call,
    Exit,
    Lock,
}

impl Form {
    /// How the instruction is written, for operand-count errors.
    fn usage(self) -> &'static str {
        match self {
            Form::Alu { .. } => "OP %rD, %rS|imm",
            Form::Neg { .. } | Form::Endian { .. } => "OP %rD",
            Form::MovSx { .. } => "OP %rD, %rS",
            Form::Load { .. } => "OP %rD, [%rS+off]",
            Form::StoreImm { .. } => "OP [%rD+off], imm",
            Form::StoreReg { .. } => "OP [%rD+off], %rS",
            Form::Lddw => "lddw %rD, imm64",
            Form::Ja | Form::Ja32 => "OP label|+off",
            Form::CondJump { .. } => "OP %rD, %rS|imm, label|+off",
            Form::Call => "call [helper|local|runtime] target",
            Form::Exit => "exit",
            Form::Lock => "lock [fetch] add|and|or|xor|xchg|cmpxchg[32] [%rD+off], %rS",
        }
    }

    /// The fixed number of operands; `None` for `call` and `lock`, whose operand lists vary
    /// and are checked where they are encoded.
    fn operand_count(self) -> Option<usize> {
        match self {
            Form::Call | Form::Lock => None,
            Form::Exit => Some(0),
            Form::Neg { .. } | Form::Endian { .. } | Form::Ja | Form::Ja32 => Some(1),
            Form::CondJump { .. } => Some(3),
            _ => Some(2),
        }
    }
}

fn form_of(mnemonic: &str) -> Option<Form> {
    fixed_form(mnemonic)
        .or_else(|| memory_form(mnemonic))
        .or_else(|| endian_form(mnemonic))
        .or_else(|| movsx_form(mnemonic))
        .or_else(|| sized_form(mnemonic))
}

fn fixed_form(mnemonic: &str) -> Option<Form> {
    Some(match mnemonic {
        "lddw" => Form::Lddw,
        "ja" => Form::Ja,
        "ja32" => Form::Ja32,
        "call" => Form::Call,
        "exit" => Form::Exit,
        "lock" => Form::Lock,
        _ => return None,
    })
}

fn size_code(suffix: &str) -> Option<u8> {
    Some(match suffix {
        "b" => BPF_B,
        "h" => BPF_H,
        "w" => BPF_W,
        "dw" => BPF_DW,
        _ => return None,
    })
}

/// `ldx*`, `ldxs*`, `stx*`, `st*`.
fn memory_form(mnemonic: &str) -> Option<Form> {
    if let Some(suffix) = mnemonic.strip_prefix("ldxs") {
        return size_code(suffix)
            .filter(|&size| size != BPF_DW)
            .map(|size| Form::Load {
                code: BPF_LDX | BPF_MEMSX | size,
            });
    }
    if let Some(size) = mnemonic.strip_prefix("ldx").and_then(size_code) {
        return Some(Form::Load {
            code: BPF_LDX | BPF_MEM | size,
        });
    }
    if let Some(size) = mnemonic.strip_prefix("stx").and_then(size_code) {
        return Some(Form::StoreReg {
            code: BPF_STX | BPF_MEM | size,
        });
    }
    let size = mnemonic.strip_prefix("st").and_then(size_code)?;
    Some(Form::StoreImm {
        code: BPF_ST | BPF_MEM | size,
    })
}

/// `le16`, `be32`, `swap64`, `bswap16`...
fn endian_form(mnemonic: &str) -> Option<Form> {
    let (code, bits) = [
        ("le", BPF_ALU | BPF_END | BPF_TO_LE),
        ("be", BPF_ALU | BPF_END | BPF_TO_BE),
        ("bswap", BPF_ALU64 | BPF_END | BPF_TO_LE),
        ("swap", BPF_ALU64 | BPF_END | BPF_TO_LE),
    ]
    .into_iter()
    .find_map(|(prefix, code)| mnemonic.strip_prefix(prefix).map(|bits| (code, bits)))?;
    let bits = match bits {
        "16" => 16,
        "32" => 32,
        "64" => 64,
        _ => return None,
    };
    Some(Form::Endian { code, bits })
}

/// `movsx832`: sign-extend the low 8 bits into a 32-bit result; `movsx3264` and so on.
fn movsx_form(mnemonic: &str) -> Option<Form> {
    let (class, bits) = match mnemonic.strip_prefix("movsx")? {
        "832" => (BPF_ALU, 8),
        "1632" => (BPF_ALU, 16),
        "864" => (BPF_ALU64, 8),
        "1664" => (BPF_ALU64, 16),
        "3264" => (BPF_ALU64, 32),
        _ => return None,
    };
    Some(Form::MovSx { class, bits })
}

/// ALU and conditional-jump mnemonics, 64-bit by default, 32-bit with a `32` suffix.
fn sized_form(mnemonic: &str) -> Option<Form> {
    let (base, narrow) = match mnemonic.strip_suffix("32") {
        Some(base) => (base, true),
        None => (mnemonic, false),
    };
    let alu_class = if narrow { BPF_ALU } else { BPF_ALU64 };
    let jmp_class = if narrow { BPF_JMP32 } else { BPF_JMP };
    if base == "neg" {
        return Some(Form::Neg { class: alu_class });
    }
    if let Some((op, off)) = alu_op(base) {
        return Some(Form::Alu {
            class: alu_class,
            op,
            off,
        });
    }
    jump_op(base).map(|op| Form::CondJump {
        class: jmp_class,
        op,
    })
}

fn alu_op(name: &str) -> Option<(u8, i16)> {
    Some(match name {
        "add" => (BPF_ADD, 0),
        "sub" => (BPF_SUB, 0),
        "mul" => (BPF_MUL, 0),
        "div" => (BPF_DIV, 0),
        "sdiv" => (BPF_DIV, 1),
        "or" => (BPF_OR, 0),
        "and" => (BPF_AND, 0),
        "lsh" => (BPF_LSH, 0),
        "rsh" => (BPF_RSH, 0),
        "mod" => (BPF_MOD, 0),
        "smod" => (BPF_MOD, 1),
        "xor" => (BPF_XOR, 0),
        "mov" => (BPF_MOV, 0),
        "arsh" => (BPF_ARSH, 0),
        _ => return None,
    })
}

fn jump_op(name: &str) -> Option<u8> {
    Some(match name {
        "jeq" => BPF_JEQ,
        "jgt" => BPF_JGT,
        "jge" => BPF_JGE,
        "jset" => BPF_JSET,
        "jne" => BPF_JNE,
        "jsgt" => BPF_JSGT,
        "jsge" => BPF_JSGE,
        "jlt" => BPF_JLT,
        "jle" => BPF_JLE,
        "jslt" => BPF_JSLT,
        "jsle" => BPF_JSLE,
        _ => return None,
    })
}

fn encode<'a>(instruction: &Instruction<'a>) -> Encoding<'a> {
    let mnemonic = instruction.mnemonic;
    let Some(form) = form_of(mnemonic) else {
        return Err(SyntaxError::new(
            mnemonic,
            format!("unknown mnemonic `{mnemonic}`"),
        ));
    };
    let ops = &instruction.operands[..];
    if form.operand_count().is_some_and(|count| count != ops.len()) {
        return Err(wrong_operand_count(mnemonic, form, ops.len()));
    }
    match form {
        Form::Alu { class, op, off } => encode_alu(class, op, off, ops),
        Form::Neg { class } => Ok(Encoded::one(RawInsn::new(
            class | BPF_NEG,
            register(&ops[0])?,
            0,
            0,
            0,
        ))),
        Form::MovSx { class, bits } => Ok(Encoded::one(RawInsn::new(
            class | BPF_MOV | BPF_X,
            register(&ops[0])?,
            register(&ops[1])?,
            bits,
            0,
        ))),
        Form::Endian { code, bits } => Ok(Encoded::one(RawInsn::new(
            code,
            register(&ops[0])?,
            0,
            0,
            bits,
        ))),
        Form::Load { code } => {
            let dst = register(&ops[0])?;
            let (src, off) = memory_operand(&ops[1])?;
            Ok(Encoded::one(RawInsn::new(code, dst, src, off, 0)))
        }
        Form::StoreImm { code } => {
            let (dst, off) = memory_operand(&ops[0])?;
            let imm = imm32(&ops[1])?;
            Ok(Encoded::one(RawInsn::new(code, dst, 0, off, imm)))
        }
        Form::StoreReg { code } => {
            let (dst, off) = memory_operand(&ops[0])?;
            let src = register(&ops[1])?;
            Ok(Encoded::one(RawInsn::new(code, dst, src, off, 0)))
        }
        Form::Lddw => encode_lddw(ops),
        Form::Ja => jump_to(
            RawInsn::new(BPF_JMP | BPF_JA, 0, 0, 0, 0),
            &ops[0],
            TargetField::Off,
        ),
        Form::Ja32 => jump_to(
            RawInsn::new(BPF_JMP32 | BPF_JA, 0, 0, 0, 0),
            &ops[0],
            TargetField::Imm,
        ),
        Form::CondJump { class, op } => encode_cond_jump(class | op, ops),
        Form::Call => encode_call(mnemonic, ops),
        Form::Exit => Ok(Encoded::one(RawInsn::new(BPF_JMP | BPF_EXIT, 0, 0, 0, 0))),
        Form::Lock => encode_lock(mnemonic, ops),
    }
}

fn wrong_operand_count<'a>(mnemonic: &'a str, form: Form, found: usize) -> SyntaxError<'a> {
    let usage = form.usage().replace("OP", mnemonic);
    SyntaxError::new(
        mnemonic,
        format!("wrong number of operands for `{mnemonic}`: found {found}, expected `{usage}`"),
    )
}

fn encode_alu<'a>(class: u8, op: u8, off: i16, ops: &[Operand<'a>]) -> Encoding<'a> {
    let dst = register(&ops[0])?;
    let raw = match ops[1].kind {
        OperandKind::Register(_) => {
            RawInsn::new(class | op | BPF_X, dst, register(&ops[1])?, off, 0)
        }
        _ => RawInsn::new(class | op | BPF_K, dst, 0, off, imm32(&ops[1])?),
    };
    Ok(Encoded::one(raw))
}

fn encode_lddw<'a>(ops: &[Operand<'a>]) -> Encoding<'a> {
    let dst = register(&ops[0])?;
    let OperandKind::Number(lit) = ops[1].kind else {
        return Err(expected("a 64-bit immediate", &ops[1]));
    };
    let value = lit
        .to_imm64()
        .ok_or_else(|| out_of_range(&ops[1], "64-bit immediate"))?;
    Ok(Encoded {
        slots: vec![
            RawInsn::new(BPF_LD | BPF_IMM | BPF_DW, dst, 0, 0, value as u32 as i32),
            RawInsn::new(0, 0, 0, 0, (value >> 32) as u32 as i32),
        ],
        label: None,
    })
}

fn encode_cond_jump<'a>(code: u8, ops: &[Operand<'a>]) -> Encoding<'a> {
    let dst = register(&ops[0])?;
    let raw = match ops[1].kind {
        OperandKind::Register(_) => RawInsn::new(code | BPF_X, dst, register(&ops[1])?, 0, 0),
        _ => RawInsn::new(code | BPF_K, dst, 0, 0, imm32(&ops[1])?),
    };
    jump_to(raw, &ops[2], TargetField::Off)
}

/// `raw` with its target (`field`) set from a relative operand or left to a label fixup.
fn jump_to<'a>(mut raw: RawInsn, target: &Operand<'a>, field: TargetField) -> Encoding<'a> {
    match jump_target(target, field)? {
        Target::Label(name) => Ok(Encoded {
            slots: vec![raw],
            label: Some((name, field)),
        }),
        Target::Relative(distance) => {
            match field {
                TargetField::Off => raw.off = distance as i16,
                TargetField::Imm => raw.imm = distance,
            }
            Ok(Encoded::one(raw))
        }
    }
}

fn jump_target<'a>(
    operand: &Operand<'a>,
    field: TargetField,
) -> Result<Target<'a>, SyntaxError<'a>> {
    match operand.kind {
        OperandKind::Word(name) => Ok(Target::Label(name)),
        OperandKind::Number(lit) => {
            let distance = match field {
                TargetField::Off => lit.to_off16().map(i32::from),
                TargetField::Imm => lit.to_imm32(),
            };
            distance
                .map(Target::Relative)
                .ok_or_else(|| out_of_range(operand, "jump offset"))
        }
        _ => Err(expected("a label or a relative offset like +2", operand)),
    }
}

/// `call N`, `call NAME`, `call %rN`, `call helper N|%rN`, `call local L`, `call runtime N`.
fn encode_call<'a>(mnemonic: &'a str, ops: &[Operand<'a>]) -> Encoding<'a> {
    let call = BPF_JMP | BPF_CALL;
    match ops {
        [target] => encode_helper_call(target),
        [mode, target] => match mode.kind {
            OperandKind::Word("helper") => encode_helper_call(target),
            OperandKind::Word("local") => jump_to(
                RawInsn::new(call, 0, BPF_PSEUDO_CALL, 0, 0),
                target,
                TargetField::Imm,
            ),
            OperandKind::Word("runtime") => Ok(Encoded::one(RawInsn::new(
                call,
                0,
                BPF_PSEUDO_KFUNC_CALL,
                0,
                imm32(target)?,
            ))),
            _ => Err(expected("a call mode: helper, local or runtime", mode)),
        },
        _ => Err(wrong_operand_count(mnemonic, Form::Call, ops.len())),
    }
}

fn encode_helper_call<'a>(target: &Operand<'a>) -> Encoding<'a> {
    let call = BPF_JMP | BPF_CALL;
    let raw = match target.kind {
        OperandKind::Register(_) => RawInsn::new(call | BPF_X, register(target)?, 0, 0, 0),
        OperandKind::Word(name) => {
            let id = helper_id(name)
                .ok_or_else(|| SyntaxError::new(target.text, format!("unknown helper `{name}`")))?;
            RawInsn::new(call, 0, 0, 0, id)
        }
        _ => RawInsn::new(call, 0, 0, 0, imm32(target)?),
    };
    Ok(Encoded::one(raw))
}

/// `lock [fetch] OP[32] [%rD+off], %rS`.
fn encode_lock<'a>(mnemonic: &'a str, ops: &[Operand<'a>]) -> Encoding<'a> {
    let (fetch, rest) = match ops.split_first() {
        Some((first, rest)) if matches!(first.kind, OperandKind::Word("fetch")) => (true, rest),
        _ => (false, ops),
    };
    let [op, mem, src] = rest else {
        return Err(wrong_operand_count(mnemonic, Form::Lock, ops.len()));
    };
    let OperandKind::Word(name) = op.kind else {
        return Err(expected("an atomic operation", op));
    };
    let (base, size) = match name.strip_suffix("32") {
        Some(base) => (base, BPF_W),
        None => (name, BPF_DW),
    };
    let fetch_bit = if fetch { BPF_FETCH } else { 0 };
    let imm = match base {
        "add" => BPF_ADD as i32 | fetch_bit,
        "and" => BPF_AND as i32 | fetch_bit,
        "or" => BPF_OR as i32 | fetch_bit,
        "xor" => BPF_XOR as i32 | fetch_bit,
        "xchg" => BPF_XCHG,
        "cmpxchg" => BPF_CMPXCHG,
        _ => {
            return Err(SyntaxError::new(
                op.text,
                format!("unknown atomic operation `{name}`"),
            ));
        }
    };
    let (dst, off) = memory_operand(mem)?;
    let src = register(src)?;
    Ok(Encoded::one(RawInsn::new(
        BPF_STX | BPF_ATOMIC | size,
        dst,
        src,
        off,
        imm,
    )))
}

fn expected<'a>(what: &str, operand: &Operand<'a>) -> SyntaxError<'a> {
    SyntaxError::new(
        operand.text,
        format!("expected {what}, found `{}`", operand.text),
    )
}

fn out_of_range<'a>(operand: &Operand<'a>, what: &str) -> SyntaxError<'a> {
    SyntaxError::new(operand.text, out_of_range_message(what, operand.text))
}

/// The number of a `%rN` register, r0 to r10.
fn register<'a>(operand: &Operand<'a>) -> Result<u8, SyntaxError<'a>> {
    let OperandKind::Register(text) = operand.kind else {
        return Err(expected("a register like %r1", operand));
    };
    register_number(text)
}

fn register_number(text: &str) -> Result<u8, SyntaxError<'_>> {
    text.strip_prefix("%r")
        .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
        .and_then(|n| n.parse::<u8>().ok())
        .filter(|&n| n <= 10)
        .ok_or_else(|| {
            SyntaxError::new(
                text,
                format!("invalid register `{text}`: registers are %r0 to %r10"),
            )
        })
}

/// `[%rN+off]`: the register and the offset (0 when absent).
fn memory_operand<'a>(operand: &Operand<'a>) -> Result<(u8, i16), SyntaxError<'a>> {
    let OperandKind::Memory { base, offset } = operand.kind else {
        return Err(expected("a memory operand like [%r1+8]", operand));
    };
    let reg = register_number(base)?;
    let off = match offset {
        None => 0,
        Some((lit, text)) => lit
            .to_off16()
            .ok_or_else(|| SyntaxError::new(text, out_of_range_message("offset", text)))?,
    };
    Ok((reg, off))
}

fn imm32<'a>(operand: &Operand<'a>) -> Result<i32, SyntaxError<'a>> {
    let OperandKind::Number(lit) = operand.kind else {
        return Err(expected("an immediate", operand));
    };
    lit.to_imm32()
        .ok_or_else(|| out_of_range(operand, "32-bit immediate"))
}
