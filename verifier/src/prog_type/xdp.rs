//! XDP: `struct xdp_md` access rules (`xdp_is_valid_access` in net/core/filter.c), the return
//! range, and the layout the ctx conversion rewrites loads to (`xdp_convert_ctx_access`).
//!
//! Measured on 6.18 (tests/xdp_ctx_kernel.rs): every field is read whole, 4 bytes at its own
//! offset, never narrower or wider; nothing is written; `egress_ifindex` only by programs
//! loaded for a devmap (`BPF_XDP_DEVMAP`); any return value is accepted.

use super::{CtxAccess, ProgTypeOps, RetvalRange};
use crate::state::RegType;

/// The XDP program type.
pub struct Xdp;

/// `sizeof(struct xdp_md)`: data, data_end, data_meta, ingress_ifindex, rx_queue_index,
/// egress_ifindex.
pub const XDP_MD_SIZE: i32 = 24;

/// `struct xdp_md` field offsets.
pub const XDP_MD_DATA: i32 = 0;
pub const XDP_MD_DATA_END: i32 = 4;
pub const XDP_MD_DATA_META: i32 = 8;
pub const XDP_MD_INGRESS_IFINDEX: i32 = 12;
pub const XDP_MD_RX_QUEUE_INDEX: i32 = 16;
pub const XDP_MD_EGRESS_IFINDEX: i32 = 20;

/// `BPF_XDP_DEVMAP`: the only attach type whose programs see `egress_ifindex`.
pub const BPF_XDP_DEVMAP: u32 = 33;

impl ProgTypeOps for Xdp {
    fn name(&self) -> &'static str {
        "xdp"
    }

    fn ctx_access(
        &self,
        off: i32,
        size: u32,
        write: bool,
        expected_attach_type: u32,
    ) -> Option<CtxAccess> {
        if off == XDP_MD_EGRESS_IFINDEX && expected_attach_type != BPF_XDP_DEVMAP {
            return None;
        }
        // Writes are for offloaded programs only (rx_queue_index), which bpfemu does not load.
        if write {
            return None;
        }
        // `__is_valid_xdp_access`: inside the struct, aligned, exactly one u32 field.
        if !(0..XDP_MD_SIZE).contains(&off) || size != 4 || off % 4 != 0 {
            return None;
        }
        let reg_type = match off {
            XDP_MD_DATA => RegType::Packet,
            XDP_MD_DATA_END => RegType::PacketEnd,
            XDP_MD_DATA_META => RegType::PacketMeta,
            _ => RegType::Scalar,
        };
        Some(CtxAccess {
            reg_type,
            ctx_field_size: 4,
            field_off: off,
        })
    }

    fn return_range(&self, _expected_attach_type: u32) -> Option<RetvalRange> {
        // 6.18's check_return_code has no case for XDP: as root any R0 is accepted (a pointer
        // too, since root may leak pointers).
        None
    }

    fn may_write_packet(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_fields_are_read() {
        let xdp = Xdp;
        assert_eq!(
            xdp.ctx_access(0, 4, false, 0).map(|a| a.reg_type),
            Some(RegType::Packet)
        );
        assert!(xdp.ctx_access(12, 2, false, 0).is_none(), "no narrow loads");
        assert!(xdp.ctx_access(0, 8, false, 0).is_none());
        assert!(xdp.ctx_access(16, 4, true, 0).is_none(), "no writes");
        assert!(xdp.ctx_access(20, 4, false, 0).is_none());
        assert!(xdp.ctx_access(20, 4, false, BPF_XDP_DEVMAP).is_some());
        assert!(xdp.ctx_access(24, 4, false, BPF_XDP_DEVMAP).is_none());
    }
}
