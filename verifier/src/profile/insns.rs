//! The instructions each kernel version decodes, and how it refuses the ones it does not.
//!
//! A version refuses an instruction it predates in one of three places, each with the words of
//! the check that catches it first:
//! - the opcode table (`bpf_opcode_in_insntable`, in the pass before the walk): "unknown opcode
//!   %02x" for opcodes it lacks (`gotol` on 5.10, `may_goto` before 6.9, ...);
//! - that pass's own field checks: 5.10 refuses every `BPF_STX` whose imm is set ("BPF_STX uses
//!   reserved fields"), so the atomics of 5.12 never reach the walk; before 6.6 a sign-extending
//!   load is an `ldx` of a reserved mode ("BPF_LDX uses reserved fields");
//! - the walk, on arrival (`do_check`): fields the version reserves ("BPF_ALU uses reserved
//!   fields" for `sdiv` before 6.6, "BPF_ATOMIC uses invalid atomic opcode 100" for
//!   load-acquire before 6.15, "BPF_CALL uses reserved fields" for a kfunc call before 5.13).
//!
//! 7.x moved every field check into the pass before the walk (`check_insn_fields`), with the
//! registers' range ("R%d is invalid"): an unreachable malformed instruction is refused there.

use bpfemu_isa::KernelVersion::{self, *};
use bpfemu_isa::opcode::*;

/// An instruction, or a use of one, that came with a kernel release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feature {
    /// Atomics other than plain add: fetch, and/or/xor, xchg, cmpxchg (5.12).
    AtomicOps,
    /// Calls of kernel functions by BTF id, `call` with src 2 (5.13).
    KfuncCalls,
    /// `ld_imm64` of a subprogram (src 4) and of maps by fd_array index (src 5, 6) (5.13).
    LdImm64ByIdxAndFunc,
    /// `check_cfg` refuses a jump into an `ld_imm64`'s second slot (5.13); 5.10 walks that
    /// slot as an instruction of its own, refused when the walk reaches it.
    LdImm64MiddleCheck,
    /// `ld_imm64` of a kernel function's address (src 3 naming a FUNC) (6.4).
    KsymFunctions,
    /// `gotol`, `BPF_JMP32 | BPF_JA` (6.6; Debian's 6.1 has it through its stable updates).
    LongJump,
    /// cpu v4's other instructions: sdiv/smod, movsx, bswap, sign-extending loads (6.6).
    CpuV4,
    /// `may_goto` and `addr_space_cast` (6.9).
    MayGotoAndArena,
    /// `may_goto +0`, a may_goto to the next instruction (6.13; 6.12 reserves `off` 0).
    MayGotoToNext,
    /// load-acquire, store-release and byte or half-word atomics (6.15).
    LoadAcquire,
    /// `gotox`, `BPF_JMP | BPF_JA | BPF_X` (7.x).
    IndirectJump,
    /// Every instruction's fields and registers checked before the walk (7.x).
    UpfrontFieldChecks,
    /// 7.x's `ld_imm64` of a map value: no `BPF_MAX_VAR_OFF` limit of its own (the map's
    /// bounds decide), and an arena's offset must stay below the arena's end, not reach it.
    MapValueOffsetByMapOnly,
    /// 7.x's load-acquire checks the pointer's type before the load, not after.
    AtomicLoadTypeFirst,
}

/// The first profiled version with each feature. 5.12 and 5.13 fall between 5.10 and 6.1, 6.4,
/// 6.6 and 6.9 between 6.1 and 6.12, 6.13 and 6.15 between 6.12 and 6.18.
const SINCE: &[(Feature, KernelVersion)] = &[
    (Feature::AtomicOps, V6_1),
    (Feature::KfuncCalls, V6_1),
    (Feature::LdImm64ByIdxAndFunc, V6_1),
    (Feature::LdImm64MiddleCheck, V6_1),
    (Feature::LongJump, V6_1),
    (Feature::KsymFunctions, V6_12),
    (Feature::CpuV4, V6_12),
    (Feature::MayGotoAndArena, V6_12),
    (Feature::MayGotoToNext, V6_18),
    (Feature::LoadAcquire, V6_18),
    (Feature::IndirectJump, V7_2),
    (Feature::UpfrontFieldChecks, V7_2),
    (Feature::MapValueOffsetByMapOnly, V7_2),
    (Feature::AtomicLoadTypeFirst, V7_2),
];

