//! Helper function ids and names of Linux 6.18 (`include/uapi/linux/bpf.h`, `__BPF_FUNC_MAPPER`).
//!
//! The list has been frozen since 6.2 at id 211: new kernel functionality comes as kfuncs.

/// Declares every helper once, by id and name: the named ids ([`id`]) and the names by id
/// ([`HELPER_NAMES`]) both come from this one list.
macro_rules! helper_list {
    ($($id:literal $konst:ident $name:ident,)*) => {
        /// `enum bpf_func_id`: each helper's id by its name (`id::MAP_LOOKUP_ELEM` is
        /// `BPF_FUNC_map_lookup_elem`).
        pub mod id {
            $(pub const $konst: i32 = $id;)*
        }

        /// Helper names indexed by id, without the `bpf_` prefix; id 0 is `unspec`.
        pub const HELPER_NAMES: [&str; [$($id),*].len()] = [$(stringify!($name)),*];
    };
}

helper_list! {
    0 UNSPEC unspec,
    1 MAP_LOOKUP_ELEM map_lookup_elem,
    2 MAP_UPDATE_ELEM map_update_elem,
    3 MAP_DELETE_ELEM map_delete_elem,
    4 PROBE_READ probe_read,
    5 KTIME_GET_NS ktime_get_ns,
    6 TRACE_PRINTK trace_printk,
    7 GET_PRANDOM_U32 get_prandom_u32,
    8 GET_SMP_PROCESSOR_ID get_smp_processor_id,
    9 SKB_STORE_BYTES skb_store_bytes,
    10 L3_CSUM_REPLACE l3_csum_replace,
    11 L4_CSUM_REPLACE l4_csum_replace,
    12 TAIL_CALL tail_call,
    13 CLONE_REDIRECT clone_redirect,
    14 GET_CURRENT_PID_TGID get_current_pid_tgid,
    15 GET_CURRENT_UID_GID get_current_uid_gid,
    16 GET_CURRENT_COMM get_current_comm,
    17 GET_CGROUP_CLASSID get_cgroup_classid,
    18 SKB_VLAN_PUSH skb_vlan_push,
    19 SKB_VLAN_POP skb_vlan_pop,
    20 SKB_GET_TUNNEL_KEY skb_get_tunnel_key,
    21 SKB_SET_TUNNEL_KEY skb_set_tunnel_key,
    22 PERF_EVENT_READ perf_event_read,
    23 REDIRECT redirect,
    24 GET_ROUTE_REALM get_route_realm,
    25 PERF_EVENT_OUTPUT perf_event_output,
    26 SKB_LOAD_BYTES skb_load_bytes,
    27 GET_STACKID get_stackid,
    28 CSUM_DIFF csum_diff,
    29 SKB_GET_TUNNEL_OPT skb_get_tunnel_opt,
    30 SKB_SET_TUNNEL_OPT skb_set_tunnel_opt,
    31 SKB_CHANGE_PROTO skb_change_proto,
    32 SKB_CHANGE_TYPE skb_change_type,
    33 SKB_UNDER_CGROUP skb_under_cgroup,
    34 GET_HASH_RECALC get_hash_recalc,
    35 GET_CURRENT_TASK get_current_task,
    36 PROBE_WRITE_USER probe_write_user,
    37 CURRENT_TASK_UNDER_CGROUP current_task_under_cgroup,
    38 SKB_CHANGE_TAIL skb_change_tail,
    39 SKB_PULL_DATA skb_pull_data,
    40 CSUM_UPDATE csum_update,
    41 SET_HASH_INVALID set_hash_invalid,
    42 GET_NUMA_NODE_ID get_numa_node_id,
    43 SKB_CHANGE_HEAD skb_change_head,
    44 XDP_ADJUST_HEAD xdp_adjust_head,
    45 PROBE_READ_STR probe_read_str,
    46 GET_SOCKET_COOKIE get_socket_cookie,
    47 GET_SOCKET_UID get_socket_uid,
    48 SET_HASH set_hash,
    49 SETSOCKOPT setsockopt,
    50 SKB_ADJUST_ROOM skb_adjust_room,
    51 REDIRECT_MAP redirect_map,
    52 SK_REDIRECT_MAP sk_redirect_map,
    53 SOCK_MAP_UPDATE sock_map_update,
    54 XDP_ADJUST_META xdp_adjust_meta,
    55 PERF_EVENT_READ_VALUE perf_event_read_value,
    56 PERF_PROG_READ_VALUE perf_prog_read_value,
    57 GETSOCKOPT getsockopt,
    58 OVERRIDE_RETURN override_return,
    59 SOCK_OPS_CB_FLAGS_SET sock_ops_cb_flags_set,
    60 MSG_REDIRECT_MAP msg_redirect_map,
    61 MSG_APPLY_BYTES msg_apply_bytes,
    62 MSG_CORK_BYTES msg_cork_bytes,
    63 MSG_PULL_DATA msg_pull_data,
    64 BIND bind,
    65 XDP_ADJUST_TAIL xdp_adjust_tail,
    66 SKB_GET_XFRM_STATE skb_get_xfrm_state,
    67 GET_STACK get_stack,
    68 SKB_LOAD_BYTES_RELATIVE skb_load_bytes_relative,
    69 FIB_LOOKUP fib_lookup,
    70 SOCK_HASH_UPDATE sock_hash_update,
    71 MSG_REDIRECT_HASH msg_redirect_hash,
    72 SK_REDIRECT_HASH sk_redirect_hash,
    73 LWT_PUSH_ENCAP lwt_push_encap,
    74 LWT_SEG6_STORE_BYTES lwt_seg6_store_bytes,
    75 LWT_SEG6_ADJUST_SRH lwt_seg6_adjust_srh,
    76 LWT_SEG6_ACTION lwt_seg6_action,
    77 RC_REPEAT rc_repeat,
    78 RC_KEYDOWN rc_keydown,
    79 SKB_CGROUP_ID skb_cgroup_id,
    80 GET_CURRENT_CGROUP_ID get_current_cgroup_id,
    81 GET_LOCAL_STORAGE get_local_storage,
    82 SK_SELECT_REUSEPORT sk_select_reuseport,
    83 SKB_ANCESTOR_CGROUP_ID skb_ancestor_cgroup_id,
    84 SK_LOOKUP_TCP sk_lookup_tcp,
    85 SK_LOOKUP_UDP sk_lookup_udp,
    86 SK_RELEASE sk_release,
    87 MAP_PUSH_ELEM map_push_elem,
    88 MAP_POP_ELEM map_pop_elem,
    89 MAP_PEEK_ELEM map_peek_elem,
    90 MSG_PUSH_DATA msg_push_data,
    91 MSG_POP_DATA msg_pop_data,
    92 RC_POINTER_REL rc_pointer_rel,
    93 SPIN_LOCK spin_lock,
    94 SPIN_UNLOCK spin_unlock,
    95 SK_FULLSOCK sk_fullsock,
    96 TCP_SOCK tcp_sock,
    97 SKB_ECN_SET_CE skb_ecn_set_ce,
    98 GET_LISTENER_SOCK get_listener_sock,
    99 SKC_LOOKUP_TCP skc_lookup_tcp,
    100 TCP_CHECK_SYNCOOKIE tcp_check_syncookie,
    101 SYSCTL_GET_NAME sysctl_get_name,
    102 SYSCTL_GET_CURRENT_VALUE sysctl_get_current_value,
    103 SYSCTL_GET_NEW_VALUE sysctl_get_new_value,
    104 SYSCTL_SET_NEW_VALUE sysctl_set_new_value,
    105 STRTOL strtol,
    106 STRTOUL strtoul,
    107 SK_STORAGE_GET sk_storage_get,
    108 SK_STORAGE_DELETE sk_storage_delete,
    109 SEND_SIGNAL send_signal,
    110 TCP_GEN_SYNCOOKIE tcp_gen_syncookie,
    111 SKB_OUTPUT skb_output,
    112 PROBE_READ_USER probe_read_user,
    113 PROBE_READ_KERNEL probe_read_kernel,
    114 PROBE_READ_USER_STR probe_read_user_str,
    115 PROBE_READ_KERNEL_STR probe_read_kernel_str,
    116 TCP_SEND_ACK tcp_send_ack,
    117 SEND_SIGNAL_THREAD send_signal_thread,
    118 JIFFIES64 jiffies64,
    119 READ_BRANCH_RECORDS read_branch_records,
    120 GET_NS_CURRENT_PID_TGID get_ns_current_pid_tgid,
    121 XDP_OUTPUT xdp_output,
    122 GET_NETNS_COOKIE get_netns_cookie,
    123 GET_CURRENT_ANCESTOR_CGROUP_ID get_current_ancestor_cgroup_id,
    124 SK_ASSIGN sk_assign,
    125 KTIME_GET_BOOT_NS ktime_get_boot_ns,
    126 SEQ_PRINTF seq_printf,
    127 SEQ_WRITE seq_write,
    128 SK_CGROUP_ID sk_cgroup_id,
    129 SK_ANCESTOR_CGROUP_ID sk_ancestor_cgroup_id,
    130 RINGBUF_OUTPUT ringbuf_output,
    131 RINGBUF_RESERVE ringbuf_reserve,
    132 RINGBUF_SUBMIT ringbuf_submit,
    133 RINGBUF_DISCARD ringbuf_discard,
    134 RINGBUF_QUERY ringbuf_query,
    135 CSUM_LEVEL csum_level,
    136 SKC_TO_TCP6_SOCK skc_to_tcp6_sock,
    137 SKC_TO_TCP_SOCK skc_to_tcp_sock,
    138 SKC_TO_TCP_TIMEWAIT_SOCK skc_to_tcp_timewait_sock,
    139 SKC_TO_TCP_REQUEST_SOCK skc_to_tcp_request_sock,
    140 SKC_TO_UDP6_SOCK skc_to_udp6_sock,
    141 GET_TASK_STACK get_task_stack,
    142 LOAD_HDR_OPT load_hdr_opt,
    143 STORE_HDR_OPT store_hdr_opt,
    144 RESERVE_HDR_OPT reserve_hdr_opt,
    145 INODE_STORAGE_GET inode_storage_get,
    146 INODE_STORAGE_DELETE inode_storage_delete,
    147 D_PATH d_path,
    148 COPY_FROM_USER copy_from_user,
    149 SNPRINTF_BTF snprintf_btf,
    150 SEQ_PRINTF_BTF seq_printf_btf,
    151 SKB_CGROUP_CLASSID skb_cgroup_classid,
    152 REDIRECT_NEIGH redirect_neigh,
    153 PER_CPU_PTR per_cpu_ptr,
    154 THIS_CPU_PTR this_cpu_ptr,
    155 REDIRECT_PEER redirect_peer,
    156 TASK_STORAGE_GET task_storage_get,
    157 TASK_STORAGE_DELETE task_storage_delete,
    158 GET_CURRENT_TASK_BTF get_current_task_btf,
    159 BPRM_OPTS_SET bprm_opts_set,
    160 KTIME_GET_COARSE_NS ktime_get_coarse_ns,
    161 IMA_INODE_HASH ima_inode_hash,
    162 SOCK_FROM_FILE sock_from_file,
    163 CHECK_MTU check_mtu,
    164 FOR_EACH_MAP_ELEM for_each_map_elem,
    165 SNPRINTF snprintf,
    166 SYS_BPF sys_bpf,
    167 BTF_FIND_BY_NAME_KIND btf_find_by_name_kind,
    168 SYS_CLOSE sys_close,
    169 TIMER_INIT timer_init,
    170 TIMER_SET_CALLBACK timer_set_callback,
    171 TIMER_START timer_start,
    172 TIMER_CANCEL timer_cancel,
    173 GET_FUNC_IP get_func_ip,
    174 GET_ATTACH_COOKIE get_attach_cookie,
    175 TASK_PT_REGS task_pt_regs,
    176 GET_BRANCH_SNAPSHOT get_branch_snapshot,
    177 TRACE_VPRINTK trace_vprintk,
    178 SKC_TO_UNIX_SOCK skc_to_unix_sock,
    179 KALLSYMS_LOOKUP_NAME kallsyms_lookup_name,
    180 FIND_VMA find_vma,
    181 LOOP loop,
    182 STRNCMP strncmp,
    183 GET_FUNC_ARG get_func_arg,
    184 GET_FUNC_RET get_func_ret,
    185 GET_FUNC_ARG_CNT get_func_arg_cnt,
    186 GET_RETVAL get_retval,
    187 SET_RETVAL set_retval,
    188 XDP_GET_BUFF_LEN xdp_get_buff_len,
    189 XDP_LOAD_BYTES xdp_load_bytes,
    190 XDP_STORE_BYTES xdp_store_bytes,
    191 COPY_FROM_USER_TASK copy_from_user_task,
    192 SKB_SET_TSTAMP skb_set_tstamp,
    193 IMA_FILE_HASH ima_file_hash,
    194 KPTR_XCHG kptr_xchg,
    195 MAP_LOOKUP_PERCPU_ELEM map_lookup_percpu_elem,
    196 SKC_TO_MPTCP_SOCK skc_to_mptcp_sock,
    197 DYNPTR_FROM_MEM dynptr_from_mem,
    198 RINGBUF_RESERVE_DYNPTR ringbuf_reserve_dynptr,
    199 RINGBUF_SUBMIT_DYNPTR ringbuf_submit_dynptr,
    200 RINGBUF_DISCARD_DYNPTR ringbuf_discard_dynptr,
    201 DYNPTR_READ dynptr_read,
    202 DYNPTR_WRITE dynptr_write,
    203 DYNPTR_DATA dynptr_data,
    204 TCP_RAW_GEN_SYNCOOKIE_IPV4 tcp_raw_gen_syncookie_ipv4,
    205 TCP_RAW_GEN_SYNCOOKIE_IPV6 tcp_raw_gen_syncookie_ipv6,
    206 TCP_RAW_CHECK_SYNCOOKIE_IPV4 tcp_raw_check_syncookie_ipv4,
    207 TCP_RAW_CHECK_SYNCOOKIE_IPV6 tcp_raw_check_syncookie_ipv6,
    208 KTIME_GET_TAI_NS ktime_get_tai_ns,
    209 USER_RINGBUF_DRAIN user_ringbuf_drain,
    210 CGRP_STORAGE_GET cgrp_storage_get,
    211 CGRP_STORAGE_DELETE cgrp_storage_delete,
}

