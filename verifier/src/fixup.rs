//! The xlated program (`bpf_check` after `do_check`): what the kernel runs after verification,
//! as `bpftool prog dump xlated` shows it, in the kernel's order of passes:
//!
//! 1. `opt_hard_wire_dead_code_branches`: a conditional jump one of whose edges no path took
//!    becomes `goto` (or `goto +0`).
//! 2. `opt_remove_dead_code`: instructions no path reached are dropped.
//! 3. `opt_remove_nops`: `goto +0` is dropped.
//! 4. `convert_ctx_accesses`: `xdp_md` loads become loads from the kernel's `xdp_buff` and
//!    the structures it points to; loads through socket pointers (`struct bpf_sock`,
//!    `struct bpf_xdp_sock`) become loads from `struct sock` and `struct xdp_sock`
//!    (`bpf_sock_convert_ctx_access`, `bpf_xdp_sock_convert_ctx_access`), a narrow load
//!    widened to its field and shifted and masked as the kernel does.
//! 5. `do_misc_fixups`: division and modulo by a register guarded against zero (and signed
//!    ones against -1), `bpf_map_lookup_elem` inlined for arrays, per-CPU arrays, hash, per-CPU
//!    hash and LRU hash maps, `bpf_get_smp_processor_id` inlined (the calls
//!    [`bpfemu_isa::inline_policy`] lists), `bpf_tail_call` marked.
//! 6. `jit_subprogs`' last step: a bpf-to-bpf call keeps its relative target in `off` and
//!    names the callee's subprogram index in `imm`.
//!
//! Every patch and removal moves jump offsets across it as `bpf_adj_branches` does. Where the
//! kernel writes an address (helper calls, map pointers, per-CPU variables) bpfemu keeps what
//! the program named: the helper id, the map index; `ld_imm64` of a map keeps its `src` kind
//! as the dump does.

use crate::Xlated;
use crate::env::Env;
use crate::prog_type::xdp::{
    XDP_MD_DATA, XDP_MD_DATA_END, XDP_MD_DATA_META, XDP_MD_EGRESS_IFINDEX, XDP_MD_INGRESS_IFINDEX,
    XDP_MD_RX_QUEUE_INDEX,
};
use crate::state::RegType;
use bpfemu_isa::RawInsn;
use bpfemu_isa::inline_policy::{self, InlinedHelper, InlinedLookup};

/// `BPF_REG_AX`: the verifier's scratch register in rewritten code.
pub const BPF_REG_AX: u8 = 11;

/// Layout of the kernel structures the rewrites load from (x86-64, Linux 6.18 as built here;
/// measured from `bpftool prog dump xlated` of the same programs, tests/xdp_xlated_kernel.rs).
mod layout {
    /// `struct xdp_buff`.
    pub const XDP_BUFF_DATA: i16 = 0;
    pub const XDP_BUFF_DATA_END: i16 = 8;
    pub const XDP_BUFF_DATA_META: i16 = 16;
    pub const XDP_BUFF_RXQ: i16 = 32;
    pub const XDP_BUFF_TXQ: i16 = 40;
    /// `struct xdp_rxq_info` / `struct xdp_txq_info`: `dev` first.
    pub const XDP_RXQ_DEV: i16 = 0;
    pub const XDP_RXQ_QUEUE_INDEX: i16 = 8;
    pub const XDP_TXQ_DEV: i16 = 0;
    /// `struct net_device`: `ifindex` (depends on the kernel's configuration).
    pub const NET_DEVICE_IFINDEX: i16 = 224;
    /// `struct bpf_array`: where the values start.
    pub const BPF_ARRAY_VALUE: i32 = 312;
    /// `struct htab_elem`: where the key starts.
    pub const HTAB_ELEM_KEY: i32 = 48;
    /// `struct htab_elem`: `lru_node.ref`.
    pub const HTAB_ELEM_LRU_REF: i16 = 35;
    /// `struct sock` (its `struct sock_common` first): the fields `struct bpf_sock` shows
    /// (measured from the dump of tests/data/sockets/sk_lookup.o).
    pub const SK_DADDR: i16 = 0;
    pub const SK_RCV_SADDR: i16 = 4;
    pub const SK_DPORT: i16 = 12;
    pub const SK_NUM: i16 = 14;
    pub const SK_FAMILY: i16 = 16;
    pub const SK_STATE: i16 = 18;
    pub const SK_BOUND_DEV_IF: i16 = 20;
    pub const SK_V6_DADDR: i16 = 56;
    pub const SK_V6_RCV_SADDR: i16 = 72;
    pub const SK_RX_QUEUE_MAPPING: i16 = 122;
    pub const SK_PRIORITY: i16 = 520;
    pub const SK_MARK: i16 = 524;
    pub const SK_PROTOCOL: i16 = 532;
    pub const SK_TYPE: i16 = 534;
    /// `struct xsk_map`: where the socket pointers start.
    pub const XSK_MAP_SLOTS: i32 = 304;
    /// `struct xdp_sock`: `queue_id` (measured from the dump of tests/data/sockets/xsk_queue.o).
    pub const XDP_SOCK_QUEUE_ID: i16 = 880;
}

