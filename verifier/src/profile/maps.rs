//! The map types each kernel version can create. `enum bpf_map_type` grows at its end, and a
//! version refuses a type past its own end with EINVAL before anything else about the map is
//! judged (`find_and_alloc_map`: the type indexes no `bpf_map_types` entry), and logs nothing.

use bpfemu_isa::KernelVersion::{self, *};
use bpfemu_isa::uapi::*;

/// The last map type of each version's `enum bpf_map_type`.
const LAST_MAP_TYPE: &[(KernelVersion, u32)] = &[
    (V5_10, BPF_MAP_TYPE_INODE_STORAGE),
    (V6_1, BPF_MAP_TYPE_USER_RINGBUF),
    (V6_12, BPF_MAP_TYPE_ARENA),
    (V6_18, BPF_MAP_TYPE_INSN_ARRAY),
    // 7.x adds BPF_MAP_TYPE_RHASH (35), a type bpfemu does not model.
    (V7_2, BPF_MAP_TYPE_INSN_ARRAY + 1),
];

/// Whether `version` has map type `map_type`.
pub fn has_map_type(version: KernelVersion, map_type: u32) -> bool {
    LAST_MAP_TYPE
        .iter()
        .find(|(v, _)| *v == version)
        .is_some_and(|&(_, last)| map_type <= last)
}

/// Why `version`'s `BPF_MAP_CREATE` refuses a map of `map_type` for its type alone: the errno
/// (EINVAL) and the reason bpfemu gives beside libbpf's line.
pub fn creation_refusal(version: KernelVersion, map_type: u32) -> Option<(Errno, String)> {
    if has_map_type(version, map_type) {
        return None;
    }
    let name = map_type_name(map_type).unwrap_or("this map type");
    Some((
        Errno::EINVAL,
        format!("{name} is newer than kernel {version}, which cannot create it"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 5.10.223 refused a user ringbuf and 6.1.170 an arena with EINVAL when booted under
    /// QEMU; 6.12.95 created both.
    #[test]
    fn types_arrive_by_version() {
        assert!(has_map_type(V5_10, BPF_MAP_TYPE_RINGBUF));
        assert!(!has_map_type(V5_10, BPF_MAP_TYPE_BLOOM_FILTER));
        assert!(has_map_type(V6_1, BPF_MAP_TYPE_USER_RINGBUF));
        assert!(!has_map_type(V6_1, BPF_MAP_TYPE_CGRP_STORAGE));
        assert!(has_map_type(V6_12, BPF_MAP_TYPE_ARENA));
        assert!(!has_map_type(V6_12, BPF_MAP_TYPE_INSN_ARRAY));
        assert_eq!(creation_refusal(V6_18, BPF_MAP_TYPE_ARENA), None);
        let (errno, why) = creation_refusal(V6_1, BPF_MAP_TYPE_ARENA).unwrap();
        assert_eq!(errno, Errno::EINVAL);
        assert_eq!(
            why,
            "BPF_MAP_TYPE_ARENA is newer than kernel 6.1, which cannot create it"
        );
    }
}