/// The highest helper id Linux 6.18 defines.
pub const MAX_HELPER_ID: i32 = HELPER_NAMES.len() as i32 - 1;

/// The name of helper `id` without the `bpf_` prefix (`map_lookup_elem`); `None` for an
/// id the kernel does not define (0 is `unspec`, which no program may call).
pub fn helper_name(id: i32) -> Option<&'static str> {
    usize::try_from(id)
        .ok()
        .and_then(|i| HELPER_NAMES.get(i).copied())
}

/// The id of the helper named `name`, with or without the `bpf_` prefix.
pub fn helper_id(name: &str) -> Option<i32> {
    let bare = name.strip_prefix("bpf_").unwrap_or(name);
    HELPER_NAMES
        .iter()
        .position(|n| *n == bare)
        .map(|i| i as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_ids() {
        assert_eq!(helper_name(1), Some("map_lookup_elem"));
        assert_eq!(helper_id("bpf_redirect_map"), Some(51));
        assert_eq!(helper_id("xdp_adjust_tail"), Some(65));
        assert_eq!(helper_id("loop"), Some(181));
        assert_eq!(helper_name(211), Some("cgrp_storage_delete"));
        assert_eq!(helper_name(212), None);
        assert_eq!(helper_name(-1), None);
    }

    #[test]
    fn the_list_is_in_id_order() {
        assert_eq!(id::MAP_LOOKUP_ELEM, 1);
        assert_eq!(id::TAIL_CALL, 12);
        assert_eq!(id::LOOP, 181);
        assert_eq!(id::CGRP_STORAGE_DELETE, MAX_HELPER_ID);
        for (i, name) in HELPER_NAMES.iter().enumerate() {
            assert_eq!(helper_id(name), Some(i as i32), "{name}");
        }
    }
}
