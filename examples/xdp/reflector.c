// SPDX-License-Identifier: GPL-2.0
/*
 * reflector.c - UDP reflector with per-protocol accounting.
 *
 * Parses Ethernet, up to two VLAN tags (802.1Q, and 802.1ad outer + 802.1Q
 * inner as used by QinQ carrier networks), then IPv4 or IPv6.  Every IP
 * packet is counted by its L4 protocol number in a per-CPU array (no atomics
 * needed: each CPU owns its slot, userspace sums the slots).  UDP packets are
 * bounced back out of the receiving interface with the MAC addresses
 * swapped (a classic link-test / latency reflector); everything else is
 * dropped.
 */
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 256);	/* one slot per IP protocol number */
	__type(key, __u32);
	__type(value, __u64);
} proto_count SEC(".maps");

/* Also count reflected bytes, so a bytes/packets ratio is observable. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} reflected_bytes SEC(".maps");

static __always_inline void count_proto(__u32 proto)
{
	__u64 *cnt = bpf_map_lookup_elem(&proto_count, &proto);

	/* Array lookups cannot fail for an in-range key, but the verifier
	 * still requires the NULL check on the returned pointer. */
	if (cnt)
		*cnt += 1;
}

SEC("xdp")
int xdp_reflector(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	void *data = (void *)(long)ctx->data;
	struct hdr_cursor nh = { .pos = data };
	struct ethhdr *eth;
	struct iphdr *iph;
	struct ipv6hdr *ip6h;
	struct udphdr *udph;
	__u16 vlans[VLAN_MAX_DEPTH] = {};
	int eth_type, ip_proto;
	__u32 zero = 0;
	__u64 *bytes;

	eth_type = parse_ethhdr_vlan(&nh, data_end, &eth, vlans);
	if (eth_type < 0)
		return XDP_DROP;

	if (eth_type == bpf_htons(ETH_P_IP))
		ip_proto = parse_iphdr(&nh, data_end, &iph);
	else if (eth_type == bpf_htons(ETH_P_IPV6))
		ip_proto = parse_ip6hdr(&nh, data_end, &ip6h);
	else
		return XDP_DROP;

	if (ip_proto < 0)
		return XDP_DROP;

	/* ip_proto is a u8 read from the packet: always < 256, so the key is in
	 * range; the mask makes that obvious to the verifier at every -mcpu. */
	count_proto(ip_proto & 0xff);

	if (ip_proto != IPPROTO_UDP)
		return XDP_DROP;

	/* Only reflect well-formed UDP: a truncated header is dropped. */
	if (parse_udphdr(&nh, data_end, &udph) < 0)
		return XDP_DROP;

	swap_src_dst_mac(eth);

	bytes = bpf_map_lookup_elem(&reflected_bytes, &zero);
	if (bytes)
		*bytes += data_end - data;

	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
