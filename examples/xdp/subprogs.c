// SPDX-License-Identifier: GPL-2.0
/*
 * subprogs.c - BPF-to-BPF calls: static and global subprograms.
 *
 * Two kinds of non-inlined functions, which the kernel verifies differently:
 *   - static __noinline: verified in the caller's context, once per call
 *     site, with the caller's precise register state (so it may take
 *     pointers to the caller's stack and return packet-derived values);
 *   - global (non-static) __noinline: verified once, on its own, from its
 *     BTF signature alone.  A `struct xdp_md *` argument is the context; a
 *     pointer to a struct is memory of that size that may be NULL, so the
 *     function must check it; scalars are unknown values.  This keeps
 *     verification cost linear for large programs and lets libxdp-style
 *     loaders replace the function (freplace).
 */
#include "common.h"

struct pkt_info {
	__u16 l3_proto;		/* host order */
	__u8 l4_proto;
	__u8 pad;
	__u16 sport;		/* host order */
	__u16 dport;
	__u32 l4_off;
};

struct port_stats {
	__u64 packets;
	__u64 bytes;
	__u64 well_known;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct port_stats);
} stats SEC(".maps");

/* Global: verified independently; only the signature is trusted. */
__noinline int port_class(__u16 port)
{
	if (port == 0)
		return -1;
	if (port < 1024)
		return 0;	/* well-known */
	if (port < 49152)
		return 1;	/* registered */
	return 2;		/* ephemeral */
}

/* Global with a struct pointer: the verifier makes us check for NULL. */
__noinline int account(struct port_stats *st, __u32 len, int cls)
{
	if (!st)
		return -1;
	st->packets++;
	st->bytes += len;
	if (cls == 0)
		st->well_known++;
	return 0;
}

/* Global with the context: may touch the packet after its own checks. */
__noinline int frame_is_ip(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	void *data = (void *)(long)ctx->data;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		return 0;
	return eth->h_proto == bpf_htons(ETH_P_IP) ||
	       eth->h_proto == bpf_htons(ETH_P_IPV6);
}

/* Static: verified per call site with the caller's state, so it can fill
 * a struct on the caller's stack through a pointer. */
static __noinline int parse_pkt(struct xdp_md *ctx, struct pkt_info *info)
{
	void *data_end = (void *)(long)ctx->data_end;
	void *data = (void *)(long)ctx->data;
	struct hdr_cursor nh = { .pos = data };
	struct ethhdr *eth;
	struct iphdr *iph;
	struct ipv6hdr *ip6h;
	struct udphdr *uh;
	struct tcphdr *th;
	int eth_type, proto;

	eth_type = parse_ethhdr_vlan(&nh, data_end, &eth, 0);
	if (eth_type == bpf_htons(ETH_P_IP))
		proto = parse_iphdr(&nh, data_end, &iph);
	else if (eth_type == bpf_htons(ETH_P_IPV6))
		proto = parse_ip6hdr(&nh, data_end, &ip6h);
	else
		return -1;
	if (proto < 0)
		return -1;

	info->l3_proto = bpf_ntohs(eth_type);
	info->l4_proto = proto;
	info->l4_off = nh.pos - data;
	if (proto == IPPROTO_TCP) {
		if (parse_tcphdr(&nh, data_end, &th) < 0)
			return -1;
		info->sport = bpf_ntohs(th->source);
		info->dport = bpf_ntohs(th->dest);
	} else if (proto == IPPROTO_UDP) {
		if (parse_udphdr(&nh, data_end, &uh) < 0)
			return -1;
		info->sport = bpf_ntohs(uh->source);
		info->dport = bpf_ntohs(uh->dest);
	}
	return 0;
}

SEC("xdp")
int xdp_subprogs(struct xdp_md *ctx)
{
	struct pkt_info info = {};
	struct port_stats *st;
	__u32 zero = 0;
	int cls;

	if (!frame_is_ip(ctx))
		return XDP_PASS;
	if (parse_pkt(ctx, &info) < 0)
		return XDP_DROP;

	cls = port_class(info.dport);
	st = bpf_map_lookup_elem(&stats, &zero);
	/* passing a possibly-NULL map value is fine: the callee checks */
	account(st, ctx->data_end - ctx->data, cls);

	/* traffic to ephemeral ports that is not a reply is suspicious */
	if (cls == 2 && info.l4_proto == IPPROTO_UDP && info.sport >= 1024)
		return XDP_DROP;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
