//! The kfuncs an XDP program may call in Linux 6.18 (the kfunc sets registered for
//! `BPF_PROG_TYPE_XDP` and for every program type: `generic_btf_ids`, `common_btf_ids`, the
//! XDP metadata, dynptr, conntrack and xfrm sets, ...), read off the running 6.18.44 kernel by
//! calling each function vmlinux BTF tags `bpf_kfunc` from an XDP program
//! (`verifier/tests/kfunc_sets_kernel.rs` holds this table to the kernel). The kernel refuses
//! a call of any other kernel function with "calling kernel function NAME is not allowed"
//! before looking at its arguments.

/// Kfuncs XDP may call.
pub const XDP_KFUNCS: &[&str] = &[
    "__bpf_trap",
    "bpf_cast_to_kern_ctx",
    "bpf_cgroup_acquire",
    "bpf_cgroup_ancestor",
    "bpf_cgroup_from_id",
    "bpf_cgroup_read_xattr",
    "bpf_cgroup_release",
    "bpf_crypto_decrypt",
    "bpf_crypto_encrypt",
    "bpf_ct_change_status",
    "bpf_ct_change_timeout",
    "bpf_ct_insert_entry",
    "bpf_ct_release",
    "bpf_ct_set_nat_info",
    "bpf_ct_set_status",
    "bpf_ct_set_timeout",
    "bpf_dynptr_adjust",
    "bpf_dynptr_clone",
    "bpf_dynptr_copy",
    "bpf_dynptr_from_xdp",
    "bpf_dynptr_is_null",
    "bpf_dynptr_is_rdonly",
    "bpf_dynptr_memset",
    "bpf_dynptr_size",
    "bpf_dynptr_slice",
    "bpf_dynptr_slice_rdwr",
    "bpf_get_kmem_cache",
    "bpf_iter_bits_destroy",
    "bpf_iter_bits_new",
    "bpf_iter_bits_next",
    "bpf_iter_css_destroy",
    "bpf_iter_css_new",
    "bpf_iter_css_next",
    "bpf_iter_css_task_destroy",
    "bpf_iter_css_task_new",
    "bpf_iter_css_task_next",
    "bpf_iter_num_destroy",
    "bpf_iter_num_new",
    "bpf_iter_num_next",
    "bpf_iter_task_destroy",
    "bpf_iter_task_new",
    "bpf_iter_task_next",
    "bpf_iter_task_vma_destroy",
    "bpf_iter_task_vma_new",
    "bpf_iter_task_vma_next",
    "bpf_key_put",
    "bpf_list_back",
    "bpf_list_front",
    "bpf_list_pop_back",
    "bpf_list_pop_front",
    "bpf_list_push_back_impl",
    "bpf_list_push_front_impl",
    "bpf_local_irq_restore",
    "bpf_local_irq_save",
    "bpf_lookup_system_key",
    "bpf_map_sum_elem_count",
    "bpf_modify_return_test_tp",
    "bpf_obj_drop_impl",
    "bpf_obj_new_impl",
    "bpf_percpu_obj_drop_impl",
    "bpf_percpu_obj_new_impl",
    "bpf_preempt_disable",
    "bpf_preempt_enable",
    "bpf_probe_read_kernel_dynptr",
    "bpf_probe_read_kernel_str_dynptr",
    "bpf_probe_read_user_dynptr",
    "bpf_probe_read_user_str_dynptr",
    "bpf_rbtree_add_impl",
    "bpf_rbtree_first",
    "bpf_rbtree_left",
    "bpf_rbtree_remove",
    "bpf_rbtree_right",
    "bpf_rbtree_root",
    "bpf_rcu_read_lock",
    "bpf_rcu_read_unlock",
    "bpf_rdonly_cast",
    "bpf_refcount_acquire_impl",
    "bpf_res_spin_lock",
    "bpf_res_spin_lock_irqsave",
    "bpf_res_spin_unlock",
    "bpf_res_spin_unlock_irqrestore",
    "bpf_send_signal_task",
    "bpf_skb_ct_alloc",
    "bpf_skb_ct_lookup",
    "bpf_strcasecmp",
    "bpf_strchr",
    "bpf_strchrnul",
    "bpf_strcmp",
    "bpf_strcspn",
    "bpf_stream_vprintk_impl",
    "bpf_strlen",
    "bpf_strnchr",
    "bpf_strnlen",
    "bpf_strnstr",
    "bpf_strrchr",
    "bpf_strspn",
    "bpf_strstr",
    "bpf_task_acquire",
    "bpf_task_from_pid",
    "bpf_task_from_vpid",
    "bpf_task_get_cgroup1",
    "bpf_task_release",
    "bpf_task_under_cgroup",
    "bpf_task_work_schedule_resume_impl",
    "bpf_task_work_schedule_signal_impl",
    "bpf_throw",
    "bpf_wq_init",
    "bpf_wq_set_callback_impl",
    "bpf_wq_start",
    "bpf_xdp_ct_alloc",
    "bpf_xdp_ct_lookup",
    "bpf_xdp_get_xfrm_state",
    "bpf_xdp_metadata_rx_hash",
    "bpf_xdp_metadata_rx_timestamp",
    "bpf_xdp_metadata_rx_vlan_tag",
    "bpf_xdp_pull_data",
    "bpf_xdp_xfrm_state_release",
];

/// Kfuncs in XDP's sets that may sleep: a non-sleepable XDP program is refused them
/// ("program must be sleepable to call sleepable kfunc NAME").
pub const SLEEPABLE_KFUNCS: &[&str] = &[
    "bpf_arena_alloc_pages",
    "bpf_arena_free_pages",
    "bpf_arena_reserve_pages",
    "bpf_copy_from_user_dynptr",
    "bpf_copy_from_user_str",
    "bpf_copy_from_user_str_dynptr",
    "bpf_copy_from_user_task_dynptr",
    "bpf_copy_from_user_task_str",
    "bpf_copy_from_user_task_str_dynptr",
    "bpf_iter_dmabuf_destroy",
    "bpf_iter_dmabuf_new",
    "bpf_iter_dmabuf_next",
    "bpf_iter_kmem_cache_destroy",
    "bpf_iter_kmem_cache_new",
    "bpf_iter_kmem_cache_next",
    "bpf_lookup_user_key",
];

/// Whether XDP may call the kfunc `name` (sleepable ones included: they are refused later).
pub fn in_xdp_sets(name: &str) -> bool {
    XDP_KFUNCS.binary_search(&name).is_ok() || SLEEPABLE_KFUNCS.binary_search(&name).is_ok()
}

/// Whether the kfunc `name` may sleep.
pub fn is_sleepable(name: &str) -> bool {
    SLEEPABLE_KFUNCS.binary_search(&name).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_sorted_for_binary_search() {
        assert!(XDP_KFUNCS.windows(2).all(|w| w[0] < w[1]));
        assert!(SLEEPABLE_KFUNCS.windows(2).all(|w| w[0] < w[1]));
        assert!(in_xdp_sets("bpf_iter_num_new") && !in_xdp_sets("bpf_dynptr_from_skb"));
        assert!(is_sleepable("bpf_copy_from_user_str") && !is_sleepable("bpf_strlen"));
    }
}
