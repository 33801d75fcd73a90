// SPDX-License-Identifier: GPL-2.0
/*
 * xsk_dispatch.c - steer packets to AF_XDP sockets.
 *
 * An AF_XDP application binds one socket per NIC RX queue and registers it
 * in an XSKMAP at the queue's index.  The program redirects each frame to
 * the socket bound to the queue it arrived on.  When no socket is bound
 * there, the lower bits of bpf_redirect_map's flags give the action to take
 * on lookup failure: XDP_PASS, so the kernel stack still gets the frame.
 *
 * Only a configurable UDP port goes to userspace; ARP, SSH, etc. must keep
 * working through the stack while the application runs.
 */
#include "common.h"

#define MAX_QUEUES 64

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);	/* socket fd on update; kernel stores the socket */
} xsks_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u64);
} rx_per_queue SEC(".maps");

/* UDP destination port (host order) handed to userspace; 0 = everything. */
const volatile __u16 xsk_udp_port = 4789;

static __always_inline bool wanted(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	void *data = (void *)(long)ctx->data;
	struct hdr_cursor nh = { .pos = data };
	struct ethhdr *eth;
	struct iphdr *iph;
	struct ipv6hdr *ip6h;
	struct udphdr *uh;
	int eth_type, proto;

	if (!xsk_udp_port)
		return true;

	eth_type = parse_ethhdr_vlan(&nh, data_end, &eth, 0);
	if (eth_type == bpf_htons(ETH_P_IP))
		proto = parse_iphdr(&nh, data_end, &iph);
	else if (eth_type == bpf_htons(ETH_P_IPV6))
		proto = parse_ip6hdr(&nh, data_end, &ip6h);
	else
		return false;
	if (proto != IPPROTO_UDP)
		return false;
	if (parse_udphdr(&nh, data_end, &uh) < 0)
		return false;
	return uh->dest == bpf_htons(xsk_udp_port);
}

SEC("xdp")
int xdp_xsk_dispatch(struct xdp_md *ctx)
{
	__u32 qid = ctx->rx_queue_index;
	__u64 *cnt;

	if (!wanted(ctx))
		return XDP_PASS;

	cnt = bpf_map_lookup_elem(&rx_per_queue, &qid);
	if (cnt)
		*cnt += 1;

	/* Since 5.3 the map lookup happens inside the helper; an empty slot
	 * yields the action in the flags' low bits instead of XDP_ABORTED. */
	return bpf_redirect_map(&xsks_map, qid, XDP_PASS);
}

char LICENSE[] SEC("license") = "GPL";