/// A load through a socket pointer, as the fixups convert it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SockLoad {
    /// `struct bpf_sock` (a full socket or its `sock_common`), with the `ctx_field_size`
    /// the verifier recorded.
    Sock { field_size: u32 },
    /// `struct bpf_xdp_sock`.
    XdpSock,
}

/// Per-slot facts the passes carry along as slots move.
#[derive(Clone, Copy, Debug, Default)]
struct SlotAux {
    seen: bool,
    ctx_field: Option<i32>,
    sock: Option<SockLoad>,
    map: Option<u32>,
}

/// The program being rewritten: slots and their facts, kept in step.
struct Xlator<'a> {
    insns: Vec<RawInsn>,
    aux: Vec<SlotAux>,
    env: &'a Env<'a>,
}

/// The program the kernel would run, from an accepted program and its per-instruction facts.
pub fn xlate(env: &Env<'_>) -> Xlated {
    let insns = env.prog.raw().to_vec();
    let mut aux: Vec<SlotAux> = env
        .aux
        .iter()
        .map(|a| SlotAux {
            seen: a.seen,
            ctx_field: a.ctx_access.map(|c| c.field_off),
            sock: match a.ptr_type {
                Some(RegType::Socket | RegType::SockCommon) => Some(SockLoad::Sock {
                    field_size: a.sock_field_size,
                }),
                Some(RegType::XdpSock) => Some(SockLoad::XdpSock),
                _ => None,
            },
            map: if a.map_poisoned { None } else { a.map_index },
        })
        .collect();
    // The second slot of a reached ld_imm64 counts as reached (`sanitize_mark_insn_seen`).
    for pc in 0..insns.len().saturating_sub(1) {
        if is_ld_imm64(&insns[pc]) && aux[pc].seen {
            aux[pc + 1].seen = true;
        }
    }
    let mut x = Xlator { insns, aux, env };
    x.remove_fastcall_pairs();
    x.hard_wire_dead_branches();
    x.remove_dead_code();
    x.remove_nops();
    x.convert_ctx_accesses();
    x.misc_fixups();
    x.fixup_calls();
    let kernel_reads = (env.aux.iter().enumerate())
        .filter(|(_, a)| a.reads_kernel_memory)
        .map(|(pc, _)| pc)
        .collect();
    let kernel_flaws = (env.aux.iter().enumerate())
        .filter_map(|(pc, a)| a.kernel_flaw.map(|f| (pc, f)))
        .collect();
    Xlated {
        insns: x.insns,
        kernel_reads,
        kernel_flaws,
    }
}

/// `BPF_LDX | BPF_MEM | size`.
fn ldx(size: u8, dst: u8, src: u8, off: i16) -> RawInsn {
    RawInsn::new(0x61 | size, dst, src, off, 0)
}

/// The size bits of a load of `bytes` bytes.
fn size_code(bytes: u32) -> u8 {
    match bytes {
        1 => 0x10,
        2 => 0x08,
        8 => 0x18,
        _ => 0x00,
    }
}

/// The bytes a load of these size bits reads.
fn size_bytes(code: u8) -> u32 {
    match code & 0x18 {
        0x10 => 1,
        0x08 => 2,
        0x18 => 8,
        _ => 4,
    }
}

