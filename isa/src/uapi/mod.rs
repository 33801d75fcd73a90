//! The kernel's numbers, said once (`include/uapi/linux/bpf.h` of Linux 6.18): program,
//! attach and map types with their names, load and map flags, XDP actions, and the helpers'
//! ids ([`helpers`]), so that every crate speaks the kernel's and bpftool's vocabulary and no
//! crate spells a kernel number of its own.

mod errno;
pub mod helpers;

pub use errno::Errno;

// `enum xdp_action`.
pub const XDP_ABORTED: u32 = 0;
pub const XDP_DROP: u32 = 1;
pub const XDP_PASS: u32 = 2;
pub const XDP_TX: u32 = 3;
pub const XDP_REDIRECT: u32 = 4;

// `enum bpf_prog_type`.
pub const BPF_PROG_TYPE_UNSPEC: u32 = 0;
pub const BPF_PROG_TYPE_SOCKET_FILTER: u32 = 1;
pub const BPF_PROG_TYPE_KPROBE: u32 = 2;
pub const BPF_PROG_TYPE_SCHED_CLS: u32 = 3;
pub const BPF_PROG_TYPE_SCHED_ACT: u32 = 4;
pub const BPF_PROG_TYPE_TRACEPOINT: u32 = 5;
pub const BPF_PROG_TYPE_XDP: u32 = 6;
pub const BPF_PROG_TYPE_PERF_EVENT: u32 = 7;
pub const BPF_PROG_TYPE_CGROUP_SKB: u32 = 8;
pub const BPF_PROG_TYPE_CGROUP_SOCK: u32 = 9;
pub const BPF_PROG_TYPE_LWT_IN: u32 = 10;
pub const BPF_PROG_TYPE_LWT_OUT: u32 = 11;
pub const BPF_PROG_TYPE_LWT_XMIT: u32 = 12;
pub const BPF_PROG_TYPE_SOCK_OPS: u32 = 13;
pub const BPF_PROG_TYPE_SK_SKB: u32 = 14;
pub const BPF_PROG_TYPE_CGROUP_DEVICE: u32 = 15;
pub const BPF_PROG_TYPE_SK_MSG: u32 = 16;
pub const BPF_PROG_TYPE_RAW_TRACEPOINT: u32 = 17;
pub const BPF_PROG_TYPE_CGROUP_SOCK_ADDR: u32 = 18;
pub const BPF_PROG_TYPE_LWT_SEG6LOCAL: u32 = 19;
pub const BPF_PROG_TYPE_LIRC_MODE2: u32 = 20;
pub const BPF_PROG_TYPE_SK_REUSEPORT: u32 = 21;
pub const BPF_PROG_TYPE_FLOW_DISSECTOR: u32 = 22;
pub const BPF_PROG_TYPE_CGROUP_SYSCTL: u32 = 23;
pub const BPF_PROG_TYPE_RAW_TRACEPOINT_WRITABLE: u32 = 24;
pub const BPF_PROG_TYPE_CGROUP_SOCKOPT: u32 = 25;
pub const BPF_PROG_TYPE_TRACING: u32 = 26;
pub const BPF_PROG_TYPE_STRUCT_OPS: u32 = 27;
pub const BPF_PROG_TYPE_EXT: u32 = 28;
pub const BPF_PROG_TYPE_LSM: u32 = 29;
pub const BPF_PROG_TYPE_SK_LOOKUP: u32 = 30;
pub const BPF_PROG_TYPE_SYSCALL: u32 = 31;
pub const BPF_PROG_TYPE_NETFILTER: u32 = 32;
// `enum bpf_attach_type`.
pub const BPF_CGROUP_INET_INGRESS: u32 = 0;
pub const BPF_CGROUP_INET_EGRESS: u32 = 1;
pub const BPF_CGROUP_INET_SOCK_CREATE: u32 = 2;
pub const BPF_CGROUP_SOCK_OPS: u32 = 3;
pub const BPF_SK_SKB_STREAM_PARSER: u32 = 4;
pub const BPF_SK_SKB_STREAM_VERDICT: u32 = 5;
pub const BPF_CGROUP_DEVICE: u32 = 6;
pub const BPF_SK_MSG_VERDICT: u32 = 7;
pub const BPF_CGROUP_INET4_BIND: u32 = 8;
pub const BPF_CGROUP_INET6_BIND: u32 = 9;
pub const BPF_CGROUP_INET4_CONNECT: u32 = 10;
pub const BPF_CGROUP_INET6_CONNECT: u32 = 11;
pub const BPF_CGROUP_INET4_POST_BIND: u32 = 12;
pub const BPF_CGROUP_INET6_POST_BIND: u32 = 13;
pub const BPF_CGROUP_UDP4_SENDMSG: u32 = 14;
pub const BPF_CGROUP_UDP6_SENDMSG: u32 = 15;
pub const BPF_LIRC_MODE2: u32 = 16;
pub const BPF_FLOW_DISSECTOR: u32 = 17;
pub const BPF_CGROUP_SYSCTL: u32 = 18;
pub const BPF_CGROUP_UDP4_RECVMSG: u32 = 19;
pub const BPF_CGROUP_UDP6_RECVMSG: u32 = 20;
pub const BPF_CGROUP_GETSOCKOPT: u32 = 21;
pub const BPF_CGROUP_SETSOCKOPT: u32 = 22;
pub const BPF_TRACE_RAW_TP: u32 = 23;
pub const BPF_TRACE_FENTRY: u32 = 24;
pub const BPF_TRACE_FEXIT: u32 = 25;
pub const BPF_MODIFY_RETURN: u32 = 26;
pub const BPF_LSM_MAC: u32 = 27;
pub const BPF_TRACE_ITER: u32 = 28;
pub const BPF_CGROUP_INET4_GETPEERNAME: u32 = 29;
pub const BPF_CGROUP_INET6_GETPEERNAME: u32 = 30;
pub const BPF_CGROUP_INET4_GETSOCKNAME: u32 = 31;
pub const BPF_CGROUP_INET6_GETSOCKNAME: u32 = 32;
pub const BPF_XDP_DEVMAP: u32 = 33;
pub const BPF_CGROUP_INET_SOCK_RELEASE: u32 = 34;
pub const BPF_XDP_CPUMAP: u32 = 35;
pub const BPF_SK_LOOKUP: u32 = 36;
pub const BPF_XDP: u32 = 37;
pub const BPF_SK_SKB_VERDICT: u32 = 38;
pub const BPF_SK_REUSEPORT_SELECT: u32 = 39;
pub const BPF_SK_REUSEPORT_SELECT_OR_MIGRATE: u32 = 40;
pub const BPF_PERF_EVENT: u32 = 41;
pub const BPF_TRACE_KPROBE_MULTI: u32 = 42;
pub const BPF_LSM_CGROUP: u32 = 43;
pub const BPF_STRUCT_OPS: u32 = 44;
pub const BPF_NETFILTER: u32 = 45;
pub const BPF_TCX_INGRESS: u32 = 46;
pub const BPF_TCX_EGRESS: u32 = 47;
pub const BPF_TRACE_UPROBE_MULTI: u32 = 48;
pub const BPF_CGROUP_UNIX_CONNECT: u32 = 49;
pub const BPF_CGROUP_UNIX_SENDMSG: u32 = 50;
pub const BPF_CGROUP_UNIX_RECVMSG: u32 = 51;
pub const BPF_CGROUP_UNIX_GETPEERNAME: u32 = 52;
pub const BPF_CGROUP_UNIX_GETSOCKNAME: u32 = 53;
pub const BPF_NETKIT_PRIMARY: u32 = 54;
pub const BPF_NETKIT_PEER: u32 = 55;
pub const BPF_TRACE_KPROBE_SESSION: u32 = 56;
pub const BPF_TRACE_UPROBE_SESSION: u32 = 57;
pub const BPF_TRACE_FSESSION: u32 = 58;
// `enum bpf_map_type`.
pub const BPF_MAP_TYPE_UNSPEC: u32 = 0;
pub const BPF_MAP_TYPE_HASH: u32 = 1;
pub const BPF_MAP_TYPE_ARRAY: u32 = 2;
pub const BPF_MAP_TYPE_PROG_ARRAY: u32 = 3;
pub const BPF_MAP_TYPE_PERF_EVENT_ARRAY: u32 = 4;
pub const BPF_MAP_TYPE_PERCPU_HASH: u32 = 5;
pub const BPF_MAP_TYPE_PERCPU_ARRAY: u32 = 6;
pub const BPF_MAP_TYPE_STACK_TRACE: u32 = 7;
pub const BPF_MAP_TYPE_CGROUP_ARRAY: u32 = 8;
pub const BPF_MAP_TYPE_LRU_HASH: u32 = 9;
pub const BPF_MAP_TYPE_LRU_PERCPU_HASH: u32 = 10;
pub const BPF_MAP_TYPE_LPM_TRIE: u32 = 11;
pub const BPF_MAP_TYPE_ARRAY_OF_MAPS: u32 = 12;
pub const BPF_MAP_TYPE_HASH_OF_MAPS: u32 = 13;
pub const BPF_MAP_TYPE_DEVMAP: u32 = 14;
pub const BPF_MAP_TYPE_SOCKMAP: u32 = 15;
pub const BPF_MAP_TYPE_CPUMAP: u32 = 16;
pub const BPF_MAP_TYPE_XSKMAP: u32 = 17;
pub const BPF_MAP_TYPE_SOCKHASH: u32 = 18;
pub const BPF_MAP_TYPE_CGROUP_STORAGE_DEPRECATED: u32 = 19;
pub const BPF_MAP_TYPE_REUSEPORT_SOCKARRAY: u32 = 20;
pub const BPF_MAP_TYPE_PERCPU_CGROUP_STORAGE_DEPRECATED: u32 = 21;
pub const BPF_MAP_TYPE_QUEUE: u32 = 22;
pub const BPF_MAP_TYPE_STACK: u32 = 23;
pub const BPF_MAP_TYPE_SK_STORAGE: u32 = 24;
pub const BPF_MAP_TYPE_DEVMAP_HASH: u32 = 25;
pub const BPF_MAP_TYPE_STRUCT_OPS: u32 = 26;
pub const BPF_MAP_TYPE_RINGBUF: u32 = 27;
pub const BPF_MAP_TYPE_INODE_STORAGE: u32 = 28;
pub const BPF_MAP_TYPE_TASK_STORAGE: u32 = 29;
pub const BPF_MAP_TYPE_BLOOM_FILTER: u32 = 30;
pub const BPF_MAP_TYPE_USER_RINGBUF: u32 = 31;
pub const BPF_MAP_TYPE_CGRP_STORAGE: u32 = 32;
pub const BPF_MAP_TYPE_ARENA: u32 = 33;
pub const BPF_MAP_TYPE_INSN_ARRAY: u32 = 34;
// The cgroup storages keep their old names as aliases of the `_DEPRECATED` values, as the
// kernel's header does.
pub const BPF_MAP_TYPE_CGROUP_STORAGE: u32 = BPF_MAP_TYPE_CGROUP_STORAGE_DEPRECATED;
pub const BPF_MAP_TYPE_PERCPU_CGROUP_STORAGE: u32 = BPF_MAP_TYPE_PERCPU_CGROUP_STORAGE_DEPRECATED;

