//! The `bpf_func_proto` of every helper an XDP program may call as root in Linux 6.18.
//!
//! `xdp_func_proto` (net/core/filter.c) answers first, then `bpf_sk_base_func_proto`, then
//! `bpf_base_func_proto` (kernel/bpf/helpers.c), whose privileged tiers (CAP_BPF, CAP_PERFMON)
//! a root loader passes. The set was measured against the running kernel: every id 0..=211
//! called from an XDP program, the ones answered "program of this type cannot use helper" are
//! absent here (see `tests/calls_protos.rs`).

/// The base of an argument type (`enum bpf_arg_type` without its flag bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArgBase {
    /// Not checked (`ARG_DONTCARE`): the helper takes fewer arguments.
    DontCare,
    ConstMapPtr,
    PtrToMapKey,
    PtrToMapValue,
    /// Memory the next argument sizes, or of `size` bytes with [`MEM_FIXED_SIZE`].
    PtrToMem,
    ConstSize,
    ConstSizeOrZero,
    ConstAllocSizeOrZero,
    PtrToCtx,
    Anything,
    PtrToFunc,
    PtrToStack,
    PtrToRingbufMem,
    PtrToSpinLock,
    PtrToTimer,
    PtrToConstStr,
    PtrToDynptr,
    /// `ARG_PTR_TO_BTF_ID_SOCK_COMMON`.
    PtrToBtfIdSockCommon,
    /// `ARG_PTR_TO_SOCK_COMMON`.
    PtrToSockCommon,
    PtrToBtfId,
    PtrToPercpuBtfId,
    KptrXchgDest,
}

/// `PTR_MAYBE_NULL`: NULL (a known-zero scalar) is accepted.
pub const PTR_MAYBE_NULL: u32 = 1 << 0;
/// `MEM_RDONLY`: the helper only reads the memory.
pub const MEM_RDONLY: u32 = 1 << 1;
/// `MEM_UNINIT`: the helper fills the memory; it need not be initialised.
pub const MEM_UNINIT: u32 = 1 << 2;
/// `MEM_WRITE`: the helper writes the memory.
pub const MEM_WRITE: u32 = 1 << 3;
/// `MEM_FIXED_SIZE`: the size is the prototype's `arg_size`, not the next argument.
pub const MEM_FIXED_SIZE: u32 = 1 << 4;
/// `MEM_ALIGNED`: the memory must be aligned to its size.
pub const MEM_ALIGNED: u32 = 1 << 5;
/// `OBJ_RELEASE`: the argument releases the reference it carries.
pub const OBJ_RELEASE: u32 = 1 << 6;
/// `DYNPTR_TYPE_LOCAL`.
pub const DYNPTR_TYPE_LOCAL: u32 = 1 << 7;
/// `DYNPTR_TYPE_RINGBUF`.
pub const DYNPTR_TYPE_RINGBUF: u32 = 1 << 8;
/// `DYNPTR_TYPE_XDP` (the dynptr `bpf_dynptr_from_xdp` makes over the packet).
pub const DYNPTR_TYPE_XDP: u32 = 1 << 9;

/// One argument: its base type, flags and (with [`MEM_FIXED_SIZE`]) its size in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ArgType {
    pub base: ArgBase,
    pub flags: u32,
    pub size: u32,
}

impl ArgType {
    pub const fn new(base: ArgBase) -> ArgType {
        ArgType {
            base,
            flags: 0,
            size: 0,
        }
    }

    pub const fn with(base: ArgBase, flags: u32) -> ArgType {
        ArgType {
            base,
            flags,
            size: 0,
        }
    }

    /// `ARG_PTR_TO_FIXED_SIZE_MEM | flags` of `size` bytes.
    pub const fn fixed_mem(flags: u32, size: u32) -> ArgType {
        ArgType {
            base: ArgBase::PtrToMem,
            flags: flags | MEM_FIXED_SIZE,
            size,
        }
    }

    pub const fn may_be_null(&self) -> bool {
        self.flags & PTR_MAYBE_NULL != 0
    }

    pub const fn is_release(&self) -> bool {
        self.flags & OBJ_RELEASE != 0
    }

    /// Whether this argument is a size for the previous one (`arg_type_is_mem_size`).
    pub const fn is_mem_size(&self) -> bool {
        matches!(self.base, ArgBase::ConstSize | ArgBase::ConstSizeOrZero)
    }
}