/// A load through a socket pointer as `convert_ctx_accesses` rewrites it: a narrow load
/// (narrower than the field the verifier recorded) becomes a load of the whole field,
/// converted, then shifted to the bytes read and masked when the kernel's field is wider
/// than them; a sign-extending load gets its sign extension after.
fn convert_sock_load(insn: RawInsn, load: SockLoad) -> Vec<RawInsn> {
    let size = size_bytes(insn.code);
    let sign_extend = insn.code & 0xe0 == 0x80;
    let field_size = match load {
        SockLoad::Sock { field_size } => field_size,
        SockLoad::XdpSock => 0,
    };
    let narrow = size < field_size;
    let mut si = insn;
    if narrow {
        si.off = insn.off & !(field_size as i16 - 1);
        si.code = 0x61 | size_code(field_size);
    }
    let (mut patch, target_size) = match load {
        SockLoad::Sock { .. } => bpf_sock_convert(si),
        // `queue_id` is a u16 in the kernel's `struct xdp_sock`.
        SockLoad::XdpSock => (
            vec![ldx(0x08, si.dst, si.src, layout::XDP_SOCK_QUEUE_ID)],
            0,
        ),
    };
    let d = insn.dst;
    if narrow && size < target_size {
        // `bpf_ctx_narrow_access_offset` on a little-endian machine.
        let shift = (insn.off as u32 & (field_size - 1)) * 8;
        if shift != 0 {
            patch.push(RawInsn::new(0x74, d, 0, 0, shift as i32));
        }
        patch.push(RawInsn::new(
            0x54,
            d,
            0,
            0,
            ((1u64 << (size * 8)) - 1) as i32,
        ));
    }
    if sign_extend {
        patch.push(RawInsn::new(0xbf, d, d, (size * 8) as i16, 0));
    }
    patch
}

/// `bpf_sock_convert_ctx_access` for a read at `si.off` of `struct bpf_sock`: the
/// instructions and the size of the kernel field loaded (`target_size`; 0 where the kernel
/// sets none).
fn bpf_sock_convert(si: RawInsn) -> (Vec<RawInsn>, u32) {
    use layout::*;
    const W: u8 = 0x00;
    const H: u8 = 0x08;
    const B: u8 = 0x10;
    let (d, s, off) = (si.dst, si.src, si.off);
    let same_size = si.code & 0x18;
    let load = |size: u8, at: i16, target: u32| (vec![ldx(size, d, s, at)], target);
    match off {
        0 => load(W, SK_BOUND_DEV_IF, 0),
        4 => load(H, SK_FAMILY, 2),
        8 => load(H, SK_TYPE, 2),
        12 => load(H, SK_PROTOCOL, 2),
        16 => load(W, SK_MARK, 0),
        20 => load(W, SK_PRIORITY, 0),
        24 => load(same_size, SK_RCV_SADDR, 4),
        28..44 => load(same_size, SK_V6_RCV_SADDR + (off - 28), 4),
        44 => load(H, SK_NUM, 2),
        48 => load(H, SK_DPORT, 2),
        52 => load(same_size, SK_DADDR, 4),
        56..72 => load(same_size, SK_V6_DADDR + (off - 56), 4),
        72 => load(B, SK_STATE, 1),
        76 => (
            vec![
                ldx(H, d, s, SK_RX_QUEUE_MAPPING),
                // NO_QUEUE_MAPPING reads as -1.
                RawInsn::new(0x55, d, 0, 1, 0xffff),
                RawInsn::new(0xb4, d, 0, 0, -1),
            ],
            4,
        ),
        // The verifier lets no other offset through.
        _ => (vec![si], 0),
    }
}

fn is_ld_imm64(raw: &RawInsn) -> bool {
    raw.code == 0x18
}

fn is_cond_jump(code: u8) -> bool {
    let class = code & 0x07;
    if class != 0x05 && class != 0x06 {
        return false;
    }
    if code == 0x06 {
        return false;
    }
    !matches!(code & 0xf0, 0x00 | 0x80 | 0x90)
}

fn ja(off: i16) -> RawInsn {
    RawInsn::new(0x05, 0, 0, off, 0)
}

