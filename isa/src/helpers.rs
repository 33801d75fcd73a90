//! Helper function ids and names of Linux 6.18 (`include/uapi/linux/bpf.h`, `__BPF_FUNC_MAPPER`).
//!
//! The list has been frozen since 6.2 at id 211: new kernel functionality comes as kfuncs.

/// Helper names indexed by id, without the `bpf_` prefix; id 0 is `unspec`.
pub const HELPER_NAMES: [&str; 212] = [
    "unspec",                         // 0
    "map_lookup_elem",                // 1
    "map_update_elem",                // 2
    "map_delete_elem",                // 3
    "probe_read",                     // 4
    "ktime_get_ns",                   // 5
    "trace_printk",                   // 6
    "get_prandom_u32",                // 7
    "get_smp_processor_id",           // 8
    "skb_store_bytes",                // 9
    "l3_csum_replace",                // 10
    "l4_csum_replace",                // 11
    "tail_call",                      // 12
    "clone_redirect",                 // 13
    "get_current_pid_tgid",           // 14
    "get_current_uid_gid",            // 15
    "get_current_comm",               // 16
    "get_cgroup_classid",             // 17
    "skb_vlan_push",                  // 18
    "skb_vlan_pop",                   // 19
    "skb_get_tunnel_key",             // 20
    "skb_set_tunnel_key",             // 21
    "perf_event_read",                // 22
    "redirect",                       // 23
    "get_route_realm",                // 24
    "perf_event_output",              // 25
    "skb_load_bytes",                 // 26
    "get_stackid",                    // 27
    "csum_diff",                      // 28
    "skb_get_tunnel_opt",             // 29
    "skb_set_tunnel_opt",             // 30
    "skb_change_proto",               // 31
    "skb_change_type",                // 32
    "skb_under_cgroup",               // 33
    "get_hash_recalc",                // 34
    "get_current_task",               // 35
    "probe_write_user",               // 36
    "current_task_under_cgroup",      // 37
    "skb_change_tail",                // 38
    "skb_pull_data",                  // 39
    "csum_update",                    // 40
    "set_hash_invalid",               // 41
    "get_numa_node_id",               // 42
    "skb_change_head",                // 43
    "xdp_adjust_head",                // 44
    "probe_read_str",                 // 45
    "get_socket_cookie",              // 46
    "get_socket_uid",                 // 47
    "set_hash",                       // 48
    "setsockopt",                     // 49
    "skb_adjust_room",                // 50
    "redirect_map",                   // 51
    "sk_redirect_map",                // 52
    "sock_map_update",                // 53
    "xdp_adjust_meta",                // 54
    "perf_event_read_value",          // 55
    "perf_prog_read_value",           // 56
    "getsockopt",                     // 57
    "override_return",                // 58
    "sock_ops_cb_flags_set",          // 59
    "msg_redirect_map",               // 60
    "msg_apply_bytes",                // 61
    "msg_cork_bytes",                 // 62
    "msg_pull_data",                  // 63
    "bind",                           // 64
    "xdp_adjust_tail",                // 65
    "skb_get_xfrm_state",             // 66
    "get_stack",                      // 67
    "skb_load_bytes_relative",        // 68
    "fib_lookup",                     // 69
    "sock_hash_update",               // 70
    "msg_redirect_hash",              // 71
    "sk_redirect_hash",               // 72
    "lwt_push_encap",                 // 73
    "lwt_seg6_store_bytes",           // 74
    "lwt_seg6_adjust_srh",            // 75
    "lwt_seg6_action",                // 76
    "rc_repeat",                      // 77
    "rc_keydown",                     // 78
    "skb_cgroup_id",                  // 79
    "get_current_cgroup_id",          // 80
    "get_local_storage",              // 81
    "sk_select_reuseport",            // 82
    "skb_ancestor_cgroup_id",         // 83
    "sk_lookup_tcp",                  // 84
    "sk_lookup_udp",                  // 85
    "sk_release",                     // 86
    "map_push_elem",                  // 87
    "map_pop_elem",                   // 88
    "map_peek_elem",                  // 89
    "msg_push_data",                  // 90
    "msg_pop_data",                   // 91
    "rc_pointer_rel",                 // 92
    "spin_lock",                      // 93
    "spin_unlock",                    // 94
    "sk_fullsock",                    // 95
    "tcp_sock",                       // 96
    "skb_ecn_set_ce",                 // 97
    "get_listener_sock",              // 98
    "skc_lookup_tcp",                 // 99
    "tcp_check_syncookie",            // 100
    "sysctl_get_name",                // 101
    "sysctl_get_current_value",       // 102
    "sysctl_get_new_value",           // 103
    "sysctl_set_new_value",           // 104
    "strtol",                         // 105
    "strtoul",                        // 106
    "sk_storage_get",                 // 107
    "sk_storage_delete",              // 108
    "send_signal",                    // 109
    "tcp_gen_syncookie",              // 110
    "skb_output",                     // 111
    "probe_read_user",                // 112
    "probe_read_kernel",              // 113
    "probe_read_user_str",            // 114
    "probe_read_kernel_str",          // 115
    "tcp_send_ack",                   // 116
    "send_signal_thread",             // 117
    "jiffies64",                      // 118
    "read_branch_records",            // 119
    "get_ns_current_pid_tgid",        // 120
    "xdp_output",                     // 121
    "get_netns_cookie",               // 122
    "get_current_ancestor_cgroup_id", // 123
    "sk_assign",                      // 124
    "ktime_get_boot_ns",              // 125
    "seq_printf",                     // 126
    "seq_write",                      // 127
    "sk_cgroup_id",                   // 128
    "sk_ancestor_cgroup_id",          // 129
    "ringbuf_output",                 // 130
    "ringbuf_reserve",                // 131
    "ringbuf_submit",                 // 132
    "ringbuf_discard",                // 133
    "ringbuf_query",                  // 134
    "csum_level",                     // 135
    "skc_to_tcp6_sock",               // 136
    "skc_to_tcp_sock",                // 137
    "skc_to_tcp_timewait_sock",       // 138
    "skc_to_tcp_request_sock",        // 139
    "skc_to_udp6_sock",               // 140
    "get_task_stack",                 // 141
    "load_hdr_opt",                   // 142
    "store_hdr_opt",                  // 143
    "reserve_hdr_opt",                // 144
    "inode_storage_get",              // 145
    "inode_storage_delete",           // 146
    "d_path",                         // 147
    "copy_from_user",                 // 148
    "snprintf_btf",                   // 149
    "seq_printf_btf",                 // 150
    "skb_cgroup_classid",             // 151
    "redirect_neigh",                 // 152
    "per_cpu_ptr",                    // 153
    "this_cpu_ptr",                   // 154
    "redirect_peer",                  // 155
    "task_storage_get",               // 156
    "task_storage_delete",            // 157
    "get_current_task_btf",           // 158
    "bprm_opts_set",                  // 159
    "ktime_get_coarse_ns",            // 160
    "ima_inode_hash",                 // 161
    "sock_from_file",                 // 162
    "check_mtu",                      // 163
    "for_each_map_elem",              // 164
    "snprintf",                       // 165
    "sys_bpf",                        // 166
    "btf_find_by_name_kind",          // 167
    "sys_close",                      // 168
    "timer_init",                     // 169
    "timer_set_callback",             // 170
    "timer_start",                    // 171
    "timer_cancel",                   // 172
    "get_func_ip",                    // 173
    "get_attach_cookie",              // 174
    "task_pt_regs",                   // 175
    "get_branch_snapshot",            // 176
    "trace_vprintk",                  // 177
    "skc_to_unix_sock",               // 178
    "kallsyms_lookup_name",           // 179
    "find_vma",                       // 180
    "loop",                           // 181
    "strncmp",                        // 182
    "get_func_arg",                   // 183
    "get_func_ret",                   // 184
    "get_func_arg_cnt",               // 185
    "get_retval",                     // 186
    "set_retval",                     // 187
    "xdp_get_buff_len",               // 188
    "xdp_load_bytes",                 // 189
    "xdp_store_bytes",                // 190
    "copy_from_user_task",            // 191
    "skb_set_tstamp",                 // 192
    "ima_file_hash",                  // 193
    "kptr_xchg",                      // 194
    "map_lookup_percpu_elem",         // 195
    "skc_to_mptcp_sock",              // 196
    "dynptr_from_mem",                // 197
    "ringbuf_reserve_dynptr",         // 198
    "ringbuf_submit_dynptr",          // 199
    "ringbuf_discard_dynptr",         // 200
    "dynptr_read",                    // 201
    "dynptr_write",                   // 202
    "dynptr_data",                    // 203
    "tcp_raw_gen_syncookie_ipv4",     // 204
    "tcp_raw_gen_syncookie_ipv6",     // 205
    "tcp_raw_check_syncookie_ipv4",   // 206
    "tcp_raw_check_syncookie_ipv6",   // 207
    "ktime_get_tai_ns",               // 208
    "user_ringbuf_drain",             // 209
    "cgrp_storage_get",               // 210
    "cgrp_storage_delete",            // 211
];

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
}