/// Whether `version` has `feature`.
pub fn has(version: KernelVersion, feature: Feature) -> bool {
    SINCE
        .iter()
        .find(|(f, _)| *f == feature)
        .is_some_and(|&(_, since)| version >= since)
}

/// The feature an opcode needs to be in a version's opcode table at all (6.18's table less
/// these, plus `gotox` from 7.x); `None` for opcodes every profiled version's table has.
fn opcode_feature(code: u8) -> Option<Feature> {
    const LDX_MEMSX: [u8; 3] = [
        BPF_LDX | BPF_MEMSX | BPF_B,
        BPF_LDX | BPF_MEMSX | BPF_H,
        BPF_LDX | BPF_MEMSX | BPF_W,
    ];
    match code {
        c if c == BPF_JMP32 | BPF_JA => Some(Feature::LongJump),
        c if c == BPF_ALU64 | BPF_END | BPF_K || LDX_MEMSX.contains(&c) => Some(Feature::CpuV4),
        c if c == BPF_JMP | BPF_JCOND => Some(Feature::MayGotoAndArena),
        c if c == BPF_STX | BPF_ATOMIC | BPF_B || c == BPF_STX | BPF_ATOMIC | BPF_H => {
            Some(Feature::LoadAcquire)
        }
        c if c == BPF_JMP | BPF_JA | BPF_X => Some(Feature::IndirectJump),
        _ => None,
    }
}

/// `bpf_opcode_in_insntable` of `version`: 6.18's table (`in_6_18`) with the opcodes the
/// version lacks taken out and those it adds put in.
pub fn opcode_known(version: KernelVersion, code: u8, in_6_18: bool) -> bool {
    match opcode_feature(code) {
        Some(feature) => has(version, feature) && (in_6_18 || feature == Feature::IndirectJump),
        None => in_6_18,
    }
}

/// Whether the pass before the walk refuses this `ldx` as using reserved fields: a mode other
/// than `BPF_MEM` (or, from 6.6, `BPF_MEMSX`), or an imm.
pub fn ldx_reserved(version: KernelVersion, code: u8, imm: i32) -> bool {
    let mode = code & 0xe0;
    let memsx = mode == BPF_MEMSX && has(version, Feature::CpuV4);
    (mode != BPF_MEM && !memsx) || imm != 0
}

/// 5.10's check of `stx` in the pass before the walk: a mode other than `BPF_MEM` or
/// `BPF_XADD` (later `BPF_ATOMIC`), or an imm, is refused; from 5.12 the walk checks `stx`.
pub fn stx_reserved_before_walk(version: KernelVersion, code: u8, imm: i32) -> bool {
    if has(version, Feature::AtomicOps) || code & 0x07 != BPF_STX {
        return false;
    }
    let mode = code & 0xe0;
    (mode != BPF_MEM && mode != BPF_ATOMIC) || imm != 0
}

/// Whether `version` knows the `ld_imm64` pseudo kind `src` (0 to 3 in every version; 4 to 6
/// from 5.13); an unknown kind is "unrecognized bpf_ld_imm64 insn".
pub fn ldimm64_kind_known(version: KernelVersion, src: u8) -> bool {
    src <= 3 || has(version, Feature::LdImm64ByIdxAndFunc)
}

/// The fields a version reserves in instructions 6.18 decodes, checked when the walk reaches
/// them (or, from 7.x, before the walk): what `steps` of the checks consult.
#[derive(Clone, Copy, Debug)]
pub struct Reserved {
    /// `off` 1 on div/mod (sdiv, smod) is allowed.
    pub signed_div: bool,
    /// `off` 8, 16, 32 on a register mov (movsx) is allowed.
    pub sign_extending_mov: bool,
    /// `off` 1 on a 64-bit register mov (addr_space_cast) is allowed.
    pub addr_space_cast: bool,
    /// The atomics beyond plain add.
    pub atomic_ops: bool,
    /// load-acquire and store-release atomics.
    pub load_acquire: bool,
    /// `call` with src 2.
    pub kfunc_calls: bool,
    /// `gotox`: a jump through the register in dst.
    pub indirect_jump: bool,
    /// `may_goto` with `off` 0; without it the refusal names `off` too.
    pub may_goto_to_next: bool,
    /// A conditional jump reads dst before its fields are checked
    /// ([`crate::behaviour::reads_jump_dst_before_its_fields`]).
    pub jump_dst_first: bool,
}