impl Xlator<'_> {
    /// `opt_hard_wire_dead_code_branches`.
    fn hard_wire_dead_branches(&mut self) {
        for i in 0..self.insns.len() {
            let insn = self.insns[i];
            if !is_cond_jump(insn.code) {
                continue;
            }
            let target = (i as i64 + 1 + insn.off as i64) as usize;
            let off = if !self.aux.get(i + 1).is_some_and(|a| a.seen) {
                insn.off
            } else if !self.aux.get(target).is_some_and(|a| a.seen) {
                0
            } else {
                continue;
            };
            self.insns[i] = ja(off);
        }
    }

    /// `opt_remove_dead_code`: runs of unreached slots go.
    fn remove_dead_code(&mut self) {
        let mut i = 0;
        while i < self.insns.len() {
            let run = self.aux[i..].iter().take_while(|a| !a.seen).count();
            if run > 0 {
                self.remove(i, run);
            } else {
                i += 1;
            }
        }
    }

    /// `remove_fastcall_spills_fills`: the `bpf_fastcall` pairs around a call become `goto +0`,
    /// which `opt_remove_nops` drops.
    fn remove_fastcall_pairs(&mut self) {
        for pc in 0..self.insns.len() {
            let n = usize::from(self.env.aux.get(pc).map_or(0, |a| a.fastcall_spills));
            for j in 1..=n {
                if let (Some(_), Some(_)) = (pc.checked_sub(j), self.insns.get(pc + j)) {
                    self.insns[pc - j] = ja(0);
                    self.insns[pc + j] = ja(0);
                }
            }
        }
    }

    /// `opt_remove_nops`: `goto +0` and `may_goto +0`.
    fn remove_nops(&mut self) {
        let mut i = 0;
        while i < self.insns.len() {
            let insn = self.insns[i];
            let nop = insn == ja(0) || insn == RawInsn::new(0xe5, 0, 0, 0, 0);
            if nop {
                self.remove(i, 1);
            } else {
                i += 1;
            }
        }
    }

    /// `convert_ctx_accesses` for XDP (`xdp_convert_ctx_access`).
    fn convert_ctx_accesses(&mut self) {
        use layout::*;
        let mut i = 0;
        while i < self.insns.len() {
            let insn = self.insns[i];
            if let Some(load) = self.aux[i].sock {
                let patch = convert_sock_load(insn, load);
                let n = patch.len();
                self.patch(i, patch);
                i += n;
                continue;
            }
            let Some(field) = self.aux[i].ctx_field else {
                i += 1;
                continue;
            };
            let (d, s) = (insn.dst, insn.src);
            let ldx =
                |size: u8, dst: u8, src: u8, off: i16| RawInsn::new(0x61 | size, dst, src, off, 0);
            const DW: u8 = 0x18;
            const W: u8 = 0x00;
            let patch: Vec<RawInsn> = match field {
                XDP_MD_DATA => vec![ldx(DW, d, s, XDP_BUFF_DATA)],
                XDP_MD_DATA_END => vec![ldx(DW, d, s, XDP_BUFF_DATA_END)],
                XDP_MD_DATA_META => vec![ldx(DW, d, s, XDP_BUFF_DATA_META)],
                XDP_MD_INGRESS_IFINDEX => vec![
                    ldx(DW, d, s, XDP_BUFF_RXQ),
                    ldx(DW, d, d, XDP_RXQ_DEV),
                    ldx(W, d, d, NET_DEVICE_IFINDEX),
                ],
                XDP_MD_RX_QUEUE_INDEX => vec![
                    ldx(DW, d, s, XDP_BUFF_RXQ),
                    ldx(W, d, d, XDP_RXQ_QUEUE_INDEX),
                ],
                XDP_MD_EGRESS_IFINDEX => vec![
                    ldx(DW, d, s, XDP_BUFF_TXQ),
                    ldx(DW, d, d, XDP_TXQ_DEV),
                    ldx(W, d, d, NET_DEVICE_IFINDEX),
                ],
                _ => vec![insn],
            };
            let n = patch.len();
            self.patch(i, patch);
            i += n;
        }
    }

    /// `do_misc_fixups`: division guards, inlined helpers, tail calls.
    fn misc_fixups(&mut self) {
        let mut i = 0;
        while i < self.insns.len() {
            let insn = self.insns[i];
            let patch = if let Some(p) = division_guard(insn) {
                Some(p)
            } else if insn.code == 0x85 && insn.src == 0 {
                self.helper_fixup(i, insn.imm)
            } else {
                None
            };
            match patch {
                Some(p) => {
                    let n = p.len();
                    self.patch(i, p);
                    i += n;
                }
                None => i += if is_ld_imm64(&insn) { 2 } else { 1 },
            }
        }
    }

    /// The rewrite of helper call `func_id` at `i`, if the kernel makes one: which calls are
    /// rewritten is [`inline_policy`]'s, shared with the JITs; the code is the kernel's.
    fn helper_fixup(&mut self, i: usize, func_id: i32) -> Option<Vec<RawInsn>> {
        // The dump shows a tail call as the helper call it was (the policy lists no rewrite);
        // the JIT's poke table entry for a constant key is `imm` (1-based) in the kernel's
        // own image.
        match inline_policy::inlined_helper(func_id)? {
            InlinedHelper::MapLookup => {
                let map = self.env.input.maps.get(self.aux[i].map? as usize)?;
                Some(match InlinedLookup::of_map_type(map.map_type)? {
                    InlinedLookup::Array => array_lookup(map.value_size, map.max_entries),
                    InlinedLookup::PerCpuArray => percpu_array_lookup(map.max_entries),
                    InlinedLookup::Hash => vec![
                        RawInsn::new(0x85, 0, 0, 0, 1),
                        RawInsn::new(0x15, 0, 0, 1, 0),
                        RawInsn::new(0x07, 0, 0, 0, htab_key_off(map.key_size)),
                    ],
                    // This CPU's copy of the value behind the element.
                    InlinedLookup::PerCpuHash => vec![
                        RawInsn::new(0x85, 0, 0, 0, 1),
                        RawInsn::new(0x15, 0, 0, 3, 0),
                        RawInsn::new(0x07, 0, 0, 0, htab_key_off(map.key_size)),
                        RawInsn::new(0x79, 0, 0, 0, 0),
                        RawInsn::new(0xbf, 0, 0, -1, 0),
                    ],
                    // The element's reference bit is set on a hit.
                    InlinedLookup::LruHash => vec![
                        RawInsn::new(0x85, 0, 0, 0, 1),
                        RawInsn::new(0x15, 0, 0, 4, 0),
                        RawInsn::new(0x71, 1, 0, layout::HTAB_ELEM_LRU_REF, 0),
                        RawInsn::new(0x55, 1, 0, 1, 0),
                        RawInsn::new(0x72, 0, 0, layout::HTAB_ELEM_LRU_REF, 1),
                        RawInsn::new(0x07, 0, 0, 0, htab_key_off(map.key_size)),
                    ],
                    InlinedLookup::XskMap => xsk_map_lookup(map.max_entries),
                })
            }
            // r0 = &cpu_number (a per-CPU address, 0 here); r0 = per-CPU r0; r0 = *(u32 *)r0
            InlinedHelper::CpuId => Some(vec![
                RawInsn::new(0xb7, 0, 0, 0, 0),
                RawInsn::new(0xbf, 0, 0, -1, 0),
                RawInsn::new(0x61, 0, 0, 0, 0),
            ]),
        }
    }

    /// `jit_subprogs`' final form of bpf-to-bpf calls: relative target in `off`, callee index
    /// in `imm` (only when there are subprograms).
    fn fixup_calls(&mut self) {
        let starts: Vec<usize> = {
            let mut s = vec![0usize];
            for (i, insn) in self.insns.iter().enumerate() {
                if insn.code == 0x85 && insn.src == 1 {
                    s.push((i as i64 + 1 + insn.imm as i64) as usize);
                }
            }
            s.sort_unstable();
            s.dedup();
            s
        };
        if starts.len() < 2 {
            return;
        }
        for i in 0..self.insns.len() {
            let insn = self.insns[i];
            if insn.code == 0x85 && insn.src == 1 {
                let target = (i as i64 + 1 + insn.imm as i64) as usize;
                let idx = starts.iter().position(|&s| s == target).unwrap_or(0);
                self.insns[i].off = insn.imm as i16;
                self.insns[i].imm = idx as i32;
            }
        }
    }

    /// `bpf_patch_insn_single`: slot `pos` becomes `patch`; jumps across it move.
    fn patch(&mut self, pos: usize, patch: Vec<RawInsn>) {
        let n = patch.len();
        if n == 1 && patch[0] == self.insns[pos] {
            return;
        }
        let old_aux = self.aux[pos];
        self.insns.splice(pos..pos + 1, patch);
        let new_aux = SlotAux {
            seen: old_aux.seen,
            ..SlotAux::default()
        };
        self.aux
            .splice(pos..pos + 1, std::iter::repeat_n(new_aux, n));
        self.adjust_branches(pos, pos + 1, pos + n);
    }

    /// `bpf_remove_insns`: `cnt` slots at `pos` go; jumps across the gap move.
    fn remove(&mut self, pos: usize, cnt: usize) {
        self.insns.drain(pos..pos + cnt);
        self.aux.drain(pos..pos + cnt);
        self.adjust_branches(pos, pos + cnt, pos);
    }

    /// `bpf_adj_branches` on the rewritten program: `[pos, end_old)` became `[pos, end_new)`.
    fn adjust_branches(&mut self, pos: usize, end_old: usize, end_new: usize) {
        let delta = end_new as i64 - end_old as i64;
        let (pos, end_old, end_new) = (pos as i64, end_old as i64, end_new as i64);
        for i in 0..self.insns.len() {
            let insn = self.insns[i];
            let class = insn.code & 0x07;
            let pseudo_func = is_ld_imm64(&insn) && insn.src == 4;
            let jmp = (class == 0x05 || class == 0x06) && insn.code & 0xf0 != 0x90;
            if !pseudo_func && !jmp {
                continue;
            }
            let call = insn.code & 0xf0 == 0x80;
            if call && insn.src != 1 {
                continue;
            }
            let uses_imm = pseudo_func || call || insn.code == 0x06;
            let mut off = if uses_imm {
                insn.imm as i64
            } else {
                insn.off as i64
            };
            let curr = i as i64;
            if curr < pos && curr + off + 1 >= end_old {
                off += delta;
            } else if curr >= end_new && curr + off + 1 < end_new {
                off -= delta;
            } else {
                continue;
            }
            if uses_imm {
                self.insns[i].imm = off as i32;
            } else {
                self.insns[i].off = off as i16;
            }
        }
    }
}