const DONTCARE: ArgType = ArgType::new(ArgBase::DontCare);
const MAP: ArgType = ArgType::new(ArgBase::ConstMapPtr);
const KEY: ArgType = ArgType::new(ArgBase::PtrToMapKey);
const VALUE: ArgType = ArgType::new(ArgBase::PtrToMapValue);
const VALUE_OR_NULL: ArgType = ArgType::with(ArgBase::PtrToMapValue, PTR_MAYBE_NULL);
const UNINIT_MAP_VALUE: ArgType = ArgType::with(ArgBase::PtrToMapValue, MEM_UNINIT | MEM_WRITE);
const ANY: ArgType = ArgType::new(ArgBase::Anything);
const CTX: ArgType = ArgType::new(ArgBase::PtrToCtx);
const SIZE: ArgType = ArgType::new(ArgBase::ConstSize);
const SIZE_OR_ZERO: ArgType = ArgType::new(ArgBase::ConstSizeOrZero);
const ALLOC_SIZE_OR_ZERO: ArgType = ArgType::new(ArgBase::ConstAllocSizeOrZero);
const MEM_RD: ArgType = ArgType::with(ArgBase::PtrToMem, MEM_RDONLY);
const MEM_RD_OR_NULL: ArgType = ArgType::with(ArgBase::PtrToMem, MEM_RDONLY | PTR_MAYBE_NULL);
const MEM_WR: ArgType = ArgType::with(ArgBase::PtrToMem, MEM_WRITE);
const MEM_WR_OR_NULL: ArgType = ArgType::with(ArgBase::PtrToMem, MEM_WRITE | PTR_MAYBE_NULL);
/// `ARG_PTR_TO_UNINIT_MEM`.
const UNINIT_MEM: ArgType = ArgType::with(ArgBase::PtrToMem, MEM_UNINIT | MEM_WRITE);
const FUNC: ArgType = ArgType::new(ArgBase::PtrToFunc);
const STACK_OR_NULL: ArgType = ArgType::with(ArgBase::PtrToStack, PTR_MAYBE_NULL);
const SOCK_COMMON_BTF: ArgType = ArgType::new(ArgBase::PtrToBtfIdSockCommon);
const BTF_ID: ArgType = ArgType::new(ArgBase::PtrToBtfId);
const BTF_ID_OR_NULL: ArgType = ArgType::with(ArgBase::PtrToBtfId, PTR_MAYBE_NULL);
const TIMER: ArgType = ArgType::new(ArgBase::PtrToTimer);
const CONST_STR: ArgType = ArgType::new(ArgBase::PtrToConstStr);

/// What a helper returns (`enum bpf_return_type` with its flags folded in).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RetType {
    /// A scalar (`RET_INTEGER`).
    Integer,
    /// Nothing: R0 is not readable after the call (`RET_VOID`).
    Void,
    /// `RET_PTR_TO_MAP_VALUE_OR_NULL`.
    MapValueOrNull,
    /// `RET_PTR_TO_SOCKET_OR_NULL`.
    SocketOrNull,
    /// `RET_PTR_TO_SOCK_COMMON_OR_NULL`.
    SockCommonOrNull,
    /// `RET_PTR_TO_RINGBUF_MEM_OR_NULL`: a record of the reserved size.
    RingbufMemOrNull,
    /// `RET_PTR_TO_DYNPTR_MEM_OR_NULL`.
    DynptrMemOrNull,
    /// `RET_PTR_TO_BTF_ID_OR_NULL` of the helper's `ret_btf_id`.
    BtfIdOrNull,
    /// `RET_PTR_TO_BTF_ID_TRUSTED`.
    BtfIdTrusted,
    /// `RET_PTR_TO_MEM_OR_BTF_ID | MEM_RDONLY`, `| PTR_MAYBE_NULL` when `maybe_null`.
    MemOrBtfIdRdonly { maybe_null: bool },
    /// `RET_PTR_TO_BTF_ID_OR_NULL | MEM_ALLOC | ...` of `bpf_kptr_xchg`: the destination's type.
    KptrXchg,
}

