//! Register state: the type of what a register holds (`enum bpf_reg_type` with its flags), its
//! fixed and variable offset, scalar bounds, and the ids that tie copies together for null
//! checks, packet ranges and acquired references (`struct bpf_reg_state`).

use super::tnum::Tnum;
use bpfemu_isa::KernelVersion;

/// The base type of a register's content (`enum bpf_reg_type` without the flag bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum RegType {
    /// Never written: reading it is `!read_ok`.
    #[default]
    NotInit,
    Scalar,
    /// The program's context (`struct xdp_md *`).
    Ctx,
    /// A map itself (`ld_imm64` of a map); `map` names it.
    ConstPtrToMap,
    /// A map value; `map` names the map.
    MapValue,
    /// A map key (callback arguments); `map` names the map.
    MapKey,
    /// A stack slot of frame `frameno`.
    Stack,
    PacketMeta,
    Packet,
    PacketEnd,
    /// Memory of `mem_size` bytes (ring buffer records, helper memory, global data by BTF).
    Mem,
    /// A subprogram's address (`ld_imm64` BPF_PSEUDO_FUNC); `subprogno` names it.
    Func,
    /// A kernel object described by BTF (`btf_id`).
    BtfId,
    /// Memory of a map in the arena address space.
    Arena,
    /// A full socket (`PTR_TO_SOCKET`: `struct bpf_sock` to the program), from
    /// `bpf_sk_lookup_tcp`/`_udp`.
    Socket,
    /// A socket's common part (`PTR_TO_SOCK_COMMON`), from `bpf_skc_lookup_tcp`: it may be a
    /// request or time-wait socket, so fewer `struct bpf_sock` fields are readable.
    SockCommon,
    /// `PTR_TO_TCP_SOCK` (`bpf_tcp_sock`, which XDP may not call: only named in messages).
    TcpSock,
    /// `PTR_TO_XDP_SOCK`: an XSKMAP lookup's value once null-checked.
    XdpSock,
    /// `CONST_PTR_TO_DYNPTR`: a dynptr a global function receives (`struct bpf_dynptr *`) or
    /// a callback is handed (`bpf_user_ringbuf_drain`'s): helpers may read it but not change,
    /// release or reinitialise it, and it is no memory to load or store through. Its kind is
    /// in the flags, as in a dynptr slot's saved register (`call::dynptr`).
    ConstPtrToDynptr,
}

/// `PTR_MAYBE_NULL`: the pointer may be NULL until a null check.
pub const PTR_MAYBE_NULL: u32 = 1 << 0;
/// `MEM_RDONLY`: the memory may not be written.
pub const MEM_RDONLY: u32 = 1 << 1;
/// `MEM_RINGBUF`: a ring buffer record.
pub const MEM_RINGBUF: u32 = 1 << 2;
/// `MEM_ALLOC`: allocated object.
pub const MEM_ALLOC: u32 = 1 << 3;
/// `PTR_TRUSTED`: a trusted BTF pointer.
pub const PTR_TRUSTED: u32 = 1 << 4;
/// `PTR_UNTRUSTED`: an untrusted BTF pointer (probe-read semantics).
pub const PTR_UNTRUSTED: u32 = 1 << 5;
/// `MEM_RCU`: valid within an RCU read section.
pub const MEM_RCU: u32 = 1 << 6;
/// `MEM_PERCPU`.
pub const MEM_PERCPU: u32 = 1 << 7;
/// `MEM_UNINIT`: memory a helper fills (argument types only).
pub const MEM_UNINIT: u32 = 1 << 8;
/// `MEM_FIXED_SIZE`: argument types only.
pub const MEM_FIXED_SIZE: u32 = 1 << 9;
/// `MEM_USER`: a `__user` pointer read out of a kernel structure.
pub const MEM_USER: u32 = 1 << 10;
/// A slice of a packet dynptr (`DYNPTR_TYPE_XDP` on a `PTR_TO_MEM`): a helper that changes
/// packet data invalidates it as it does packet pointers.
pub const MEM_PKT_SLICE: u32 = 1 << 11;
/// `DYNPTR_TYPE_*` and other flags the core does not interpret sit above this bit.
pub const FLAG_FIRST_UNUSED: u32 = 1 << 12;

/// The `id` bit of a scalar linked to another by `rX = rY + const` in 64-bit arithmetic (the
/// constant is in `off`).
pub const BPF_ADD_CONST64: u32 = 1 << 31;
/// The same link made by a 32-bit `wX += const` (or `-=`): it holds for the low halves, and the
/// linked value is zero-extended.
pub const BPF_ADD_CONST32: u32 = 1 << 30;
/// Either link.
pub const BPF_ADD_CONST: u32 = BPF_ADD_CONST64 | BPF_ADD_CONST32;

