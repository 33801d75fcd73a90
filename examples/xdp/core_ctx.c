// SPDX-License-Identifier: GPL-2.0
/*
 * core_ctx.c - CO-RE relocations in an XDP program, without vmlinux.h.
 *
 * A program built once must run on kernels whose types differ.  Here the
 * context fields are accessed through a locally declared copy of struct
 * xdp_md marked preserve_access_index (the "___local" suffix is a flavour:
 * libbpf matches it to the kernel's `struct xdp_md` by the name before the
 * triple underscore).  clang emits a CO-RE relocation for every access, and
 * libbpf rewrites offsets against the running kernel's BTF
 * (/sys/kernel/btf/vmlinux).  Also shown:
 *   - bpf_core_field_exists / bpf_core_field_size: egress_ifindex only
 *     exists since 5.8; older kernels get the branch patched out instead of
 *     a load failure;
 *   - bpf_core_enum_value_exists / bpf_core_enum_value on enum xdp_action;
 *   - bpf_core_type_exists / bpf_core_type_size on struct bpf_fib_lookup.
 */
#include "common.h"
#include <bpf/bpf_core_read.h>

struct xdp_md___local {
	__u32 data;
	__u32 data_end;
	__u32 data_meta;
	__u32 ingress_ifindex;
	__u32 rx_queue_index;
	__u32 egress_ifindex;
} __attribute__((preserve_access_index));

/* Local view of the kernel enum; values are relocated, not trusted. */
enum xdp_action___local {
	XDP_PASS___local = 2,
	XDP_REDIRECT___local = 4,
};

struct bpf_fib_lookup___local {
	__u8 family;
} __attribute__((preserve_access_index));

struct ctx_info {
	__u32 ingress_ifindex;
	__u32 rx_queue;
	__u32 egress_ifindex;	/* size of the field (4) where it exists */
	__u32 has_egress;
	__u32 redirect_action;
	__u32 fib_size;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ctx_info);
} last_ctx SEC(".maps");

SEC("xdp")
int xdp_core_ctx(struct xdp_md *ctx)
{
	struct xdp_md___local *c = (void *)ctx;
	void *data = (void *)(long)c->data;	/* relocated ctx loads */
	void *data_end = (void *)(long)c->data_end;
	struct ethhdr *eth = data;
	struct ctx_info *info;
	__u32 zero = 0;

	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;

	info = bpf_map_lookup_elem(&last_ctx, &zero);
	if (!info)
		return XDP_PASS;

	info->ingress_ifindex = c->ingress_ifindex;
	info->rx_queue = c->rx_queue_index;
	/* Existence is a relocation, not a load: egress_ifindex may only be
	 * *read* by programs attached to a DEVMAP entry (expected_attach_type
	 * BPF_XDP_DEVMAP); a plain XDP program reading it is rejected with
	 * "invalid bpf_context access off=20". */
	if (bpf_core_field_exists(c->egress_ifindex)) {
		info->has_egress = 1;
		info->egress_ifindex = bpf_core_field_size(c->egress_ifindex);
	}
	if (bpf_core_enum_value_exists(enum xdp_action___local, XDP_REDIRECT___local))
		info->redirect_action =
			bpf_core_enum_value(enum xdp_action___local, XDP_REDIRECT___local);
	if (bpf_core_type_exists(struct bpf_fib_lookup___local))
		info->fib_size = bpf_core_type_size(struct bpf_fib_lookup___local);

	/* The action itself also comes from the running kernel's enum. */
	return bpf_core_enum_value(enum xdp_action___local, XDP_PASS___local);
}

char LICENSE[] SEC("license") = "GPL";
