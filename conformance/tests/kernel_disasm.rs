//! Our disassembler against the running kernel's: programs built with our encoder, covering
//! every instruction form, are loaded with a level-2 verifier log, and every `N: (op) text`
//! line the kernel prints must equal our `log_line` for that pc.
//!
//! Root sees kernel addresses in the log (map pointers, ksyms), which no disassembler can know;
//! those lines are checked for shape here and checked exactly by a second load from a thread
//! without CAP_SYS_ADMIN and CAP_PERFMON, where the kernel hides them.

use bpfemu_isa::disasm::{Symbols, insn_text_with};
use bpfemu_isa::{
    AluOp, AtomicOp, ByteOrder, CallTarget, Insn, JmpCond, LdImm64Kind, Program, RawInsn, Reg,
    Size, Source, Width,
};
use bpfemu_kernel::{self as kernel, FuncInfo, LoadOptions, MapSpec};
use std::collections::{BTreeMap, HashMap};
use std::os::fd::{AsRawFd, OwnedFd};

// ---------------------------------------------------------------------------------------------
// Building programs

fn r(n: u8) -> Reg {
    Reg::new(n).expect("register")
}

fn mov(dst: u8, imm: i32) -> Insn {
    Insn::Alu {
        width: Width::W64,
        op: AluOp::Mov,
        dst: r(dst),
        src: Source::Imm(imm),
    }
}

fn mov_reg(dst: u8, src: u8) -> Insn {
    Insn::Alu {
        width: Width::W64,
        op: AluOp::Mov,
        dst: r(dst),
        src: Source::Reg(r(src)),
    }
}

fn add(dst: u8, imm: i32) -> Insn {
    Insn::Alu {
        width: Width::W64,
        op: AluOp::Add,
        dst: r(dst),
        src: Source::Imm(imm),
    }
}

fn ldx(size: Size, dst: u8, src: u8, off: i16) -> Insn {
    Insn::Load {
        size,
        sign_extend: false,
        dst: r(dst),
        src: r(src),
        off,
    }
}

fn ld64(dst: u8, kind: LdImm64Kind, imm: i32, next_imm: i32) -> Insn {
    Insn::LdImm64 {
        dst: r(dst),
        kind,
        imm,
        next_imm,
    }
}

fn helper(id: i32) -> Insn {
    Insn::Call(CallTarget::Helper(id))
}

