//! The XDP program's context, `struct xdp_md` (include/uapi/linux/bpf.h): six u32 fields that
//! the kernel's verifier rewrites (`xdp_convert_ctx_access` in net/core/filter.c) into loads
//! from the `xdp_buff`: `data`, `data_end` and `data_meta` become 64-bit pointer loads,
//! `ingress_ifindex` and `rx_queue_index` loads through `rxq`, `egress_ifindex` (devmap
//! programs only) through `txq`.
//!
//! Until bpfemu's verifier produces the xlated program, the ctx is a converted-ctx region of
//! [`Memory`](crate::Memory) whose aligned 4-byte loads return these converted values;
//! everything else (stores, narrow or wide loads) faults, as the verifier would refuse it.

/// The fields of `struct xdp_md`, by their index (offset / 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CtxField {
    Data = 0,
    DataEnd = 1,
    DataMeta = 2,
    IngressIfindex = 3,
    RxQueueIndex = 4,
    EgressIfindex = 5,
}

/// Number of fields: `sizeof(struct xdp_md) / 4`.
pub const FIELDS: usize = 6;
/// `sizeof(struct xdp_md)`.
pub const XDP_MD_SIZE: usize = FIELDS * 4;
