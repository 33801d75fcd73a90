//! XDP: `struct xdp_md` access rules (`xdp_is_valid_access` in net/core/filter.c) and the
//! return range.

use super::{CtxAccess, ProgTypeOps, RetvalRange};
use crate::state::RegType;

/// The XDP program type.
pub struct Xdp;

/// `sizeof(struct xdp_md)`: data, data_end, data_meta, ingress_ifindex, rx_queue_index,
/// egress_ifindex.
const XDP_MD_SIZE: i32 = 24;

impl ProgTypeOps for Xdp {
    fn name(&self) -> &'static str {
        "xdp"
    }

    fn ctx_access(&self, off: i32, size: u32, write: bool, _prog_flags: u32) -> Option<CtxAccess> {
        if write || !(0..XDP_MD_SIZE).contains(&off) || off % size as i32 != 0 {
            return None;
        }
        let field_off = off & !3;
        let reg_type = match field_off {
            0 => RegType::Packet,
            4 => RegType::PacketEnd,
            8 => RegType::PacketMeta,
            _ => RegType::Scalar,
        };
        if reg_type != RegType::Scalar && size != 4 {
            return None;
        }
        if size > 4 {
            return None;
        }
        Some(CtxAccess {
            reg_type,
            ctx_field_size: 4,
            field_off,
        })
    }

    fn return_range(&self, _expected_attach_type: u32) -> Option<RetvalRange> {
        None
    }

    fn may_write_packet(&self) -> bool {
        true
    }
}