/// `BEYOND_PKT_END`: a packet pointer known to be past `pkt_end`.
pub const BEYOND_PKT_END: i32 = -2;
/// `AT_PKT_END`: a packet pointer known to be at or past `pkt_end`.
pub const AT_PKT_END: i32 = -1;

/// Largest offset a pointer may carry (`BPF_MAX_VAR_OFF`).
pub const BPF_MAX_VAR_OFF: i64 = 1 << 29;

/// Largest packet offset (`MAX_PACKET_OFF`).
pub const MAX_PACKET_OFF: u64 = 0xffff;

/// `subreg_def` when the register's upper 32 bits are defined.
pub const DEF_NOT_SUBREG: u32 = 0;

/// One register's state (`struct bpf_reg_state`).
///
/// The kernel's union of per-type data is flattened: `map` for map pointers, `range` for
/// packet pointers, `mem_size` for `Mem`, `btf_id` for `BtfId`, `subprogno` for `Func`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RegState {
    pub ty: RegType,
    /// `PTR_MAYBE_NULL`, `MEM_RDONLY`, ... (the flag bits of `enum bpf_reg_type`).
    pub flags: u32,
    /// Fixed offset of a pointer.
    pub off: i32,
    /// Known bits of the scalar value, or of a pointer's variable offset.
    pub var_off: Tnum,
    pub smin_value: i64,
    pub smax_value: i64,
    pub umin_value: u64,
    pub umax_value: u64,
    pub s32_min_value: i32,
    pub s32_max_value: i32,
    pub u32_min_value: u32,
    pub u32_max_value: u32,
    /// Ties copies together: null checks mark all pointers of one id, packet range checks all
    /// packet pointers of one id, scalar ranges propagate between copies (`BPF_ADD_CONST`
    /// folded in as in the kernel's `id` high bit).
    pub id: u32,
    /// Id of the acquired reference this pointer stands for (0: none).
    pub ref_obj_id: u32,
    /// Index of the map in the program's map table (map pointers, map values, map keys).
    pub map: Option<u32>,
    /// For map values reached through an inner map lookup (map-in-map): the inner map spec index
    /// is `map`; this marks the value as coming from the inner template.
    pub map_uid: u32,
    /// Packet pointers: bytes proven accessible past `off` (`r=`); negative: `BEYOND_PKT_END`
    /// and `AT_PKT_END` markers as the kernel uses them.
    pub range: i32,
    /// `Mem`: size of the region.
    pub mem_size: u32,
    /// `BtfId`: the type id (in vmlinux BTF).
    pub btf_id: u32,
    /// `Func`: the subprogram.
    pub subprogno: u32,
    /// `Stack`: the frame the pointer points into.
    pub frameno: u32,
    /// Instruction index (+1) at which only the low 32 bits were defined, or `DEF_NOT_SUBREG`.
    pub subreg_def: u32,
    /// Whether the exact value matters for safety (precision tracking).
    pub precise: bool,
    /// An iterator's first stack slot (`STACK_ITER`): whether it may still yield.
    pub iter_state: IterState,
    /// How many `next` calls deep the path into the iterator's loop is (`iter.depth`): not
    /// compared for pruning, only kept so that the infinite-loop check sees progress.
    pub iter_depth: u32,
}

/// The state of an open-coded iterator (`enum bpf_iter_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum IterState {
    #[default]
    Invalid,
    /// `next` may still return an element.
    Active,
    /// `next` returned NULL and will again.
    Drained,
}

impl IterState {
    /// The log's word for it (`iter_state_str`).
    pub fn name(self) -> &'static str {
        match self {
            IterState::Invalid => "<invalid>",
            IterState::Active => "active",
            IterState::Drained => "drained",
        }
    }
}

impl RegState {
    /// A register never written (`__mark_reg_not_init`).
    pub fn not_init() -> RegState {
        let mut r = RegState::unknown_scalar();
        r.ty = RegType::NotInit;
        r
    }

    /// A scalar with nothing known (`__mark_reg_unknown`).
    pub fn unknown_scalar() -> RegState {
        RegState {
            ty: RegType::Scalar,
            var_off: Tnum::UNKNOWN,
            smin_value: i64::MIN,
            smax_value: i64::MAX,
            umin_value: 0,
            umax_value: u64::MAX,
            s32_min_value: i32::MIN,
            s32_max_value: i32::MAX,
            u32_min_value: 0,
            u32_max_value: u32::MAX,
            ..RegState::default()
        }
    }

    /// A known 64-bit constant (`__mark_reg_known`).
    pub fn known(value: u64) -> RegState {
        let mut r = RegState::unknown_scalar();
        r.set_known(value);
        r
    }