/// Where a hash element's key-rounded value starts: `offsetof(struct htab_elem, key)` plus the
/// key rounded up to 8 bytes.
fn htab_key_off(key_size: u32) -> i32 {
    layout::HTAB_ELEM_KEY + round_up(key_size, 8) as i32
}

fn round_up(v: u32, to: u32) -> u32 {
    v.div_ceil(to) * to
}

/// `array_map_gen_lookup` for a root loader (`bypass_spec_v1`: no index masking): r1 = map,
/// r2 = key pointer.
fn array_lookup(value_size: u32, max_entries: u32) -> Vec<RawInsn> {
    let elem_size = round_up(value_size, 8);
    let scale = if elem_size.is_power_of_two() {
        RawInsn::new(0x67, 0, 0, 0, elem_size.trailing_zeros() as i32)
    } else {
        RawInsn::new(0x27, 0, 0, 0, elem_size as i32)
    };
    vec![
        RawInsn::new(0x07, 1, 0, 0, layout::BPF_ARRAY_VALUE),
        RawInsn::new(0x61, 0, 2, 0, 0),
        RawInsn::new(0x35, 0, 0, 3, max_entries as i32),
        scale,
        RawInsn::new(0x0f, 0, 1, 0, 0),
        ja(1),
        RawInsn::new(0xb7, 0, 0, 0, 0),
    ]
}