/// One element of a program under construction: an instruction, a label, or an instruction
/// whose pc-relative offset points at a label.
enum Item {
    I(Insn),
    Label(&'static str),
    To(&'static str, Box<dyn Fn(i32) -> Insn>),
}

use Item::{I, Label};

/// An instruction built from the offset to `label`.
fn to(label: &'static str, make: impl Fn(i32) -> Insn + 'static) -> Item {
    Item::To(label, Box::new(make))
}

/// Lays the items out and resolves label offsets (relative to the next slot, as in the ISA).
fn assemble(items: Vec<Item>) -> Vec<Insn> {
    let mut labels = HashMap::new();
    let mut pc = 0usize;
    for item in &items {
        match item {
            I(insn) => pc += insn.slots(),
            Item::To(_, make) => pc += make(0).slots(),
            Label(name) => {
                assert!(labels.insert(*name, pc).is_none(), "label {name} twice");
            }
        }
    }
    let mut out = Vec::new();
    let mut pc = 0usize;
    for item in items {
        match item {
            I(insn) => {
                pc += insn.slots();
                out.push(insn);
            }
            Item::To(label, make) => {
                let target = labels[label] as i64;
                let insn = make((target - pc as i64 - 1) as i32);
                pc += insn.slots();
                out.push(insn);
            }
            Label(_) => {}
        }
    }
    out
}

fn jump_to(width: Width, cond: JmpCond, dst: u8, src: Source) -> impl Fn(i32) -> Insn {
    move |off| Insn::Jump {
        width,
        cond,
        dst: r(dst),
        src,
        off: off as i16,
    }
}

const ALL_ALU: [AluOp; 14] = AluOp::ALL;

const ALL_COND: [JmpCond; 11] = JmpCond::ALL;

const ALL_ATOMIC: [AtomicOp; 10] = [
    AtomicOp::Add,
    AtomicOp::Or,
    AtomicOp::And,
    AtomicOp::Xor,
    AtomicOp::FetchAdd,
    AtomicOp::FetchOr,
    AtomicOp::FetchAnd,
    AtomicOp::FetchXor,
    AtomicOp::Xchg,
    AtomicOp::Cmpxchg,
];

const SIZES: [Size; 4] = [Size::B, Size::H, Size::W, Size::DW];

/// XDP_PASS and exit.
fn pass() -> Vec<Item> {
    vec![I(mov(0, 2)), I(Insn::Exit)]
}

/// Every ALU form: both widths, both sources, signed division, neg, movsx, byte swaps.
fn alu_program() -> Vec<Insn> {
    let mut p = vec![
        mov_reg(6, 1),
        ldx(Size::W, 1, 6, 12), // ingress_ifindex: an unknown scalar
        ldx(Size::W, 2, 6, 16), // rx_queue_index
    ];
    for width in [Width::W64, Width::W32] {
        for (i, op) in ALL_ALU.into_iter().enumerate() {
            // Shifts need an in-range amount; division by a zero constant is rejected.
            let imm = match op {
                AluOp::Lsh | AluOp::Rsh | AluOp::Arsh => 5,
                _ if i % 2 == 0 => -3,
                _ => 7,
            };
            let dst = r(1);
            p.push(Insn::Alu {
                width,
                op,
                dst,
                src: Source::Imm(imm),
            });
            p.push(Insn::Alu {
                width,
                op,
                dst,
                src: Source::Reg(r(2)),
            });
        }
        p.push(Insn::Neg { width, dst: r(1) });
    }
    for (width, bits) in [
        (Width::W64, 8),
        (Width::W64, 16),
        (Width::W64, 32),
        (Width::W32, 8),
        (Width::W32, 16),
    ] {
        p.push(Insn::MovSx {
            width,
            dst: r(3),
            src: r(1),
            bits,
        });
    }
    for order in [ByteOrder::ToLe, ByteOrder::ToBe, ByteOrder::Swap] {
        for bits in [16, 32, 64] {
            p.push(Insn::Endian {
                order,
                bits,
                dst: r(1),
            });
        }
    }
    p.push(ld64(4, LdImm64Kind::Imm, -2, 0x7654_3210));
    p.push(ld64(4, LdImm64Kind::Imm, 0, 0));
    p.extend([mov(0, 2), Insn::Exit]);
    p
}

/// Loads, stores, sign-extending loads, every atomic, load-acquire and store-release.
fn memory_program() -> Vec<Insn> {
    let st = |size, off, imm| Insn::Store {
        size,
        dst: r(10),
        off,
        imm,
    };
    let stx = |size, off| Insn::StoreReg {
        size,
        dst: r(10),
        src: r(1),
        off,
    };
    let mut p = vec![
        ldx(Size::W, 2, 1, 12), // a ctx load at a positive offset
        ldx(Size::W, 2, 1, 0),  // and at +0 (the packet pointer)
        mov(1, -1234567),
        stx(Size::DW, -8),
        stx(Size::W, -12),
        stx(Size::H, -14),
        stx(Size::B, -15),
        st(Size::B, -16, -7),
        st(Size::DW, -24, -1),
        st(Size::W, -28, 5),
        st(Size::H, -30, -2),
        st(Size::B, -31, 7),
        st(Size::B, -32, 0),
    ];
    for (size, off) in [
        (Size::DW, -8),
        (Size::W, -12),
        (Size::H, -14),
        (Size::B, -15),
    ] {
        p.push(ldx(size, 2, 10, off));
        if size != Size::DW {
            p.push(Insn::Load {
                size,
                sign_extend: true,
                dst: r(2),
                src: r(10),
                off,
            });
        }
    }
    p.push(mov(0, 0));
    for (size, off) in [(Size::DW, -8), (Size::W, -12)] {
        for op in ALL_ATOMIC {
            p.push(Insn::Atomic {
                size,
                op,
                dst: r(10),
                src: r(1),
                off,
            });
        }
    }
    for (size, off) in SIZES.into_iter().zip([-16, -14, -12, -8]) {
        p.push(Insn::Atomic {
            size,
            op: AtomicOp::LoadAcquire,
            dst: r(3),
            src: r(10),
            off,
        });
        p.push(Insn::Atomic {
            size,
            op: AtomicOp::StoreRelease,
            dst: r(10),
            src: r(1),
            off: off - 16,
        });
    }
    p.extend([mov(0, 2), Insn::Exit]);
    p
}

/// Every conditional jump (JMP and JMP32, imm and reg), goto with both signs, gotol, may_goto
/// and a bounded loop.
fn jump_program() -> Vec<Insn> {
    let mut p = vec![I(mov_reg(6, 1))];
    for width in [Width::W64, Width::W32] {
        for cond in ALL_COND {
            // imm -1 prints as 0xffffffff; it is kept to conditions that are not always true on
            // a 32-bit unknown, so the fall-through stays reachable for the verifier.
            let imm = match (width, cond) {
                (
                    Width::W64,
                    JmpCond::Ne | JmpCond::Sgt | JmpCond::Sge | JmpCond::Lt | JmpCond::Le,
                )
                | (Width::W32, JmpCond::Le) => 5,
                _ => -1,
            };
            for src in [Source::Imm(imm), Source::Reg(r(3))] {
                p.push(I(ldx(Size::W, 2, 6, 12)));
                p.push(I(ldx(Size::W, 3, 6, 16)));
                p.push(to("out", jump_to(width, cond, 2, src)));
            }
        }
    }
    p.extend([
        // A forward goto over a block that a conditional jump reaches.
        I(ldx(Size::W, 2, 6, 12)),
        to("fwd_target", |off| Insn::Jump {
            width: Width::W64,
            cond: JmpCond::Eq,
            dst: r(2),
            src: Source::Imm(9),
            off: off as i16,
        }),
        to("after_fwd", |off| Insn::Ja { off, long: false }),
        Label("fwd_target"),
        I(mov(0, 1)),
        Label("after_fwd"),
        // The same with gotol.
        to("long_target", |off| Insn::Jump {
            width: Width::W32,
            cond: JmpCond::Ne,
            dst: r(2),
            src: Source::Imm(9),
            off: off as i16,
        }),
        to("after_long", |off| Insn::Ja { off, long: true }),
        Label("long_target"),
        I(mov(0, 1)),
        Label("after_long"),
        // A may_goto loop: the backward goto prints a negative offset.
        Label("spin"),
        to("spin_done", |off| Insn::MayGoto { off: off as i16 }),
        to("spin", |off| Insn::Ja { off, long: false }),
        Label("spin_done"),
        // A bounded loop with a backward conditional jump.
        I(mov(4, 0)),
        Label("loop"),
        I(add(4, 1)),
        to("loop", |off| Insn::Jump {
            width: Width::W64,
            cond: JmpCond::Lt,
            dst: r(4),
            src: Source::Imm(4),
            off: off as i16,
        }),
    ]);
    p.extend(pass());
    p.insert(p.len() - 2, Label("out"));
    assemble(p)
}

/// LD_ABS and LD_IND (socket filter: r6 must hold the skb).
fn legacy_program() -> Vec<Insn> {
    let mut p = vec![mov_reg(6, 1), mov(7, 2)];
    for size in [Size::B, Size::H, Size::W] {
        p.push(Insn::LdAbs { size, imm: 12 });
        p.push(Insn::LdInd {
            size,
            src: r(7),
            imm: 14,
        });
    }
    p.push(Insn::LdInd {
        size: Size::B,
        src: r(7),
        imm: -2,
    });
    p.extend([mov(0, 0), Insn::Exit]);
    p
}

struct Maps {
    hash: OwnedFd,
    array: OwnedFd,
}

/// Helper, local, callback and kfunc calls; every ld_imm64 kind; an atomic on a map value.
fn call_program(maps: &Maps, kfuncs: &Kfuncs) -> Vec<Insn> {
    let hash = maps.hash.as_raw_fd();
    let array = maps.array.as_raw_fd();
    let mut p = vec![
        I(Insn::Store {
            size: Size::W,
            dst: r(10),
            off: -4,
            imm: 0,
        }),
        I(mov_reg(2, 10)),
        I(add(2, -4)),
        I(ld64(1, LdImm64Kind::MapFd, hash, 0)),
        I(helper(1)),
        to("no_value", |off| Insn::Jump {
            width: Width::W64,
            cond: JmpCond::Eq,
            dst: r(0),
            src: Source::Imm(0),
            off: off as i16,
        }),
        I(mov(1, 1)),
        I(Insn::Atomic {
            size: Size::DW,
            op: AtomicOp::Add,
            dst: r(0),
            src: r(1),
            off: 0,
        }),
        Label("no_value"),
        I(ld64(1, LdImm64Kind::MapValue, array, 0)),
        I(ldx(Size::DW, 2, 1, 0)),
        I(ld64(1, LdImm64Kind::MapValue, array, 4)),
        I(ld64(1, LdImm64Kind::MapIdx, 0, 0)),
        I(ld64(1, LdImm64Kind::MapIdxValue, 1, 8)),
        to("sub", |off| Insn::Call(CallTarget::Local(off))),
        I(mov(1, 1)),
        to("callback", |off| ld64(2, LdImm64Kind::Func, off, 0)),
        I(mov(3, 0)),
        I(mov(4, 0)),
        I(helper(181)), // bpf_loop
    ];
    if let Some(k) = kfuncs {
        p.extend([
            I(Insn::Call(CallTarget::Kfunc {
                btf_id: k.lock,
                off: 0,
            })),
            I(Insn::Call(CallTarget::Kfunc {
                btf_id: k.unlock,
                off: 0,
            })),
            I(ld64(1, LdImm64Kind::BtfId, k.lock, 0)),
        ]);
    }
    p.extend(pass());
    p.extend([
        Label("sub"),
        I(mov(0, 0)),
        I(Insn::Exit),
        Label("callback"),
        I(mov(0, 0)),
        I(Insn::Exit),
    ]);
    assemble(p)
}

/// Arena address-space casts (the program must use an arena map).
fn arena_program(arena: &OwnedFd) -> Vec<Insn> {
    vec![
        ld64(1, LdImm64Kind::MapFd, arena.as_raw_fd(), 0),
        mov(2, 0),
        Insn::AddrSpaceCast {
            dst: r(3),
            src: r(2),
            imm: 1,
        },
        Insn::AddrSpaceCast {
            dst: r(4),
            src: r(2),
            imm: 1 << 16,
        },
        mov(0, 2),
        Insn::Exit,
    ]
}

// ---------------------------------------------------------------------------------------------
// Kernel symbols: kfunc BTF ids from /sys/kernel/btf/vmlinux, addresses from /proc/kallsyms

struct KfuncIds {
    lock: i32,
    unlock: i32,
    /// Address of `bpf_rcu_read_lock`, what an `ld_imm64` of its BTF id loads.
    lock_addr: u64,
}

type Kfuncs = Option<KfuncIds>;

/// The BTF ids of the named FUNC types in a raw BTF blob (only the type section is walked).
fn btf_func_ids(btf: &[u8], names: &[&str]) -> HashMap<String, i32> {
    let u32_at = |off: usize| u32::from_le_bytes(btf[off..off + 4].try_into().expect("4 bytes"));
    let mut found = HashMap::new();
    if btf.len() < 24 || u16::from_le_bytes([btf[0], btf[1]]) != 0xeb9f {
        return found;
    }
    let hdr_len = u32_at(4) as usize;
    let (type_off, type_len) = (u32_at(8) as usize, u32_at(12) as usize);
    let str_off = u32_at(16) as usize;
    let types = hdr_len + type_off;
    let strings = hdr_len + str_off;
    let name_at = |off: usize| {
        let start = strings + off;
        let end = btf[start..].iter().position(|&b| b == 0).map(|n| start + n);
        end.and_then(|end| std::str::from_utf8(&btf[start..end]).ok())
    };
    let (mut pos, mut id) = (types, 1i32);
    while pos + 12 <= types + type_len {
        let name_off = u32_at(pos) as usize;
        let info = u32_at(pos + 4);
        let vlen = (info & 0xffff) as usize;
        let kind = (info >> 24) & 0x1f;
        const FUNC: u32 = 12;
        if kind == FUNC
            && let Some(name) = name_at(name_off)
            && names.contains(&name)
        {
            found.insert(name.to_string(), id);
        }
        // Bytes that follow the 12-byte common header, per kind (include/uapi/linux/btf.h).
        pos += 12
            + match kind {
                1 | 14 | 17 => 4,     // int, var, decl_tag
                3 => 12,              // array
                4 | 5 => 12 * vlen,   // struct, union
                6 | 13 => 8 * vlen,   // enum, func_proto
                15 | 19 => 12 * vlen, // datasec, enum64
                _ => 0,
            };
        id += 1;
    }
    found
}

fn kallsyms_addr(name: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/kallsyms").ok()?;
    text.lines().find_map(|line| {
        let mut parts = line.split_whitespace();
        let addr = parts.next()?;
        let _kind = parts.next()?;
        (parts.next()? == name)
            .then(|| u64::from_str_radix(addr, 16).ok())
            .flatten()
            .filter(|&a| a != 0)
    })
}

fn find_kfuncs() -> Kfuncs {
    let btf = std::fs::read("/sys/kernel/btf/vmlinux").ok()?;
    let ids = btf_func_ids(&btf, &["bpf_rcu_read_lock", "bpf_rcu_read_unlock"]);
    Some(KfuncIds {
        lock: *ids.get("bpf_rcu_read_lock")?,
        unlock: *ids.get("bpf_rcu_read_unlock")?,
        lock_addr: kallsyms_addr("bpf_rcu_read_lock")?,
    })
}

/// The names and values the kernel's verifier resolves while loading.
struct KernelSyms<'a> {
    kfuncs: &'a Kfuncs,
    leaks: bool,
}

impl Symbols for KernelSyms<'_> {
    fn call_name(&self, insn: &Insn) -> Option<String> {
        let k = self.kfuncs.as_ref()?;
        match insn {
            Insn::Call(CallTarget::Kfunc { btf_id, .. }) if *btf_id == k.lock => {
                Some("bpf_rcu_read_lock".into())
            }
            Insn::Call(CallTarget::Kfunc { btf_id, .. }) if *btf_id == k.unlock => {
                Some("bpf_rcu_read_unlock".into())
            }
            _ => None,
        }
    }

