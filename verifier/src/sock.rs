//! Socket pointers (`PTR_TO_SOCKET`, `PTR_TO_SOCK_COMMON`, `PTR_TO_XDP_SOCK`): what a load
//! through one may read (`check_sock_access` and net/core/filter.c's
//! `bpf_sock_is_valid_access`, `bpf_sock_common_is_valid_access`,
//! `bpf_xdp_sock_is_valid_access`). Programs see a socket as `struct bpf_sock` (or
//! `struct bpf_xdp_sock`) and may only read it.

use crate::env::Env;
use crate::log::reg_type_name;
use crate::state::reg::{RegState, RegType};
use crate::{Errno, Reject};

/// `sizeof(struct bpf_sock)`.
const BPF_SOCK_SIZE: i32 = 80;
/// `offsetof(struct bpf_sock, type)`: the first field a `sock_common` lacks.
const TYPE: i32 = 8;
/// `offsetof(struct bpf_sock, priority)`: the last field a `sock_common` lacks.
const PRIORITY: i32 = 20;
/// `offsetof(struct bpf_sock, dst_port)` (`__be16`, then 16 bits of padding).
const DST_PORT: i32 = 48;

/// The fields read whole or in power-of-two parts: `family`, `type`, `protocol`, `src_port`,
/// `state` and `rx_queue_mapping` at their first byte only; `src_ip4`, `src_ip6`, `dst_ip4`
/// and `dst_ip6` at any byte (`bpf_ctx_range`).
fn narrow_readable(off: i32) -> bool {
    matches!(off, 4 | 8 | 12 | 44 | 72 | 76) || (24..44).contains(&off) || (52..72).contains(&off)
}

/// `bpf_ctx_narrow_access_ok`: a power of two no wider than the field.
fn narrow_access_ok(size: i32, field_size: i32) -> bool {
    size <= field_size && size & (size - 1) == 0
}

/// `bpf_sock_is_valid_access` for a read of `size` bytes at `off`.
pub fn bpf_sock_is_valid_access(off: i32, size: i32) -> bool {
    if !(0..BPF_SOCK_SIZE).contains(&off) || off % size != 0 {
        return false;
    }
    if narrow_readable(off) {
        return narrow_access_ok(size, 4);
    }
    match off {
        // dst_port: a 4-byte read covers the padding; narrower reads stay within the port.
        DST_PORT | 49 => narrow_access_ok(size, if size == 4 { 4 } else { 2 }),
        50 | 51 => false,
        _ => size == 4,
    }
}

/// `bpf_sock_common_is_valid_access`: `type`, `protocol`, `mark` and `priority` live only in
/// a full socket.
pub fn bpf_sock_common_is_valid_access(off: i32, size: i32) -> bool {
    if (TYPE..PRIORITY + 4).contains(&off) {
        return false;
    }
    bpf_sock_is_valid_access(off, size)
}

/// The `ctx_field_size` `bpf_sock_is_valid_access` records for a valid read (0 where it
/// records none: those fields are read whole only).
pub fn bpf_sock_field_size(off: i32, size: i32) -> u32 {
    match off {
        DST_PORT | 49 if size == 4 => 4,
        DST_PORT | 49 => 2,
        _ if narrow_readable(off) => 4,
        _ => 0,
    }
}

/// `bpf_xdp_sock_is_valid_access`: `struct bpf_xdp_sock` is one `__u32 queue_id`.
pub fn bpf_xdp_sock_is_valid_access(off: i32, size: i32) -> bool {
    (0..4).contains(&off) && off % size == 0 && size == 4
}

/// `check_sock_access`: a load of `size` bytes at `off` (the register's fixed offset added)
/// through the socket pointer in `regno`. Writes were refused before ("cannot write into").
pub fn check_sock_access(
    env: &mut Env<'_>,
    reg: &RegState,
    regno: u8,
    off: i32,
    size: i32,
) -> Result<(), Reject> {
    if reg.smin_value < 0 {
        return Err(env.reject(
            Errno::Eacces,
            format!(
                "R{regno} min value is negative, either use unsigned index or do a if (index >=0) check."
            ),
        ));
    }
    let valid = match reg.ty {
        RegType::SockCommon => bpf_sock_common_is_valid_access(off, size),
        RegType::Socket => bpf_sock_is_valid_access(off, size),
        RegType::XdpSock => bpf_xdp_sock_is_valid_access(off, size),
        // PTR_TO_TCP_SOCK comes from bpf_tcp_sock, which XDP may not call.
        _ => false,
    };
    if valid {
        let field_size = match reg.ty {
            RegType::XdpSock => 0,
            _ => bpf_sock_field_size(off, size),
        };
        let idx = env.insn_idx;
        env.aux[idx].sock_field_size = field_size;
        return Ok(());
    }
    let name = reg_type_name(env, reg);
    Err(env.reject(
        Errno::Eacces,
        format!("R{regno} invalid {name} access off={off} size={size}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bpf_sock_fields() {
        // family: whole or narrow at its first byte only.
        assert!(bpf_sock_is_valid_access(4, 4));
        assert!(bpf_sock_is_valid_access(4, 2));
        assert!(bpf_sock_is_valid_access(4, 1));
        assert!(!bpf_sock_is_valid_access(5, 1));
        // bound_dev_if, mark, priority: whole only.
        assert!(bpf_sock_is_valid_access(0, 4));
        assert!(!bpf_sock_is_valid_access(0, 2));
        assert!(!bpf_sock_is_valid_access(16, 1));
        // addresses: any byte.
        assert!(bpf_sock_is_valid_access(27, 1));
        assert!(bpf_sock_is_valid_access(70, 2));
        // dst_port and its padding.
        assert!(bpf_sock_is_valid_access(48, 4));
        assert!(bpf_sock_is_valid_access(49, 1));
        assert!(!bpf_sock_is_valid_access(50, 2));
        assert!(!bpf_sock_is_valid_access(48, 8));
        assert!(!bpf_sock_is_valid_access(80, 4));
        // The field sizes recorded for the conversion of narrow loads.
        assert_eq!(bpf_sock_field_size(4, 1), 4);
        assert_eq!(bpf_sock_field_size(49, 1), 2);
        assert_eq!(bpf_sock_field_size(48, 4), 4);
        assert_eq!(bpf_sock_field_size(16, 4), 0);
        assert!(!bpf_sock_is_valid_access(-4, 4));
        assert!(!bpf_sock_common_is_valid_access(8, 4));
        assert!(bpf_sock_common_is_valid_access(4, 4));
    }
}
