//! The kfuncs an XDP program may call in each kernel, where that differs from 6.18's sets
//! (`call/kfunc_sets.rs`).
//!
//! Measured: every function 6.18's or 7.2's vmlinux BTF tags `bpf_kfunc` (325 names) was
//! called from a three-instruction XDP program in each kernel booted under QEMU (the probe
//! `call kfunc[NAME]; r0 = 2; exit` judged by `probe_verdicts` in the guest). A kfunc the
//! kernel has and refuses as "calling kernel function NAME is not allowed" is outside its
//! XDP sets; any other answer (an argument refused, "program must be sleepable") is inside.
//! A name the kernel's BTF lacks never reaches the verifier: the loader refuses it against
//! that kernel's BTF.
//!
//! - 5.10 decodes no kfunc call at all (`insns`: "BPF_CALL uses reserved fields").
//! - 6.1 gives XDP none of the vmlinux kfuncs it has (the key kfuncs, test and TCP
//!   congestion functions among them); its conntrack kfuncs live in a module, which bpfemu
//!   does not read.
//! - 6.12 gives XDP 6.18's sets minus the key kfuncs (from 6.13 on they are in every
//!   program type's set), plus `crash_kexec`, which this machine's 6.18 lacks.
//! - 7.2 gives XDP 6.18's sets plus the kfuncs added since, listed in [`ADDED_IN_7_2`];
//!   bpfemu does not model those yet, and answers "not yet supported" for a call of one.

use crate::call::kfunc_sets::in_xdp_sets;
use bpfemu_isa::KernelVersion::{self, *};

/// In 6.18's sets, not in 6.12's: the key kfuncs, registered for tracing programs only.
const KEY_KFUNCS: &[&str] = &[
    "bpf_key_put",
    "bpf_lookup_system_key",
    "bpf_lookup_user_key",
    "bpf_verify_pkcs7_signature",
];

/// In 6.12's and 7.2's XDP sets, absent from this machine's 6.18 (built without it).
const CRASH_KEXEC: &str = "crash_kexec";

/// In 7.2's XDP sets and not in 6.18's (sorted).
pub const ADDED_IN_7_2: &[&str] = &[
    "bpf_dynptr_file_discard",
    "bpf_dynptr_from_file",
    "bpf_get_mem_cgroup",
    "bpf_get_root_mem_cgroup",
    "bpf_list_add",
    "bpf_list_del",
    "bpf_list_empty",
    "bpf_list_is_first",
    "bpf_list_is_last",
    "bpf_list_push_back",
    "bpf_list_push_front",
    "bpf_mem_cgroup_flush_stats",
    "bpf_mem_cgroup_memory_events",
    "bpf_mem_cgroup_page_state",
    "bpf_mem_cgroup_usage",
    "bpf_mem_cgroup_vm_events",
    "bpf_obj_drop",
    "bpf_obj_new",
    "bpf_percpu_obj_drop",
    "bpf_percpu_obj_new",
    "bpf_put_mem_cgroup",
    "bpf_rbtree_add",
    "bpf_refcount_acquire",
    "bpf_strcasestr",
    "bpf_stream_print_stack",
    "bpf_stream_vprintk",
    "bpf_strncasecmp",
    "bpf_strncasestr",
    "bpf_task_work_schedule_resume",
    "bpf_task_work_schedule_signal",
    "bpf_timer_cancel_async",
    "bpf_verify_pkcs7_signature",
    "bpf_wq_set_callback",
];

/// Sleepable among [`ADDED_IN_7_2`]: refused to a non-sleepable XDP program.
const SLEEPABLE_ADDED_IN_7_2: &[&str] = &["bpf_verify_pkcs7_signature"];

/// Whether `kernel` lets XDP call the kfunc `name` (sleepable ones included).
pub fn xdp_may_call(kernel: KernelVersion, name: &str) -> bool {
    match kernel {
        V5_10 | V6_1 => false,
        V6_12 => (in_xdp_sets(name) && !KEY_KFUNCS.contains(&name)) || name == CRASH_KEXEC,
        V6_18 => in_xdp_sets(name),
        V7_2 => in_xdp_sets(name) || ADDED_IN_7_2.binary_search(&name).is_ok(),
    }
}

/// Whether the kfunc `name`, which `kernel` lets XDP call, is refused as sleepable.
pub fn is_sleepable(kernel: KernelVersion, name: &str) -> bool {
    crate::call::kfunc_sets::is_sleepable(name)
        || (kernel == V7_2 && SLEEPABLE_ADDED_IN_7_2.contains(&name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_7_2_additions_are_sorted_and_new() {
        assert!(ADDED_IN_7_2.windows(2).all(|w| w[0] < w[1]));
        assert!(ADDED_IN_7_2.iter().all(|n| !in_xdp_sets(n)));
    }

    #[test]
    fn key_kfuncs_reach_xdp_after_6_12() {
        assert!(!xdp_may_call(V6_12, "bpf_lookup_system_key"));
        assert!(xdp_may_call(V6_18, "bpf_lookup_system_key"));
        assert!(xdp_may_call(V6_12, "bpf_iter_num_new"));
        assert!(!xdp_may_call(V6_1, "bpf_iter_num_new"));
        assert!(xdp_may_call(V7_2, "bpf_obj_new") && !xdp_may_call(V6_18, "bpf_obj_new"));
    }
}
