// SPDX-License-Identifier: GPL-2.0
/*
 * router.c - XDP fast-path L3 forwarder using the kernel FIB.
 *
 * For every IPv4/IPv6 packet we ask the kernel routing table and neighbour
 * cache (bpf_fib_lookup) where it should go.  On success we do what the
 * stack would do - decrement TTL / hop limit, rewrite the Ethernet addresses
 * to the next hop - and transmit it through a DEVMAP of egress ports with
 * bpf_redirect_map.  Whenever the fast path cannot finish the job (neighbour
 * not yet resolved, not forwarded, needs fragmentation, TTL expiring) we
 * return XDP_PASS so the regular stack handles it (ARP/ND resolution, ICMP
 * errors); the next packet of the flow will then take the fast path.
 */
#include "common.h"

#ifndef AF_INET
#define AF_INET 2
#endif
#ifndef AF_INET6
#define AF_INET6 10
#endif

/* Egress ports, keyed by ifindex (userspace inserts each port as key=value=ifindex). */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u32);
} tx_port SEC(".maps");

/* Per-action counters: index = XDP action (XDP_ABORTED .. XDP_REDIRECT). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, XDP_REDIRECT + 1);
	__type(key, __u32);
	__type(value, __u64);
} action_stats SEC(".maps");

static __always_inline int record(__u32 action)
{
	__u64 *cnt = bpf_map_lookup_elem(&action_stats, &action);

	if (cnt)
		*cnt += 1;
	return action;
}

/*
 * TTL lives in the high byte of the 16-bit word {ttl, protocol}.  Lowering
 * TTL by one lowers that word by 0x0100, so the checksum (the complement of
 * the sum) goes up by 0x0100 with an end-around carry (RFC 1141/1624).
 */
static __always_inline int ip_decrease_ttl(struct iphdr *iph)
{
	__u32 check = iph->check;

	check += bpf_htons(0x0100);
	iph->check = (__sum16)(check + (check >= 0xFFFF));
	return --iph->ttl;
}

SEC("xdp")
int xdp_router(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	void *data = (void *)(long)ctx->data;
	struct bpf_fib_lookup fib = {};
	struct hdr_cursor nh = { .pos = data };
	struct ethhdr *eth;
	struct iphdr *iph = 0;
	struct ipv6hdr *ip6h = 0;
	int eth_type, rc;

	eth_type = parse_ethhdr(&nh, data_end, &eth);
	if (eth_type == bpf_htons(ETH_P_IP)) {
		if (parse_iphdr(&nh, data_end, &iph) < 0)
			return record(XDP_DROP);
		/* Let the stack generate ICMP time exceeded. */
		if (iph->ttl <= 1)
			return record(XDP_PASS);

		fib.family = AF_INET;
		fib.tos = iph->tos;
		fib.l4_protocol = iph->protocol;
		fib.tot_len = bpf_ntohs(iph->tot_len);
		fib.ipv4_src = iph->saddr;
		fib.ipv4_dst = iph->daddr;
	} else if (eth_type == bpf_htons(ETH_P_IPV6)) {
		if (parse_ip6hdr(&nh, data_end, &ip6h) < 0)
			return record(XDP_DROP);
		if (ip6h->hop_limit <= 1)
			return record(XDP_PASS);

		fib.family = AF_INET6;
		/* flowinfo = traffic class + flow label, as the stack keys on it */
		fib.flowinfo = *(__be32 *)ip6h & bpf_htonl(0x0FFFFFFF);
		fib.l4_protocol = ip6h->nexthdr;
		fib.tot_len = bpf_ntohs(ip6h->payload_len);
		__builtin_memcpy(fib.ipv6_src, &ip6h->saddr, sizeof(fib.ipv6_src));
		__builtin_memcpy(fib.ipv6_dst, &ip6h->daddr, sizeof(fib.ipv6_dst));
	} else {
		return record(XDP_PASS);
	}

	fib.ifindex = ctx->ingress_ifindex;

	rc = bpf_fib_lookup(ctx, &fib, sizeof(fib), 0);
	switch (rc) {
	case BPF_FIB_LKUP_RET_SUCCESS:
		if (iph)
			ip_decrease_ttl(iph);
		else if (ip6h)
			ip6h->hop_limit--;

		__builtin_memcpy(eth->h_dest, fib.dmac, ETH_ALEN);
		__builtin_memcpy(eth->h_source, fib.smac, ETH_ALEN);
		/* If the egress port is not in tx_port the redirect fails with
		 * XDP_ABORTED semantics; fall back to the stack instead. */
		return record(bpf_redirect_map(&tx_port, fib.ifindex, XDP_PASS));

	case BPF_FIB_LKUP_RET_BLACKHOLE:
	case BPF_FIB_LKUP_RET_UNREACHABLE:
	case BPF_FIB_LKUP_RET_PROHIBIT:
		/* Route says drop: do it here, cheaper than in the stack. */
		return record(XDP_DROP);

	case BPF_FIB_LKUP_RET_NO_NEIGH:	/* stack resolves ARP/ND */
	case BPF_FIB_LKUP_RET_NOT_FWDED:	/* local delivery */
	case BPF_FIB_LKUP_RET_FWD_DISABLED:
	case BPF_FIB_LKUP_RET_UNSUPP_LWT:
	case BPF_FIB_LKUP_RET_FRAG_NEEDED:	/* stack sends ICMP / PTB */
	default:
		return record(XDP_PASS);
	}
}

char LICENSE[] SEC("license") = "GPL";