/// One helper's prototype, with the properties the verifier reads from elsewhere (`helper_
/// changes_pkt_data`, `is_acquire_function`, sleepability).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FuncProto {
    pub id: i32,
    pub ret: RetType,
    pub args: [ArgType; 5],
    pub gpl_only: bool,
    /// The helper may read packet memory passed to it (`pkt_access`).
    pub pkt_access: bool,
    /// Only sleepable programs may call it (`might_sleep`).
    pub might_sleep: bool,
}

impl FuncProto {
    /// The helper's name with the `bpf_` prefix, as the kernel's messages print it.
    pub fn name(&self) -> String {
        helper_display_name(self.id)
    }

    /// Whether the call invalidates every packet pointer (`bpf_helper_changes_pkt_data`).
    pub fn changes_pkt_data(&self) -> bool {
        changes_pkt_data(self.id)
    }

    /// Whether R0 carries a new reference the program must release (`is_acquire_function`,
    /// apart from map lookups into socket maps, which XDP cannot make).
    pub fn acquires(&self) -> bool {
        matches!(
            self.id,
            SK_LOOKUP_TCP | SK_LOOKUP_UDP | SKC_LOOKUP_TCP | RINGBUF_RESERVE | KPTR_XCHG
        )
    }

    /// The number of arguments the prototype declares.
    pub fn arg_count(&self) -> usize {
        self.args
            .iter()
            .position(|a| a.base == ArgBase::DontCare)
            .unwrap_or(5)
    }
}

/// `func_id_name`: `bpf_` + the helper's name, or `unknown` past the table.
pub fn helper_display_name(id: i32) -> String {
    match bpfemu_isa::helpers::helper_name(id) {
        Some(name) => format!("bpf_{name}"),
        None => "unknown".to_owned(),
    }
}

/// Helpers after which every packet pointer is invalid (`bpf_helper_changes_pkt_data`, the ids
/// of it XDP can call).
pub fn changes_pkt_data(id: i32) -> bool {
    matches!(
        id,
        XDP_ADJUST_HEAD | XDP_ADJUST_META | XDP_ADJUST_TAIL | XDP_STORE_BYTES
    )
}

use bpfemu_isa::KernelVersion;
use bpfemu_isa::helpers::id;
pub use bpfemu_isa::helpers::id::{
    DYNPTR_FROM_MEM, FOR_EACH_MAP_ELEM, GET_SMP_PROCESSOR_ID, KPTR_XCHG, LOOP, MAP_DELETE_ELEM,
    MAP_LOOKUP_ELEM, MAP_LOOKUP_PERCPU_ELEM, MAP_PEEK_ELEM, MAP_POP_ELEM, MAP_PUSH_ELEM,
    MAP_UPDATE_ELEM, REDIRECT_MAP, RINGBUF_DISCARD, RINGBUF_OUTPUT, RINGBUF_QUERY, RINGBUF_RESERVE,
    RINGBUF_SUBMIT, SK_LOOKUP_TCP, SK_LOOKUP_UDP, SK_RELEASE, SKC_LOOKUP_TCP, SNPRINTF, SPIN_LOCK,
    SPIN_UNLOCK, TAIL_CALL, TIMER_INIT, TIMER_SET_CALLBACK, USER_RINGBUF_DRAIN, XDP_ADJUST_HEAD,
    XDP_ADJUST_META, XDP_ADJUST_TAIL, XDP_STORE_BYTES,
};

const fn p(id: i32, ret: RetType, args: &[ArgType]) -> FuncProto {
    let mut all = [DONTCARE; 5];
    let mut i = 0;
    while i < args.len() {
        all[i] = args[i];
        i += 1;
    }
    FuncProto {
        id,
        ret,
        args: all,
        gpl_only: false,
        pkt_access: false,
        might_sleep: false,
    }
}

const fn gpl(mut f: FuncProto) -> FuncProto {
    f.gpl_only = true;
    f
}

const fn pkt(mut f: FuncProto) -> FuncProto {
    f.pkt_access = true;
    f
}

const fn sleeps(mut f: FuncProto) -> FuncProto {
    f.might_sleep = true;
    f
}

use RetType::*;