/// `xsk_map_gen_lookup`: the `struct xdp_sock` pointer in the slot, NULL past the end.
fn xsk_map_lookup(max_entries: u32) -> Vec<RawInsn> {
    vec![
        RawInsn::new(0x61, 0, 2, 0, 0),
        RawInsn::new(0x35, 0, 0, 5, max_entries as i32),
        RawInsn::new(0x67, 0, 0, 0, 3),
        RawInsn::new(0x07, 1, 0, 0, layout::XSK_MAP_SLOTS),
        RawInsn::new(0x0f, 0, 1, 0, 0),
        RawInsn::new(0x79, 0, 0, 0, 0),
        ja(1),
        RawInsn::new(0xb7, 0, 0, 0, 0),
    ]
}

/// `percpu_array_map_gen_lookup` for a root loader: the per-CPU pointer of the element, made
/// this CPU's with the per-CPU move.
fn percpu_array_lookup(max_entries: u32) -> Vec<RawInsn> {
    vec![
        RawInsn::new(0x07, 1, 0, 0, layout::BPF_ARRAY_VALUE),
        RawInsn::new(0x61, 0, 2, 0, 0),
        RawInsn::new(0x35, 0, 0, 5, max_entries as i32),
        RawInsn::new(0x67, 0, 0, 0, 3),
        RawInsn::new(0x0f, 0, 1, 0, 0),
        RawInsn::new(0x79, 0, 0, 0, 0),
        RawInsn::new(0xbf, 0, 0, -1, 0),
        ja(1),
        RawInsn::new(0xb7, 0, 0, 0, 0),
    ]
}

