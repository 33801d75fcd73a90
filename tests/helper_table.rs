//! A helper is three things in three crates: its id and name (`bpfemu_isa::helpers`, the one
//! list), its 6.18 prototype for XDP (the verifier's `call::proto::XDP_PROTOS`) and its
//! implementation (the vm's `xdp::helpers::HELPERS`). This test ties them: every helper the vm
//! runs is one the verifier types for XDP, under the same name, and every helper the verifier
//! lets an XDP program call that the vm cannot run is named here, so that adding either half
//! alone fails until the other half (or this list) follows.

use bpfemu::isa::helpers::{helper_name, id};
use bpfemu_verifier::call::proto::{XDP_PROTOS, xdp_proto};
use bpfemu_vm::xdp::helpers::HELPERS;
use std::collections::BTreeSet;

/// Helpers XDP may call in 6.18 that bpfemu verifies but does not run (tracing and task
/// helpers the kernel offers every program type, socket lookups, timers, dynptrs, syncookies,
/// and a few of the packet path's): a program calling one is refused by name when its runtime
/// is prepared, never in the middle of a replay.
const VERIFIED_NOT_RUN: &[i32] = &[
    id::GET_CURRENT_PID_TGID,
    id::GET_CURRENT_UID_GID,
    id::GET_CURRENT_COMM,
    id::GET_CGROUP_CLASSID,
    id::PERF_EVENT_READ,
    id::GET_CURRENT_TASK,
    id::CURRENT_TASK_UNDER_CGROUP,
    id::PERF_EVENT_READ_VALUE,
    id::GET_CURRENT_CGROUP_ID,
    id::SK_LOOKUP_TCP,
    id::SK_LOOKUP_UDP,
    id::SK_RELEASE,
    id::SKC_LOOKUP_TCP,
    id::TCP_CHECK_SYNCOOKIE,
    id::STRTOL,
    id::STRTOUL,
    id::SEND_SIGNAL,
    id::TCP_GEN_SYNCOOKIE,
    id::PROBE_READ_USER,
    id::PROBE_READ_KERNEL,
    id::PROBE_READ_USER_STR,
    id::PROBE_READ_KERNEL_STR,
    id::SEND_SIGNAL_THREAD,
    id::GET_NS_CURRENT_PID_TGID,
    id::GET_CURRENT_ANCESTOR_CGROUP_ID,
    id::SKC_TO_TCP6_SOCK,
    id::SKC_TO_TCP_SOCK,
    id::SKC_TO_TCP_TIMEWAIT_SOCK,
    id::SKC_TO_TCP_REQUEST_SOCK,
    id::SKC_TO_UDP6_SOCK,
    id::GET_TASK_STACK,
    id::COPY_FROM_USER,
    id::SNPRINTF_BTF,
    id::PER_CPU_PTR,
    id::THIS_CPU_PTR,
    id::TASK_STORAGE_GET,
    id::TASK_STORAGE_DELETE,
    id::GET_CURRENT_TASK_BTF,
    id::TIMER_INIT,
    id::TIMER_SET_CALLBACK,
    id::TIMER_START,
    id::TIMER_CANCEL,
    id::TASK_PT_REGS,
    id::GET_BRANCH_SNAPSHOT,
    id::SKC_TO_UNIX_SOCK,
    id::FIND_VMA,
    id::COPY_FROM_USER_TASK,
    id::KPTR_XCHG,
    id::MAP_LOOKUP_PERCPU_ELEM,
    id::SKC_TO_MPTCP_SOCK,
    id::DYNPTR_FROM_MEM,
    id::RINGBUF_RESERVE_DYNPTR,
    id::RINGBUF_SUBMIT_DYNPTR,
    id::RINGBUF_DISCARD_DYNPTR,
    id::DYNPTR_READ,
    id::DYNPTR_WRITE,
    id::DYNPTR_DATA,
    id::TCP_RAW_GEN_SYNCOOKIE_IPV4,
    id::TCP_RAW_GEN_SYNCOOKIE_IPV6,
    id::TCP_RAW_CHECK_SYNCOOKIE_IPV4,
    id::TCP_RAW_CHECK_SYNCOOKIE_IPV6,
    id::KTIME_GET_TAI_NS,
    id::USER_RINGBUF_DRAIN,
    id::CGRP_STORAGE_GET,
    id::CGRP_STORAGE_DELETE,
];

#[test]
fn every_implemented_helper_has_its_xdp_prototype_and_name() {
    for def in HELPERS {
        let proto = xdp_proto(def.id);
        assert!(
            proto.is_some(),
            "bpf_{} ({}) runs in the vm but XDP may not call it",
            def.name,
            def.id
        );
        assert_eq!(helper_name(def.id), Some(def.name), "helper {}", def.id);
    }
}

#[test]
fn every_xdp_prototype_is_implemented_or_named_as_not_run() {
    let implemented: BTreeSet<i32> = HELPERS.iter().map(|h| h.id).collect();
    let not_run: BTreeSet<i32> = XDP_PROTOS
        .iter()
        .map(|p| p.id)
        .filter(|id| !implemented.contains(id))
        .collect();
    let named: BTreeSet<i32> = VERIFIED_NOT_RUN.iter().copied().collect();
    let names = |ids: &BTreeSet<i32>| -> Vec<String> {
        ids.iter()
            .map(|&i| format!("bpf_{} ({i})", helper_name(i).unwrap_or("?")))
            .collect()
    };
    assert_eq!(
        names(&not_run),
        names(&named),
        "the helpers XDP may call that the vm does not run"
    );
}