// Map creation flags (`map_flags`).
pub const BPF_F_NO_PREALLOC: u32 = 1 << 0;
pub const BPF_F_NO_COMMON_LRU: u32 = 1 << 1;
pub const BPF_F_NUMA_NODE: u32 = 1 << 2;
pub const BPF_F_RDONLY: u32 = 1 << 3;
pub const BPF_F_WRONLY: u32 = 1 << 4;
pub const BPF_F_ZERO_SEED: u32 = 1 << 6;
/// `BPF_F_RDONLY_PROG`: the program may only read the map.
pub const BPF_F_RDONLY_PROG: u32 = 1 << 7;
pub const BPF_F_WRONLY_PROG: u32 = 1 << 8;
/// `BPF_F_MMAPABLE`: userspace may mmap the array.
pub const BPF_F_MMAPABLE: u32 = 1 << 10;
pub const BPF_F_PRESERVE_ELEMS: u32 = 1 << 11;
/// `BPF_F_INNER_MAP`: an inner map template that stands for maps of any `max_entries`.
pub const BPF_F_INNER_MAP: u32 = 1 << 12;
/// The kernel's `BPF_F_ACCESS_MASK`.
pub const BPF_F_ACCESS_MASK: u32 =
    BPF_F_RDONLY | BPF_F_RDONLY_PROG | BPF_F_WRONLY | BPF_F_WRONLY_PROG;