/// The prototypes of the helpers XDP may call, sorted by id.
pub const XDP_PROTOS: &[FuncProto] = &[
    pkt(p(id::MAP_LOOKUP_ELEM, MapValueOrNull, &[MAP, KEY])),
    pkt(p(id::MAP_UPDATE_ELEM, Integer, &[MAP, KEY, VALUE, ANY])),
    pkt(p(id::MAP_DELETE_ELEM, Integer, &[MAP, KEY])),
    p(id::KTIME_GET_NS, Integer, &[]),
    gpl(p(id::TRACE_PRINTK, Integer, &[MEM_RD, SIZE])),
    p(id::GET_PRANDOM_U32, Integer, &[]),
    p(id::GET_SMP_PROCESSOR_ID, Integer, &[]),
    p(id::TAIL_CALL, Void, &[CTX, MAP, ANY]),
    p(id::GET_CURRENT_PID_TGID, Integer, &[]),
    p(id::GET_CURRENT_UID_GID, Integer, &[]),
    p(id::GET_CURRENT_COMM, Integer, &[UNINIT_MEM, SIZE]),
    p(id::GET_CGROUP_CLASSID, Integer, &[]),
    gpl(p(id::PERF_EVENT_READ, Integer, &[MAP, ANY])),
    p(id::REDIRECT, Integer, &[ANY, ANY]),
    gpl(p(
        id::PERF_EVENT_OUTPUT,
        Integer,
        &[CTX, MAP, ANY, MEM_RD, SIZE_OR_ZERO],
    )),
    pkt(p(
        28,
        Integer,
        &[
            MEM_RD_OR_NULL,
            SIZE_OR_ZERO,
            MEM_RD_OR_NULL,
            SIZE_OR_ZERO,
            ANY,
        ],
    )),
    gpl(p(id::GET_CURRENT_TASK, Integer, &[])),
    p(id::CURRENT_TASK_UNDER_CGROUP, Integer, &[MAP, ANY]),
    p(id::GET_NUMA_NODE_ID, Integer, &[]),
    p(id::XDP_ADJUST_HEAD, Integer, &[CTX, ANY]),
    p(id::REDIRECT_MAP, Integer, &[MAP, ANY, ANY]),
    p(id::XDP_ADJUST_META, Integer, &[CTX, ANY]),
    gpl(p(
        id::PERF_EVENT_READ_VALUE,
        Integer,
        &[MAP, ANY, UNINIT_MEM, SIZE],
    )),
    p(id::XDP_ADJUST_TAIL, Integer, &[CTX, ANY]),
    gpl(p(id::FIB_LOOKUP, Integer, &[CTX, MEM_WR, SIZE, ANY])),
    p(id::GET_CURRENT_CGROUP_ID, Integer, &[]),
    pkt(p(
        id::SK_LOOKUP_TCP,
        SocketOrNull,
        &[CTX, MEM_RD, SIZE_OR_ZERO, ANY, ANY],
    )),
    pkt(p(
        id::SK_LOOKUP_UDP,
        SocketOrNull,
        &[CTX, MEM_RD, SIZE_OR_ZERO, ANY, ANY],
    )),
    p(
        86,
        Integer,
        &[ArgType::with(ArgBase::PtrToBtfIdSockCommon, OBJ_RELEASE)],
    ),
    pkt(p(id::MAP_PUSH_ELEM, Integer, &[MAP, VALUE, ANY])),
    pkt(p(id::MAP_POP_ELEM, Integer, &[MAP, UNINIT_MAP_VALUE])),
    pkt(p(id::MAP_PEEK_ELEM, Integer, &[MAP, UNINIT_MAP_VALUE])),
    p(id::SPIN_LOCK, Void, &[ArgType::new(ArgBase::PtrToSpinLock)]),
    p(
        id::SPIN_UNLOCK,
        Void,
        &[ArgType::new(ArgBase::PtrToSpinLock)],
    ),
    pkt(p(
        id::SKC_LOOKUP_TCP,
        SockCommonOrNull,
        &[CTX, MEM_RD, SIZE_OR_ZERO, ANY, ANY],
    )),
    pkt(gpl(p(
        100,
        Integer,
        &[SOCK_COMMON_BTF, MEM_RD, SIZE, MEM_RD, SIZE],
    ))),
    p(
        105,
        Integer,
        &[
            MEM_RD,
            SIZE,
            ANY,
            ArgType::fixed_mem(MEM_UNINIT | MEM_WRITE | MEM_ALIGNED, 8),
        ],
    ),
    p(
        106,
        Integer,
        &[
            MEM_RD,
            SIZE,
            ANY,
            ArgType::fixed_mem(MEM_UNINIT | MEM_WRITE | MEM_ALIGNED, 8),
        ],
    ),
    p(id::SEND_SIGNAL, Integer, &[ANY]),
    pkt(gpl(p(
        110,
        Integer,
        &[SOCK_COMMON_BTF, MEM_RD, SIZE, MEM_RD, SIZE],
    ))),
    gpl(p(
        id::PROBE_READ_USER,
        Integer,
        &[UNINIT_MEM, SIZE_OR_ZERO, ANY],
    )),
    gpl(p(
        id::PROBE_READ_KERNEL,
        Integer,
        &[UNINIT_MEM, SIZE_OR_ZERO, ANY],
    )),
    gpl(p(
        id::PROBE_READ_USER_STR,
        Integer,
        &[UNINIT_MEM, SIZE_OR_ZERO, ANY],
    )),
    gpl(p(
        id::PROBE_READ_KERNEL_STR,
        Integer,
        &[UNINIT_MEM, SIZE_OR_ZERO, ANY],
    )),
    p(id::SEND_SIGNAL_THREAD, Integer, &[ANY]),
    p(id::JIFFIES64, Integer, &[]),
    p(
        id::GET_NS_CURRENT_PID_TGID,
        Integer,
        &[ANY, ANY, UNINIT_MEM, SIZE],
    ),
    p(id::GET_CURRENT_ANCESTOR_CGROUP_ID, Integer, &[ANY]),
    p(id::KTIME_GET_BOOT_NS, Integer, &[]),
    p(
        id::RINGBUF_OUTPUT,
        Integer,
        &[MAP, MEM_RD, SIZE_OR_ZERO, ANY],
    ),
    p(
        id::RINGBUF_RESERVE,
        RingbufMemOrNull,
        &[MAP, ALLOC_SIZE_OR_ZERO, ANY],
    ),
    p(
        132,
        Void,
        &[ArgType::with(ArgBase::PtrToRingbufMem, OBJ_RELEASE), ANY],
    ),
    p(
        133,
        Void,
        &[ArgType::with(ArgBase::PtrToRingbufMem, OBJ_RELEASE), ANY],
    ),
    p(id::RINGBUF_QUERY, Integer, &[MAP, ANY]),
    p(id::SKC_TO_TCP6_SOCK, BtfIdOrNull, &[SOCK_COMMON_BTF]),
    p(id::SKC_TO_TCP_SOCK, BtfIdOrNull, &[SOCK_COMMON_BTF]),
    p(
        id::SKC_TO_TCP_TIMEWAIT_SOCK,
        BtfIdOrNull,
        &[SOCK_COMMON_BTF],
    ),
    p(id::SKC_TO_TCP_REQUEST_SOCK, BtfIdOrNull, &[SOCK_COMMON_BTF]),
    p(id::SKC_TO_UDP6_SOCK, BtfIdOrNull, &[SOCK_COMMON_BTF]),
    p(
        id::GET_TASK_STACK,
        Integer,
        &[BTF_ID, UNINIT_MEM, SIZE_OR_ZERO, ANY],
    ),
    sleeps(p(
        id::COPY_FROM_USER,
        Integer,
        &[UNINIT_MEM, SIZE_OR_ZERO, ANY],
    )),
    p(
        id::SNPRINTF_BTF,
        Integer,
        &[MEM_WR, SIZE, MEM_RD, SIZE, ANY],
    ),
    p(
        153,
        MemOrBtfIdRdonly { maybe_null: true },
        &[ArgType::new(ArgBase::PtrToPercpuBtfId), ANY],
    ),
    p(
        154,
        MemOrBtfIdRdonly { maybe_null: false },
        &[ArgType::new(ArgBase::PtrToPercpuBtfId)],
    ),
    p(
        156,
        MapValueOrNull,
        &[MAP, BTF_ID_OR_NULL, VALUE_OR_NULL, ANY],
    ),
    p(id::TASK_STORAGE_DELETE, Integer, &[MAP, BTF_ID]),
    gpl(p(id::GET_CURRENT_TASK_BTF, BtfIdTrusted, &[])),
    p(id::KTIME_GET_COARSE_NS, Integer, &[]),
    gpl(p(
        163,
        Integer,
        &[
            CTX,
            ANY,
            ArgType::fixed_mem(MEM_WRITE | MEM_ALIGNED, 4),
            ANY,
            ANY,
        ],
    )),
    p(
        id::FOR_EACH_MAP_ELEM,
        Integer,
        &[MAP, FUNC, STACK_OR_NULL, ANY],
    ),
    gpl(p(
        165,
        Integer,
        &[
            MEM_WR_OR_NULL,
            SIZE_OR_ZERO,
            CONST_STR,
            MEM_RD_OR_NULL,
            SIZE_OR_ZERO,
        ],
    )),
    gpl(p(id::TIMER_INIT, Integer, &[TIMER, MAP, ANY])),
    gpl(p(id::TIMER_SET_CALLBACK, Integer, &[TIMER, FUNC])),
    gpl(p(id::TIMER_START, Integer, &[TIMER, ANY, ANY])),
    gpl(p(id::TIMER_CANCEL, Integer, &[TIMER])),
    gpl(p(id::TASK_PT_REGS, BtfIdOrNull, &[BTF_ID])),
    gpl(p(
        id::GET_BRANCH_SNAPSHOT,
        Integer,
        &[UNINIT_MEM, SIZE_OR_ZERO, ANY],
    )),
    gpl(p(
        177,
        Integer,
        &[MEM_RD, SIZE, MEM_RD_OR_NULL, SIZE_OR_ZERO],
    )),
    p(id::SKC_TO_UNIX_SOCK, BtfIdOrNull, &[SOCK_COMMON_BTF]),
    p(
        id::FIND_VMA,
        Integer,
        &[BTF_ID, ANY, FUNC, STACK_OR_NULL, ANY],
    ),
    p(id::LOOP, Integer, &[ANY, FUNC, STACK_OR_NULL, ANY]),
    p(id::STRNCMP, Integer, &[MEM_RD, SIZE, CONST_STR]),
    p(id::XDP_GET_BUFF_LEN, Integer, &[CTX]),
    p(id::XDP_LOAD_BYTES, Integer, &[CTX, ANY, UNINIT_MEM, SIZE]),
    p(id::XDP_STORE_BYTES, Integer, &[CTX, ANY, MEM_RD, SIZE]),
    sleeps(gpl(p(
        191,
        Integer,
        &[UNINIT_MEM, SIZE_OR_ZERO, ANY, BTF_ID, ANY],
    ))),
    p(
        194,
        KptrXchg,
        &[
            ArgType::new(ArgBase::KptrXchgDest),
            ArgType::with(ArgBase::PtrToBtfId, PTR_MAYBE_NULL | OBJ_RELEASE),
        ],
    ),
    pkt(p(
        id::MAP_LOOKUP_PERCPU_ELEM,
        MapValueOrNull,
        &[MAP, KEY, ANY],
    )),
    p(
        id::SKC_TO_MPTCP_SOCK,
        BtfIdOrNull,
        &[ArgType::new(ArgBase::PtrToSockCommon)],
    ),
    p(
        197,
        Integer,
        &[
            UNINIT_MEM,
            SIZE_OR_ZERO,
            ANY,
            ArgType::with(ArgBase::PtrToDynptr, DYNPTR_TYPE_LOCAL | MEM_UNINIT),
        ],
    ),
    p(
        198,
        Integer,
        &[
            MAP,
            ANY,
            ANY,
            ArgType::with(ArgBase::PtrToDynptr, DYNPTR_TYPE_RINGBUF | MEM_UNINIT),
        ],
    ),
    p(
        199,
        Void,
        &[
            ArgType::with(ArgBase::PtrToDynptr, DYNPTR_TYPE_RINGBUF | OBJ_RELEASE),
            ANY,
        ],
    ),
    p(
        200,
        Void,
        &[
            ArgType::with(ArgBase::PtrToDynptr, DYNPTR_TYPE_RINGBUF | OBJ_RELEASE),
            ANY,
        ],
    ),
    p(
        201,
        Integer,
        &[
            UNINIT_MEM,
            SIZE_OR_ZERO,
            ArgType::with(ArgBase::PtrToDynptr, MEM_RDONLY),
            ANY,
            ANY,
        ],
    ),
    p(
        202,
        Integer,
        &[
            ArgType::with(ArgBase::PtrToDynptr, MEM_RDONLY),
            ANY,
            MEM_RD,
            SIZE_OR_ZERO,
            ANY,
        ],
    ),
    p(
        203,
        DynptrMemOrNull,
        &[
            ArgType::with(ArgBase::PtrToDynptr, MEM_RDONLY),
            ANY,
            ALLOC_SIZE_OR_ZERO,
        ],
    ),
    gpl(p(
        204,
        Integer,
        &[ArgType::fixed_mem(MEM_RDONLY, 20), MEM_RD, SIZE_OR_ZERO],
    )),
    gpl(p(
        205,
        Integer,
        &[ArgType::fixed_mem(MEM_RDONLY, 40), MEM_RD, SIZE_OR_ZERO],
    )),
    gpl(p(
        206,
        Integer,
        &[
            ArgType::fixed_mem(MEM_RDONLY, 20),
            ArgType::fixed_mem(MEM_RDONLY, 20),
        ],
    )),
    gpl(p(
        207,
        Integer,
        &[
            ArgType::fixed_mem(MEM_RDONLY, 40),
            ArgType::fixed_mem(MEM_RDONLY, 20),
        ],
    )),
    p(id::KTIME_GET_TAI_NS, Integer, &[]),
    p(
        id::USER_RINGBUF_DRAIN,
        Integer,
        &[MAP, FUNC, STACK_OR_NULL, ANY],
    ),
    p(
        210,
        MapValueOrNull,
        &[MAP, BTF_ID_OR_NULL, VALUE_OR_NULL, ANY],
    ),
    p(id::CGRP_STORAGE_DELETE, Integer, &[MAP, BTF_ID]),
];

