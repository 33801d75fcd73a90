// SPDX-License-Identifier: GPL-2.0
/*
 * legacy_maps.c - a program in the pre-libbpf-1.0 ELF layout.
 *
 * Many published XDP programs (old kernel samples/bpf, early tutorials,
 * vendor examples) still look like this:
 *   - maps declared as `struct bpf_map_def` in a section named "maps"
 *     (no BTF for key/value types: only sizes);
 *   - a program section name that is not one of libbpf's canonical ones
 *     ("xdp_prog" rather than "xdp"), from when loaders took the program
 *     type from the command line or guessed from a "xdp" prefix;
 *   - a "version" section, once required for kprobes and copied everywhere.
 * libbpf >= 1.0 refuses the "maps" section ("legacy map definitions in
 * 'maps' section are not supported") and does not recognise "xdp_prog",
 * so this object is EXPECTED NOT TO LOAD with libbpf/bpftool 1.x.  It is in
 * the corpus because bpfemu's loader should parse it and give a clear
 * diagnosis (or support it, as iproute2's and older loaders did).
 */
#include "common.h"

/* Removed from bpf_helpers.h in libbpf 1.0; this is the classic layout. */
struct bpf_map_def {
	unsigned int type;
	unsigned int key_size;
	unsigned int value_size;
	unsigned int max_entries;
	unsigned int map_flags;
};

struct bpf_map_def SEC("maps") rxcnt = {
	.type = BPF_MAP_TYPE_PERCPU_ARRAY,
	.key_size = sizeof(__u32),
	.value_size = sizeof(long),
	.max_entries = 256,
};

struct bpf_map_def SEC("maps") drop_ports = {
	.type = BPF_MAP_TYPE_HASH,
	.key_size = sizeof(__u16),
	.value_size = sizeof(__u32),
	.max_entries = 128,
	.map_flags = 0,
};

/* Like the old samples/bpf xdp1: count per IP protocol, drop listed UDP ports. */
SEC("xdp_prog")
int xdp_legacy(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	void *data = (void *)(long)ctx->data;
	struct ethhdr *eth = data;
	struct iphdr *iph;
	struct udphdr *uh;
	__u32 proto;
	__u16 dport;
	long *value;

	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	iph = (void *)(eth + 1);
	if ((void *)(iph + 1) > data_end)
		return XDP_DROP;

	proto = iph->protocol;
	value = bpf_map_lookup_elem(&rxcnt, &proto);
	if (value)
		*value += 1;

	if (proto != IPPROTO_UDP || iph->ihl != 5)
		return XDP_PASS;
	uh = (void *)(iph + 1);
	if ((void *)(uh + 1) > data_end)
		return XDP_DROP;
	dport = uh->dest;
	if (bpf_map_lookup_elem(&drop_ports, &dport))
		return XDP_DROP;
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
__u32 _version SEC("version") = 1;