/// The guards `do_misc_fixups` puts around a division or modulo so that it cannot fault.
fn division_guard(insn: RawInsn) -> Option<Vec<RawInsn>> {
    let class = insn.code & 0x07;
    let op = insn.code & 0xf0;
    let alu = class == 0x04 || class == 0x07;
    if !alu || !matches!(op, 0x30 | 0x90) {
        return None;
    }
    let is64 = class == 0x07;
    let isdiv = op == 0x30;
    let signed = insn.off == 1;
    let x = insn.code & 0x08 != 0;
    let alu_class = if is64 { 0x07 } else { 0x04 };
    let jmp_class = if is64 { 0x05 } else { 0x06 };
    let (d, s) = (insn.dst, insn.src);
    if !x {
        // Only a signed division by the constant -1 is rewritten.
        if !(signed && insn.imm == -1) {
            return None;
        }
        return Some(if isdiv {
            vec![RawInsn::new(alu_class | 0x80, d, 0, 0, 0)]
        } else {
            vec![RawInsn::new(0xb4, d, 0, 0, 0)]
        });
    }
    let ax = BPF_REG_AX;
    Some(match (isdiv, signed) {
        (true, true) => vec![
            RawInsn::new(0xbf, ax, s, 0, 0),
            RawInsn::new(alu_class, ax, 0, 0, 1),
            RawInsn::new(jmp_class | 0x20, ax, 0, 4, 1),
            RawInsn::new(jmp_class | 0x10, ax, 0, 1, 0),
            RawInsn::new(alu_class | 0xb0, d, 0, 0, 0),
            RawInsn::new(alu_class | 0x80, d, 0, 0, 0),
            ja(1),
            insn,
        ],
        (false, true) => {
            let mut p = vec![
                RawInsn::new(0xbf, ax, s, 0, 0),
                RawInsn::new(alu_class, ax, 0, 0, 1),
                RawInsn::new(jmp_class | 0x20, ax, 0, 3, 1),
                RawInsn::new(jmp_class | 0x10, ax, 0, 3 + if is64 { 0 } else { 1 }, 1),
                RawInsn::new(0xb4, d, 0, 0, 0),
                ja(1),
                insn,
                ja(1),
                RawInsn::new(0xbc, d, d, 0, 0),
            ];
            // The 64-bit forms need no zero-extension of the result.
            if is64 {
                p.truncate(7);
            }
            p
        }
        (true, false) => vec![
            RawInsn::new(jmp_class | 0x50, s, 0, 2, 0),
            RawInsn::new(0xac, d, d, 0, 0),
            ja(1),
            insn,
        ],
        (false, false) => {
            let mut p = vec![
                RawInsn::new(jmp_class | 0x10, s, 0, 1 + if is64 { 0 } else { 1 }, 0),
                insn,
                ja(1),
                RawInsn::new(0xbc, d, d, 0, 0),
            ];
            if is64 {
                p.truncate(2);
            }
            p
        }
    })
}
