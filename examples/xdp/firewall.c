// SPDX-License-Identifier: GPL-2.0
/*
 * firewall.c - stateless 5-tuple ACL for IPv4 and IPv6.
 *
 * Rules live in a hash keyed by a packed 5-tuple; IPv4 addresses are stored
 * as IPv4-mapped IPv6 (::ffff:a.b.c.d) so one table serves both families.
 * Lookup order: exact 5-tuple, then the same tuple with the source port
 * wildcarded (0), which is how "allow tcp from X to Y port 443" is written
 * since client source ports are ephemeral.  When nothing matches, the policy
 * comes from read-only configuration in .rodata: `const volatile` globals
 * that the loader patches before load and the verifier then treats as
 * constants (dead branches are pruned).
 */
#include "common.h"

struct fw_tuple {
	__u8 saddr[16];
	__u8 daddr[16];
	__be16 sport;
	__be16 dport;
	__u8 proto;
} __attribute__((packed));	/* 37 bytes, no padding to zero */

enum fw_action {
	FW_ALLOW = 0,
	FW_DENY = 1,
};

struct fw_rule {
	__u32 action;		/* enum fw_action */
	__u32 rule_id;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct fw_tuple);
	__type(value, struct fw_rule);
} acl SEC(".maps");

/* [0] = allowed, [1] = denied, [2] = default-policy hits */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, __u64);
} fw_stats SEC(".maps");

/* Configuration, patched by the loader (skeleton rodata) before load. */
const volatile __u32 default_action = FW_ALLOW;
const volatile bool allow_non_ip = true;	/* ARP, LLDP, ... */

static __always_inline int verdict(__u32 action, __u32 stat)
{
	__u64 *v = bpf_map_lookup_elem(&fw_stats, &stat);

	if (v)
		*v += 1;
	return action == FW_DENY ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int xdp_firewall(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	void *data = (void *)(long)ctx->data;
	struct hdr_cursor nh = { .pos = data };
	struct fw_tuple t = {};
	struct ethhdr *eth;
	struct iphdr *iph;
	struct ipv6hdr *ip6h;
	struct fw_rule *rule;
	int eth_type, proto;

	eth_type = parse_ethhdr_vlan(&nh, data_end, &eth, 0);
	if (eth_type == bpf_htons(ETH_P_IP)) {
		proto = parse_iphdr(&nh, data_end, &iph);
		if (proto < 0)
			return XDP_DROP;
		/* ::ffff:a.b.c.d */
		t.saddr[10] = 0xff;
		t.saddr[11] = 0xff;
		t.daddr[10] = 0xff;
		t.daddr[11] = 0xff;
		__builtin_memcpy(&t.saddr[12], &iph->saddr, 4);
		__builtin_memcpy(&t.daddr[12], &iph->daddr, 4);
	} else if (eth_type == bpf_htons(ETH_P_IPV6)) {
		proto = parse_ip6hdr(&nh, data_end, &ip6h);
		if (proto < 0)
			return XDP_DROP;
		__builtin_memcpy(t.saddr, &ip6h->saddr, 16);
		__builtin_memcpy(t.daddr, &ip6h->daddr, 16);
	} else {
		return allow_non_ip ? XDP_PASS : XDP_DROP;
	}
	t.proto = proto;

	if (proto == IPPROTO_TCP) {
		struct tcphdr *th;

		if (parse_tcphdr(&nh, data_end, &th) < 0)
			return XDP_DROP;
		t.sport = th->source;
		t.dport = th->dest;
	} else if (proto == IPPROTO_UDP) {
		struct udphdr *uh;

		if (parse_udphdr(&nh, data_end, &uh) < 0)
			return XDP_DROP;
		t.sport = uh->source;
		t.dport = uh->dest;
	}
	/* other protocols (ICMP, GRE, ...): ports stay 0 */

	rule = bpf_map_lookup_elem(&acl, &t);
	if (!rule) {
		t.sport = 0;
		rule = bpf_map_lookup_elem(&acl, &t);
	}
	if (rule)
		return verdict(rule->action, rule->action == FW_DENY);

	return verdict(default_action, 2);
}

char LICENSE[] SEC("license") = "GPL";