/// `BPF_F_SLEEPABLE` program load flag.
pub const BPF_F_SLEEPABLE: u32 = 1 << 4;
/// `BPF_F_XDP_HAS_FRAGS` program load flag.
pub const BPF_F_XDP_HAS_FRAGS: u32 = 1 << 5;

/// `enum bpf_prog_type` names, indexed by value.
const PROG_TYPE_NAMES: &[&str] = &[
    "BPF_PROG_TYPE_UNSPEC",
    "BPF_PROG_TYPE_SOCKET_FILTER",
    "BPF_PROG_TYPE_KPROBE",
    "BPF_PROG_TYPE_SCHED_CLS",
    "BPF_PROG_TYPE_SCHED_ACT",
    "BPF_PROG_TYPE_TRACEPOINT",
    "BPF_PROG_TYPE_XDP",
    "BPF_PROG_TYPE_PERF_EVENT",
    "BPF_PROG_TYPE_CGROUP_SKB",
    "BPF_PROG_TYPE_CGROUP_SOCK",
    "BPF_PROG_TYPE_LWT_IN",
    "BPF_PROG_TYPE_LWT_OUT",
    "BPF_PROG_TYPE_LWT_XMIT",
    "BPF_PROG_TYPE_SOCK_OPS",
    "BPF_PROG_TYPE_SK_SKB",
    "BPF_PROG_TYPE_CGROUP_DEVICE",
    "BPF_PROG_TYPE_SK_MSG",
    "BPF_PROG_TYPE_RAW_TRACEPOINT",
    "BPF_PROG_TYPE_CGROUP_SOCK_ADDR",
    "BPF_PROG_TYPE_LWT_SEG6LOCAL",
    "BPF_PROG_TYPE_LIRC_MODE2",
    "BPF_PROG_TYPE_SK_REUSEPORT",
    "BPF_PROG_TYPE_FLOW_DISSECTOR",
    "BPF_PROG_TYPE_CGROUP_SYSCTL",
    "BPF_PROG_TYPE_RAW_TRACEPOINT_WRITABLE",
    "BPF_PROG_TYPE_CGROUP_SOCKOPT",
    "BPF_PROG_TYPE_TRACING",
    "BPF_PROG_TYPE_STRUCT_OPS",
    "BPF_PROG_TYPE_EXT",
    "BPF_PROG_TYPE_LSM",
    "BPF_PROG_TYPE_SK_LOOKUP",
    "BPF_PROG_TYPE_SYSCALL",
    "BPF_PROG_TYPE_NETFILTER",
];