/// The prototype of helper `id` for an XDP program, or `None` when XDP may not call it
/// ("program of this type cannot use helper").
pub fn xdp_proto(id: i32) -> Option<&'static FuncProto> {
    XDP_PROTOS
        .binary_search_by_key(&id, |f| f.id)
        .ok()
        .map(|i| &XDP_PROTOS[i])
}

/// Helper `id`'s prototype for an XDP program as `kernel` types it: 6.18's, with the
/// arguments older kernels typed otherwise.
pub fn xdp_proto_of(kernel: KernelVersion, id: i32) -> Option<FuncProto> {
    let mut proto = *xdp_proto(id)?;
    match id {
        // A zero-sized tuple was refused ("invalid zero-sized read") before 6.2.
        id::SK_LOOKUP_TCP | id::SK_LOOKUP_UDP | id::SKC_LOOKUP_TCP
            if kernel <= KernelVersion::V6_1 =>
        {
            proto.args[2] = SIZE;
        }
        // The parameters were memory the helper reads, so unwritten stack below the frame's
        // allocation is refused on 5.10 and 6.1 (`MEM_WRITE` came after 6.12).
        id::FIB_LOOKUP if kernel <= KernelVersion::V6_12 => {
            proto.args[1] = ArgType::new(ArgBase::PtrToMem);
        }
        _ => {}
    }
    Some(proto)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_sizes_follow_memory() {
        assert!(XDP_PROTOS.windows(2).all(|w| w[0].id < w[1].id));
        for f in XDP_PROTOS {
            for (i, a) in f.args.iter().enumerate() {
                if a.is_mem_size() {
                    let prev = f.args[i - 1];
                    assert_eq!(
                        prev.base,
                        ArgBase::PtrToMem,
                        "helper {} arg {}",
                        f.id,
                        i + 1
                    );
                    assert_eq!(prev.flags & MEM_FIXED_SIZE, 0);
                }
            }
            let n = f.arg_count();
            assert!(f.args[n..].iter().all(|a| a.base == ArgBase::DontCare));
        }
    }

    #[test]
    fn lookups_by_id() {
        assert_eq!(xdp_proto(1).unwrap().ret, RetType::MapValueOrNull);
        assert!(xdp_proto(9).is_none(), "skb_store_bytes is not for XDP");
        assert!(xdp_proto(0).is_none());
        assert_eq!(xdp_proto(131).unwrap().name(), "bpf_ringbuf_reserve");
        assert_eq!(helper_display_name(212), "unknown");
    }
}
