// SPDX-License-Identifier: GPL-2.0
/*
 * tailcall.c - protocol dispatch through a PROG_ARRAY of tail calls.
 *
 * Large XDP deployments (Cilium, Katran's "root" program) split processing
 * into stages chained with bpf_tail_call: each stage is verified alone,
 * stays under the complexity limits, and can be swapped at runtime by
 * updating one slot.  Here the entry program classifies the EtherType and
 * jumps to an IPv4 or IPv6 stage.  The program array is filled at load time
 * by libbpf from the BTF-defined map's initial `.values`, so no userspace
 * code is needed to wire the stages.  An empty slot makes bpf_tail_call
 * return, so the code after it is the fallback.
 */
#include "common.h"

enum { STAGE_IPV4 = 0, STAGE_IPV6 = 1, STAGE_MAX };

/* Forward declarations: the map initialiser needs the program symbols. */
int xdp_stage_ipv4(struct xdp_md *ctx);
int xdp_stage_ipv6(struct xdp_md *ctx);

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, STAGE_MAX);
	__type(key, __u32);
	__array(values, int (struct xdp_md *));
} stages SEC(".maps") = {
	.values = {
		[STAGE_IPV4] = (void *)&xdp_stage_ipv4,
		[STAGE_IPV6] = (void *)&xdp_stage_ipv6,
	},
};

/* Counts of packets handled per stage; [STAGE_MAX] = fell through. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAGE_MAX + 1);
	__type(key, __u32);
	__type(value, __u64);
} stage_hits SEC(".maps");

static __always_inline void hit(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&stage_hits, &idx);

	if (v)
		*v += 1;
}

SEC("xdp")
int xdp_entry(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	void *data = (void *)(long)ctx->data;
	struct hdr_cursor nh = { .pos = data };
	struct ethhdr *eth;
	int eth_type;

	eth_type = parse_ethhdr_vlan(&nh, data_end, &eth, 0);
	if (eth_type == bpf_htons(ETH_P_IP))
		bpf_tail_call(ctx, &stages, STAGE_IPV4);
	else if (eth_type == bpf_htons(ETH_P_IPV6))
		bpf_tail_call(ctx, &stages, STAGE_IPV6);

	/* not IP, or the stage slot is empty */
	hit(STAGE_MAX);
	return XDP_PASS;
}

/* Stages re-parse from scratch: a tail call keeps only ctx (and metadata). */
SEC("xdp")
int xdp_stage_ipv4(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	void *data = (void *)(long)ctx->data;
	struct hdr_cursor nh = { .pos = data };
	struct ethhdr *eth;
	struct iphdr *iph;

	hit(STAGE_IPV4);
	if (parse_ethhdr_vlan(&nh, data_end, &eth, 0) != bpf_htons(ETH_P_IP))
		return XDP_ABORTED;
	if (parse_iphdr(&nh, data_end, &iph) < 0)
		return XDP_DROP;
	/* drop martian sources 0.0.0.0/8 and 127.0.0.0/8 */
	if ((iph->saddr & bpf_htonl(0xff000000)) == 0 ||
	    (iph->saddr & bpf_htonl(0xff000000)) == bpf_htonl(0x7f000000))
		return XDP_DROP;
	return XDP_PASS;
}

SEC("xdp")
int xdp_stage_ipv6(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	void *data = (void *)(long)ctx->data;
	struct hdr_cursor nh = { .pos = data };
	struct ethhdr *eth;
	struct ipv6hdr *ip6h;

	hit(STAGE_IPV6);
	if (parse_ethhdr_vlan(&nh, data_end, &eth, 0) != bpf_htons(ETH_P_IPV6))
		return XDP_ABORTED;
	if (parse_ip6hdr(&nh, data_end, &ip6h) < 0)
		return XDP_DROP;
	/* drop packets claiming a multicast (ff00::/8) source */
	if (ip6h->saddr.in6_u.u6_addr8[0] == 0xff)
		return XDP_DROP;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