/// `enum bpf_attach_type` names, indexed by value.
const ATTACH_TYPE_NAMES: &[&str] = &[
    "BPF_CGROUP_INET_INGRESS",
    "BPF_CGROUP_INET_EGRESS",
    "BPF_CGROUP_INET_SOCK_CREATE",
    "BPF_CGROUP_SOCK_OPS",
    "BPF_SK_SKB_STREAM_PARSER",
    "BPF_SK_SKB_STREAM_VERDICT",
    "BPF_CGROUP_DEVICE",
    "BPF_SK_MSG_VERDICT",
    "BPF_CGROUP_INET4_BIND",
    "BPF_CGROUP_INET6_BIND",
    "BPF_CGROUP_INET4_CONNECT",
    "BPF_CGROUP_INET6_CONNECT",
    "BPF_CGROUP_INET4_POST_BIND",
    "BPF_CGROUP_INET6_POST_BIND",
    "BPF_CGROUP_UDP4_SENDMSG",
    "BPF_CGROUP_UDP6_SENDMSG",
    "BPF_LIRC_MODE2",
    "BPF_FLOW_DISSECTOR",
    "BPF_CGROUP_SYSCTL",
    "BPF_CGROUP_UDP4_RECVMSG",
    "BPF_CGROUP_UDP6_RECVMSG",
    "BPF_CGROUP_GETSOCKOPT",
    "BPF_CGROUP_SETSOCKOPT",
    "BPF_TRACE_RAW_TP",
    "BPF_TRACE_FENTRY",
    "BPF_TRACE_FEXIT",
    "BPF_MODIFY_RETURN",
    "BPF_LSM_MAC",
    "BPF_TRACE_ITER",
    "BPF_CGROUP_INET4_GETPEERNAME",
    "BPF_CGROUP_INET6_GETPEERNAME",
    "BPF_CGROUP_INET4_GETSOCKNAME",
    "BPF_CGROUP_INET6_GETSOCKNAME",
    "BPF_XDP_DEVMAP",
    "BPF_CGROUP_INET_SOCK_RELEASE",
    "BPF_XDP_CPUMAP",
    "BPF_SK_LOOKUP",
    "BPF_XDP",
    "BPF_SK_SKB_VERDICT",
    "BPF_SK_REUSEPORT_SELECT",
    "BPF_SK_REUSEPORT_SELECT_OR_MIGRATE",
    "BPF_PERF_EVENT",
    "BPF_TRACE_KPROBE_MULTI",
    "BPF_LSM_CGROUP",
    "BPF_STRUCT_OPS",
    "BPF_NETFILTER",
    "BPF_TCX_INGRESS",
    "BPF_TCX_EGRESS",
    "BPF_TRACE_UPROBE_MULTI",
    "BPF_CGROUP_UNIX_CONNECT",
    "BPF_CGROUP_UNIX_SENDMSG",
    "BPF_CGROUP_UNIX_RECVMSG",
    "BPF_CGROUP_UNIX_GETPEERNAME",
    "BPF_CGROUP_UNIX_GETSOCKNAME",
    "BPF_NETKIT_PRIMARY",
    "BPF_NETKIT_PEER",
    "BPF_TRACE_KPROBE_SESSION",
    "BPF_TRACE_UPROBE_SESSION",
    "BPF_TRACE_FSESSION",
];