    /// A pointer of type `ty` with a zero offset; bounds zero.
    pub fn pointer(ty: RegType) -> RegState {
        let mut r = RegState::known(0);
        r.ty = ty;
        r
    }

    /// Makes the register the known constant `value`, keeping its type and ids.
    pub fn set_known(&mut self, value: u64) {
        self.var_off = Tnum::constant(value);
        self.smin_value = value as i64;
        self.smax_value = value as i64;
        self.umin_value = value;
        self.umax_value = value;
        self.s32_min_value = value as i32;
        self.s32_max_value = value as i32;
        self.u32_min_value = value as u32;
        self.u32_max_value = value as u32;
    }

    /// `register_is_null`-style test: whether this is a scalar known to be `value`.
    pub fn is_const_scalar(&self, value: u64) -> bool {
        self.ty == RegType::Scalar && self.var_off.equals_const(value)
    }

    pub fn is_scalar(&self) -> bool {
        self.ty == RegType::Scalar
    }

    /// Any pointer type (`__is_pointer_value`).
    pub fn is_pointer(&self) -> bool {
        !matches!(self.ty, RegType::Scalar | RegType::NotInit)
    }

    /// Whether a store of this register to the stack keeps it (`is_spillable_regtype`): every
    /// pointer but a callback's const dynptr, which becomes plain data.
    pub fn is_spillable(&self) -> bool {
        self.is_pointer() && self.ty != RegType::ConstPtrToDynptr
    }

    pub fn maybe_null(&self) -> bool {
        self.flags & PTR_MAYBE_NULL != 0
    }

    /// Packet pointers of any kind, the end included (`reg_is_pkt_pointer_any`).
    pub fn is_pkt_pointer_any(&self) -> bool {
        matches!(
            self.ty,
            RegType::Packet | RegType::PacketMeta | RegType::PacketEnd
        )
    }

    /// The socket pointers (`type_is_sk_pointer`): only field reads through them, as
    /// `check_sock_access` allows.
    pub fn is_sk_pointer(&self) -> bool {
        self.flags & PTR_MAYBE_NULL == 0
            && matches!(
                self.ty,
                RegType::Socket | RegType::SockCommon | RegType::TcpSock | RegType::XdpSock
            )
    }

    /// Packet pointers of either kind (`reg_is_pkt_pointer`).
    pub fn is_pkt_pointer(&self) -> bool {
        matches!(self.ty, RegType::Packet | RegType::PacketMeta)
    }
}

/// Where a register-state description is printed (`R1=`), for messages that name the type,
/// in `version`'s words: a ring buffer record is `ringbuf_mem` from 6.2 (`MEM_RINGBUF`),
/// `alloc_mem` in 6.1 (which marked it `MEM_ALLOC`) and plain `mem` in 5.10.
pub fn reg_type_str(ty: RegType, flags: u32, version: KernelVersion) -> String {
    let base = match ty {
        RegType::NotInit => "?",
        RegType::Scalar => "scalar",
        RegType::Ctx => "ctx",
        RegType::ConstPtrToMap => "map_ptr",
        RegType::MapValue => "map_value",
        RegType::MapKey => "map_key",
        RegType::Stack => "fp",
        RegType::PacketMeta => "pkt_meta",
        RegType::Packet => "pkt",
        RegType::PacketEnd => "pkt_end",
        RegType::Mem => "mem",
        RegType::Func => "func",
        RegType::BtfId => "ptr_",
        RegType::Arena => "arena",
        RegType::Socket => "sock",
        RegType::SockCommon => "sock_common",
        RegType::TcpSock => "tcp_sock",
        RegType::XdpSock => "xdp_sock",
        RegType::ConstPtrToDynptr => "dynptr_ptr",
    };
    let mut prefix = String::new();
    let ringbuf = match version {
        KernelVersion::V5_10 => "",
        KernelVersion::V6_1 => "alloc_",
        _ => "ringbuf_",
    };
    for (flag, text) in [
        (MEM_RDONLY, "rdonly_"),
        (MEM_RINGBUF, ringbuf),
        (MEM_PERCPU, "percpu_"),
        (MEM_RCU, "rcu_"),
        (PTR_UNTRUSTED, "untrusted_"),
        (PTR_TRUSTED, "trusted_"),
    ] {
        if flags & flag != 0 {
            prefix.push_str(text);
        }
    }
    let postfix = if flags & PTR_MAYBE_NULL != 0 {
        if matches!(ty, RegType::BtfId) {
            "or_null_"
        } else {
            "_or_null"
        }
    } else {
        ""
    };
    format!("{prefix}{base}{postfix}")
}