    fn imm64(&self, insn: &Insn, value: u64) -> Option<String> {
        // The verifier has replaced a ksym's BTF id by the symbol's address before it prints.
        match (insn, self.kfuncs) {
            (
                Insn::LdImm64 {
                    kind: LdImm64Kind::BtfId,
                    ..
                },
                Some(k),
            ) if value != 0 => Some(format!("0x{:x}", k.lock_addr)),
            _ => None,
        }
    }

    fn allow_ptr_leaks(&self) -> bool {
        self.leaks
    }
}

// ---------------------------------------------------------------------------------------------
// Capabilities: a thread without CAP_SYS_ADMIN and CAP_PERFMON loads with allow_ptr_leaks off

const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Drops CAP_SYS_ADMIN and CAP_PERFMON from the calling thread's effective set (capabilities
/// are per thread on Linux, so only this thread loses them).
fn drop_ptr_leak_caps() -> bool {
    let mut header = CapHeader {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget writes two CapData (version 3) into `data`; both pointers are live.
    let got = unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) };
    if got != 0 {
        return false;
    }
    for cap in [CAP_SYS_ADMIN, CAP_PERFMON] {
        data[(cap / 32) as usize].effective &= !(1 << (cap % 32));
    }
    // SAFETY: capset reads the header and two CapData; both pointers are live.
    unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) == 0 }
}