/// `enum bpf_map_type` names, indexed by value.
const MAP_TYPE_NAMES: &[&str] = &[
    "BPF_MAP_TYPE_UNSPEC",
    "BPF_MAP_TYPE_HASH",
    "BPF_MAP_TYPE_ARRAY",
    "BPF_MAP_TYPE_PROG_ARRAY",
    "BPF_MAP_TYPE_PERF_EVENT_ARRAY",
    "BPF_MAP_TYPE_PERCPU_HASH",
    "BPF_MAP_TYPE_PERCPU_ARRAY",
    "BPF_MAP_TYPE_STACK_TRACE",
    "BPF_MAP_TYPE_CGROUP_ARRAY",
    "BPF_MAP_TYPE_LRU_HASH",
    "BPF_MAP_TYPE_LRU_PERCPU_HASH",
    "BPF_MAP_TYPE_LPM_TRIE",
    "BPF_MAP_TYPE_ARRAY_OF_MAPS",
    "BPF_MAP_TYPE_HASH_OF_MAPS",
    "BPF_MAP_TYPE_DEVMAP",
    "BPF_MAP_TYPE_SOCKMAP",
    "BPF_MAP_TYPE_CPUMAP",
    "BPF_MAP_TYPE_XSKMAP",
    "BPF_MAP_TYPE_SOCKHASH",
    "BPF_MAP_TYPE_CGROUP_STORAGE",
    "BPF_MAP_TYPE_REUSEPORT_SOCKARRAY",
    "BPF_MAP_TYPE_PERCPU_CGROUP_STORAGE",
    "BPF_MAP_TYPE_QUEUE",
    "BPF_MAP_TYPE_STACK",
    "BPF_MAP_TYPE_SK_STORAGE",
    "BPF_MAP_TYPE_DEVMAP_HASH",
    "BPF_MAP_TYPE_STRUCT_OPS",
    "BPF_MAP_TYPE_RINGBUF",
    "BPF_MAP_TYPE_INODE_STORAGE",
    "BPF_MAP_TYPE_TASK_STORAGE",
    "BPF_MAP_TYPE_BLOOM_FILTER",
    "BPF_MAP_TYPE_USER_RINGBUF",
    "BPF_MAP_TYPE_CGRP_STORAGE",
    "BPF_MAP_TYPE_ARENA",
    "BPF_MAP_TYPE_INSN_ARRAY",
];

/// `BPF_PROG_TYPE_XDP` for 6; `None` past the kernel's table.
pub fn prog_type_name(value: u32) -> Option<&'static str> {
    PROG_TYPE_NAMES.get(value as usize).copied()
}

/// `BPF_XDP` for 37.
pub fn attach_type_name(value: u32) -> Option<&'static str> {
    ATTACH_TYPE_NAMES.get(value as usize).copied()
}

/// `BPF_MAP_TYPE_HASH` for 1.
pub fn map_type_name(value: u32) -> Option<&'static str> {
    MAP_TYPE_NAMES.get(value as usize).copied()
}

/// The short name bpftool prints (`hash`, `percpu_array`, `devmap`).
pub fn map_type_short_name(value: u32) -> Option<String> {
    map_type_name(value).map(|n| n.trim_start_matches("BPF_MAP_TYPE_").to_ascii_lowercase())
}

/// The short name bpftool prints for a program type (`xdp`, `sched_cls`).
pub fn prog_type_short_name(value: u32) -> Option<String> {
    prog_type_name(value).map(|n| n.trim_start_matches("BPF_PROG_TYPE_").to_ascii_lowercase())
}
