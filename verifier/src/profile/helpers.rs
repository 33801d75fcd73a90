//! The helpers each kernel version has, which of them an XDP program may call there, and the
//! words of its refusal.
//!
//! A helper id past the version's `__BPF_FUNC_MAX_ID` is "invalid func unknown#%d" (the
//! version has no name for it). An id it has but that `xdp_func_proto` and
//! `bpf_base_func_proto` of that version do not give XDP is "unknown func %s#%d" up to 6.1 and
//! "program of this type cannot use helper %s#%d" from 6.12 (reworded between the two).
//!
//! XDP's helpers only grew from 5.10 to 6.18: later versions gave `bpf_base_func_proto` the
//! task, cgroup, perf and tracing helpers that any program may call. Each table below lists
//! the ids 6.18 gives XDP that the version does not (as root: the CAP_BPF and CAP_PERFMON
//! tiers open). They were read in each version's `net/core/filter.c` and
//! `kernel/bpf/helpers.c` and measured: every id from 0 to 229 called from an XDP program in
//! the version booted, the ids answered with one of the refusals above being the ones refused.
//! 7.2 gives XDP exactly 6.18's set.

use crate::call::proto::xdp_proto;
use bpfemu_isa::KernelVersion::{self, *};

/// The last helper id of each version (`__BPF_FUNC_MAX_ID - 1`).
const LAST_HELPER_ID: &[(KernelVersion, i32)] = &[
    (V5_10, 155), // bpf_redirect_peer
    (V6_1, 209),  // bpf_user_ringbuf_drain
    (V6_12, 211), // bpf_cgrp_storage_delete
    (V6_18, 211),
    (V7_2, 211),
];

/// Ids 6.18 lets XDP call that the version does not (ids past its last are left out).
const NOT_FOR_XDP: &[(KernelVersion, &[i32])] = &[
    (
        V5_10,
        &[
            14, 15, 16, 17, 22, 37, 55, 80, 105, 106, 109, 117, 120, 123, 141, 148,
        ],
    ),
    (
        V6_1,
        &[
            14, 15, 16, 17, 22, 37, 55, 80, 109, 117, 120, 123, 141, 148, 156, 157, 176, 180, 191,
        ],
    ),
    (
        V6_12,
        &[
            15, 16, 17, 22, 37, 55, 109, 117, 141, 148, 156, 157, 176, 180, 191,
        ],
    ),
    (V6_18, &[]),
    (V7_2, &[]),
];

fn entry<T: Copy>(table: &[(KernelVersion, T)], version: KernelVersion) -> Option<T> {
    table.iter().find(|(v, _)| *v == version).map(|&(_, t)| t)
}

/// Whether `version` has helper `id` at all.
pub fn has_helper(version: KernelVersion, id: i32) -> bool {
    entry(LAST_HELPER_ID, version).is_some_and(|last| (0..=last).contains(&id))
}

/// Whether an XDP program may call helper `id` in `version`.
pub fn xdp_may_call(version: KernelVersion, id: i32) -> bool {
    has_helper(version, id)
        && xdp_proto(id).is_some()
        && !entry(NOT_FOR_XDP, version).is_some_and(|ids| ids.contains(&id))
}

/// The message with which `version` refuses a call of helper `id` from XDP, or `None` when
/// it lets XDP call it.
pub fn refusal(version: KernelVersion, id: i32) -> Option<String> {
    if !has_helper(version, id) {
        return Some(format!("invalid func unknown#{id}"));
    }
    if xdp_may_call(version, id) {
        return None;
    }
    let name = crate::call::proto::helper_display_name(id);
    Some(match version {
        V5_10 | V6_1 => format!("unknown func {name}#{id}"),
        _ => format!("program of this type cannot use helper {name}#{id}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_sorted_and_within_range() {
        for (version, ids) in NOT_FOR_XDP {
            assert!(ids.windows(2).all(|w| w[0] < w[1]), "{version}");
            for &id in *ids {
                assert!(has_helper(*version, id), "{version}: {id}");
                assert!(
                    xdp_proto(id).is_some(),
                    "{version}: 6.18 refuses {id} already"
                );
            }
        }
        for version in KernelVersion::ALL {
            assert!(entry(LAST_HELPER_ID, version).is_some(), "{version}");
            assert!(entry(NOT_FOR_XDP, version).is_some(), "{version}");
        }
    }

    /// The words each kernel said when it was booted under QEMU (Debian's 5.10.223, 6.1.170,
    /// 6.12.95 and 7.2.12) and on this machine's 6.18, for an XDP program calling the helper.
    #[test]
    fn refusals_in_each_kernels_words() {
        let pid_tgid = 14;
        assert_eq!(
            refusal(V5_10, pid_tgid).as_deref(),
            Some("unknown func bpf_get_current_pid_tgid#14")
        );
        assert_eq!(
            refusal(V6_1, pid_tgid).as_deref(),
            Some("unknown func bpf_get_current_pid_tgid#14")
        );
        assert_eq!(refusal(V6_12, pid_tgid), None);
        let uid_gid = 15;
        assert_eq!(
            refusal(V6_12, uid_gid).as_deref(),
            Some("program of this type cannot use helper bpf_get_current_uid_gid#15")
        );
        assert_eq!(refusal(V6_18, uid_gid), None);
        assert_eq!(refusal(V7_2, uid_gid), None);
        // Past the version's last id: no name.
        assert_eq!(
            refusal(V5_10, 160).as_deref(),
            Some("invalid func unknown#160")
        );
        assert_eq!(refusal(V6_1, 160), None);
        assert_eq!(
            refusal(V6_1, 211).as_deref(),
            Some("invalid func unknown#211")
        );
        assert_eq!(
            refusal(V7_2, 212).as_deref(),
            Some("invalid func unknown#212")
        );
        // A helper XDP never may call, in each version's words.
        assert_eq!(
            refusal(V6_1, 0).as_deref(),
            Some("unknown func bpf_unspec#0")
        );
        assert_eq!(
            refusal(V7_2, 0).as_deref(),
            Some("program of this type cannot use helper bpf_unspec#0")
        );
    }
}