// ---------------------------------------------------------------------------------------------
// Subprogram BTF: callbacks (ld_imm64 of a function) need func_info

/// Where each subprogram starts: pc 0 and every target of a local call or function pointer.
fn subprog_starts(prog: &Program) -> Vec<u32> {
    let mut starts = vec![0u32];
    for (pc, insn) in prog.iter() {
        let rel = match insn {
            Insn::Call(CallTarget::Local(rel)) => *rel,
            Insn::LdImm64 {
                kind: LdImm64Kind::Func,
                imm,
                ..
            } => *imm,
            _ => continue,
        };
        starts.push((pc as i64 + 1 + rel as i64) as u32);
    }
    starts.sort_unstable();
    starts.dedup();
    starts
}

/// A BTF blob with `int` and one static `int f{i}(void)` per subprogram, and the func_info that
/// ties them to `starts`.
fn subprog_btf(starts: &[u32]) -> (Vec<u8>, Vec<FuncInfo>) {
    const INT: u32 = 1;
    const FUNC: u32 = 12;
    const FUNC_PROTO: u32 = 13;
    let mut strings = b"\0int\0".to_vec();
    let mut types: Vec<u32> = vec![
        1,
        INT << 24,
        4,
        0x0100_0020, // [1] int: signed, 32 bits
        0,
        FUNC_PROTO << 24,
        1, // [2] int (void)
    ];
    let mut infos = Vec::new();
    for (i, &start) in starts.iter().enumerate() {
        let name_off = strings.len() as u32;
        strings.extend_from_slice(format!("f{i}\0").as_bytes());
        types.extend([name_off, FUNC << 24, 2]);
        infos.push(FuncInfo {
            insn_off: start,
            type_id: 3 + i as u32,
        });
    }
    let type_bytes: Vec<u8> = types.iter().flat_map(|w| w.to_le_bytes()).collect();
    let mut blob = Vec::new();
    blob.extend_from_slice(&0xeb9fu16.to_le_bytes());
    blob.extend_from_slice(&[1, 0]); // version, flags
    for word in [
        24,
        0,
        type_bytes.len() as u32,
        type_bytes.len() as u32,
        strings.len() as u32,
    ] {
        blob.extend_from_slice(&word.to_le_bytes());
    }
    blob.extend(type_bytes);
    blob.extend(strings);
    (blob, infos)
}