impl Reserved {
    pub fn of(version: KernelVersion) -> Reserved {
        Reserved {
            signed_div: has(version, Feature::CpuV4),
            sign_extending_mov: has(version, Feature::CpuV4),
            addr_space_cast: has(version, Feature::MayGotoAndArena),
            atomic_ops: has(version, Feature::AtomicOps),
            load_acquire: has(version, Feature::LoadAcquire),
            kfunc_calls: has(version, Feature::KfuncCalls),
            indirect_jump: has(version, Feature::IndirectJump),
            may_goto_to_next: has(version, Feature::MayGotoToNext),
            jump_dst_first: crate::behaviour::reads_jump_dst_before_its_fields(version),
        }
    }
}

/// Whether the walk of `version` refuses `raw`, an instruction 6.18 decodes, for a field it
/// reserves: the check then waits for the walk to reach it, as the kernel's does.
pub fn refused_on_arrival(version: KernelVersion, raw: bpfemu_isa::RawInsn) -> bool {
    let allowed = Reserved::of(version);
    let class = raw.code & 0x07;
    let op = raw.code & 0xf0;
    let x = raw.code & BPF_X != 0;
    match class {
        BPF_ALU | BPF_ALU64 if matches!(op, BPF_DIV | BPF_MOD) => {
            raw.off == 1 && !allowed.signed_div
        }
        BPF_ALU | BPF_ALU64 if op == BPF_MOV && x => match raw.off {
            0 => false,
            BPF_ADDR_SPACE_CAST if class == BPF_ALU64 => !allowed.addr_space_cast,
            _ => !allowed.sign_extending_mov,
        },
        BPF_STX if raw.code & 0xe0 == BPF_ATOMIC => {
            let acquire_release = matches!(raw.imm, BPF_LOAD_ACQ | BPF_STORE_REL);
            (acquire_release && !allowed.load_acquire) || (raw.imm != 0 && !allowed.atomic_ops)
        }
        BPF_JMP if op == BPF_CALL => raw.src == 2 && !allowed.kfunc_calls,
        BPF_JMP if op == BPF_JCOND => raw.off == 0 && !allowed.may_goto_to_next,
        _ => false,
    }
}

/// Whether `bpf(BPF_PROG_LOAD)` takes these `BPF_F_*` load flags: `BPF_F_XDP_HAS_FRAGS`
/// (libbpf's `xdp.frags` sections) arrived in 5.18, so 5.10 refuses it with EINVAL and no log.
pub fn takes_prog_flags(version: KernelVersion, prog_flags: u32) -> bool {
    version > KernelVersion::V5_10 || prog_flags & bpfemu_isa::uapi::BPF_F_XDP_HAS_FRAGS == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_arrive_in_order() {
        assert!(!has(V5_10, Feature::AtomicOps));
        assert!(has(V6_1, Feature::AtomicOps));
        assert!(has(V6_1, Feature::LongJump));
        assert!(!has(V6_1, Feature::CpuV4));
        assert!(has(V6_12, Feature::MayGotoAndArena));
        assert!(!has(V6_12, Feature::LoadAcquire));
        assert!(has(V6_18, Feature::LoadAcquire));
        assert!(!has(V6_18, Feature::IndirectJump));
        assert!(has(V7_2, Feature::IndirectJump));
    }

    #[test]
    fn opcode_tables() {
        let gotol = BPF_JMP32 | BPF_JA;
        assert!(!opcode_known(V5_10, gotol, true));
        assert!(opcode_known(V6_1, gotol, true));
        let gotox = BPF_JMP | BPF_JA | BPF_X;
        assert!(!opcode_known(V6_18, gotox, false));
        assert!(opcode_known(V7_2, gotox, false));
        let load_acquire_byte = BPF_STX | BPF_ATOMIC | BPF_B;
        assert!(!opcode_known(V6_12, load_acquire_byte, true));
        assert!(opcode_known(V6_18, load_acquire_byte, true));
        // An opcode no table has stays unknown.
        assert!(!opcode_known(V7_2, 0xff, false));
    }
}