// ---------------------------------------------------------------------------------------------
// Reading the verifier log

/// Every instruction the kernel printed: `pc -> [(opcode, text)]`. Instruction lines start
/// with `N: (op) `; precision backtracking repeats them after `before `. State that follows the
/// text on the same line is introduced by padding and `;`, which no instruction text contains.
fn kernel_insn_lines(log: &str) -> BTreeMap<usize, Vec<(u8, String)>> {
    let mut out: BTreeMap<usize, Vec<(u8, String)>> = BTreeMap::new();
    for line in log.lines() {
        let starts = std::iter::once(line).chain(line.split("before ").skip(1));
        for candidate in starts {
            if let Some((pc, code, text)) = parse_insn_line(candidate) {
                out.entry(pc).or_default().push((code, text));
            }
        }
    }
    out
}

fn parse_insn_line(line: &str) -> Option<(usize, u8, String)> {
    let (pc, rest) = line.split_once(": (")?;
    let pc = pc.parse().ok()?;
    let (code, text) = rest.split_once(") ")?;
    if code.len() != 2 {
        return None;
    }
    let code = u8::from_str_radix(code, 16).ok()?;
    let text = text.split(';').next().unwrap_or("").trim_end();
    Some((pc, code, text.to_string()))
}

/// Whether the log shows a map's kernel address for this instruction, which only the kernel
/// knows. Linux 6.18 hides it (prints `0x0`) for `src_reg` 1 and 2 without pointer-leak
/// capabilities, but always shows it for the fd-array forms (`src_reg` 5 and 6).
fn shows_map_address(insn: &Insn, privileged: bool) -> bool {
    match insn {
        Insn::LdImm64 { kind, .. } => match kind {
            LdImm64Kind::MapFd | LdImm64Kind::MapValue => privileged,
            LdImm64Kind::MapIdx | LdImm64Kind::MapIdxValue => true,
            _ => false,
        },
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------------
// The comparison

struct Case<'a> {
    name: &'static str,
    prog_type: u32,
    insns: Vec<Insn>,
    fd_array: Vec<i32>,
    kfuncs: &'a Kfuncs,
    /// A program the verifier rejects: only the lines it printed are compared.
    rejected: bool,
}

/// Loads `case` and compares every printed instruction; returns the number of lines compared.
fn check(case: &Case<'_>, privileged: bool) -> usize {
    let prog = Program::from_insns(&case.insns).expect("our encoder makes a valid program");
    let raw: Vec<RawInsn> = prog.raw().to_vec();
    let mut opts = LoadOptions::new(case.prog_type, &raw);
    opts.fd_array = &case.fd_array;
    let starts = subprog_starts(&prog);
    let (btf_fd, func_info);
    if starts.len() > 1 {
        let (blob, infos) = subprog_btf(&starts);
        btf_fd = Some(
            kernel::btf_load(&blob)
                .unwrap_or_else(|(errno, log)| panic!("BTF rejected (errno {errno}): {log}")),
        );
        func_info = infos;
        opts.prog_btf_fd = btf_fd.as_ref().map(|fd| fd.as_raw_fd());
        opts.func_info = &func_info;
    }
    let result = kernel::prog_load(&opts);
    let mode = if privileged {
        "root"
    } else {
        "no CAP_SYS_ADMIN/PERFMON"
    };
    if let (true, Ok(_)) = (case.rejected, &result.fd) {
        panic!(
            "{} ({mode}): the kernel accepted a program meant to be rejected",
            case.name
        );
    }
    if let (false, Err(errno)) = (case.rejected, &result.fd) {
        let tail: Vec<&str> = result.log.lines().rev().take(30).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        panic!(
            "{} ({mode}): the kernel rejected it (errno {errno}):\n{}",
            case.name,
            tail.join("\n")
        );
    }
    let printed = kernel_insn_lines(&result.log);
    let syms = KernelSyms {
        kfuncs: case.kfuncs,
        leaks: privileged,
    };
    let mut compared = 0;
    let mut mismatches = Vec::new();
    for (pc, insn) in prog.iter() {
        let code = raw[pc].code;
        let ours = format!("({code:02x}) {}", insn_text_with(insn, &syms));
        let Some(lines) = printed.get(&pc) else {
            if case.rejected {
                continue;
            }
            mismatches.push(format!(
                "pc {pc}: never printed by the kernel (ours: {ours})"
            ));
            continue;
        };
        for (kcode, ktext) in lines {
            let theirs = format!("({kcode:02x}) {ktext}");
            compared += 1;
            let same = if shows_map_address(insn, privileged) {
                let Insn::LdImm64 { dst, .. } = insn else {
                    unreachable!()
                };
                let prefix = format!("({code:02x}) {dst} = 0x");
                theirs
                    .strip_prefix(&prefix)
                    .is_some_and(|hex| u64::from_str_radix(hex, 16).is_ok_and(|v| v != 0))
            } else {
                theirs == ours
            };
            if !same {
                mismatches.push(format!("pc {pc}:\n  kernel: {theirs}\n  ours:   {ours}"));
            }
        }
    }
    for pc in printed.keys() {
        if prog.insn(*pc).is_none() {
            mismatches.push(format!(
                "pc {pc}: kernel printed an insn where we have none"
            ));
        }
    }
    assert!(
        !case.rejected || compared > 0,
        "{} ({mode}): the kernel printed none of it",
        case.name
    );
    assert!(
        mismatches.is_empty(),
        "{} ({mode}): {} mismatches:\n{}",
        case.name,
        mismatches.len(),
        mismatches.join("\n")
    );
    compared
}

fn kernel_or_skip() -> bool {
    if kernel::kernel_available() {
        return true;
    }
    let required = std::env::var("BPFEMU_REQUIRE_KERNEL").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "BPFEMU_REQUIRE_KERNEL=1 but bpf() is not usable here (not root, or no bpf syscall)"
    );
    eprintln!(
        "skipping: the kernel's bpf() is not usable here (set BPFEMU_REQUIRE_KERNEL=1 to fail)"
    );
    false
}

#[test]
fn disassembly_matches_the_kernel_verifier_log() {
    if !kernel_or_skip() {
        return;
    }
    let maps = Maps {
        hash: kernel::map_create(&MapSpec::hash(4, 8, 4)).expect("hash map"),
        array: kernel::map_create(&MapSpec::array(16, 1)).expect("array map"),
    };
    let kfuncs = find_kfuncs();
    if kfuncs.is_none() {
        eprintln!("no vmlinux BTF or kallsyms: kfunc and ksym forms are not checked");
    }
    let arena = kernel::map_create(&MapSpec {
        map_type: kernel::BPF_MAP_TYPE_ARENA,
        max_entries: 1,
        map_flags: kernel::BPF_F_MMAPABLE,
        map_extra: 1 << 32,
        ..Default::default()
    })
    .expect("arena map");
    let fd_array = vec![maps.hash.as_raw_fd(), maps.array.as_raw_fd()];
    let xdp = kernel::BPF_PROG_TYPE_XDP;
    let cases = [
        Case {
            name: "alu",
            prog_type: xdp,
            insns: alu_program(),
            fd_array: vec![],
            kfuncs: &kfuncs,
            rejected: false,
        },
        Case {
            name: "memory",
            prog_type: xdp,
            insns: memory_program(),
            fd_array: vec![],
            kfuncs: &kfuncs,
            rejected: false,
        },
        Case {
            name: "jumps",
            prog_type: xdp,
            insns: jump_program(),
            fd_array: vec![],
            kfuncs: &kfuncs,
            rejected: false,
        },
        Case {
            name: "legacy packet loads",
            prog_type: kernel::BPF_PROG_TYPE_SOCKET_FILTER,
            insns: legacy_program(),
            fd_array: vec![],
            kfuncs: &kfuncs,
            rejected: false,
        },
        Case {
            name: "calls and ld_imm64",
            prog_type: xdp,
            insns: call_program(&maps, &kfuncs),
            fd_array: fd_array.clone(),
            kfuncs: &kfuncs,
            rejected: false,
        },
        Case {
            name: "arena",
            prog_type: xdp,
            insns: arena_program(&arena),
            fd_array: vec![],
            kfuncs: &kfuncs,
            rejected: false,
        },
        Case {
            // The verifier prints the call before it rejects the id.
            name: "unknown helper",
            prog_type: xdp,
            insns: vec![helper(9999), mov(0, 2), Insn::Exit],
            fd_array: vec![],
            kfuncs: &kfuncs,
            rejected: true,
        },
    ];
    let mut total = 0;
    for case in &cases {
        total += check(case, true);
    }
    // Without the capabilities that allow pointer leaks, map addresses print as the kernel hides
    // them: the default our disassembler prints. Only the ld_imm64 case needs this; the others
    // print the same either way (and the bounded loop, explored with speculative paths when
    // unprivileged, is rejected there).
    let unprivileged = std::thread::scope(|s| {
        s.spawn(|| {
            if !drop_ptr_leak_caps() {
                eprintln!("could not drop capabilities: hidden-pointer forms not checked");
                return 0;
            }
            cases
                .iter()
                .filter(|c| c.name == "calls and ld_imm64")
                .map(|c| check(c, false))
                .sum::<usize>()
        })
        .join()
        .expect("unprivileged checks")
    });
    eprintln!("compared {total} kernel log lines as root and {unprivileged} without ptr leaks");
}
