// SPDX-License-Identifier: GPL-2.0
/*
 * ddos_filter.c - prefix and port blocklist in front of a CPU-spreading
 * redirect.
 *
 * Source addresses are matched against longest-prefix-match tries (one for
 * IPv4, one for IPv6), so an operator can block a /24 or a /48 with a single
 * entry.  UDP destination ports (amplification vectors: 19 chargen, 123 NTP
 * monlist, 389 CLDAP, 11211 memcached...) are matched in a hash.  Every rule
 * carries its own hit counter in its map value, bumped atomically because
 * the same rule is hit from all CPUs at once.
 *
 * Surviving traffic is steered through a CPUMAP: the flow hash picks a CPU,
 * so each flow stays on one CPU (no reordering) while load spreads evenly -
 * software RSS for NICs with poor hashing or a single queue.
 */
#include "common.h"

#define MAX_CPUS 64

struct lpm_v4_key {
	__u32 prefixlen;	/* LPM_TRIE keys start with the prefix length */
	__u8 addr[4];
};

struct lpm_v6_key {
	__u32 prefixlen;
	__u8 addr[16];
};

struct rule {
	__u64 hits;		/* bumped with __sync_fetch_and_add */
	__u32 rule_id;		/* operator's id, reported back by userspace */
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);	/* mandatory for LPM_TRIE */
	__type(key, struct lpm_v4_key);
	__type(value, struct rule);
} blocklist_v4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct lpm_v6_key);
	__type(value, struct rule);
} blocklist_v6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u16);		/* UDP destination port, network order */
	__type(value, struct rule);
} blocked_udp_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_CPUMAP);
	__uint(max_entries, MAX_CPUS);
	__type(key, __u32);
	__type(value, struct bpf_cpumap_val);
} cpu_map SEC(".maps");

/* Number of CPUs populated in cpu_map; set by the loader before load. */
const volatile __u32 nr_cpus = 1;

enum { STAT_PASS, STAT_DROP_V4, STAT_DROP_V6, STAT_DROP_PORT, STAT_MAX };

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

static __always_inline void stat_inc(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &idx);

	if (v)
		*v += 1;
}

static __always_inline int drop_by(struct rule *r, __u32 stat)
{
	/* Return value unused: clang emits a plain atomic add, valid at v2. */
	__sync_fetch_and_add(&r->hits, 1);
	stat_inc(stat);
	return XDP_DROP;
}

/* Cheap avalanche mix (murmur3 finaliser) over the flow's fields. */
static __always_inline __u32 mix32(__u32 h)
{
	h ^= h >> 16;
	h *= 0x85ebca6b;
	h ^= h >> 13;
	h *= 0xc2b2ae35;
	h ^= h >> 16;
	return h;
}

SEC("xdp")
int xdp_ddos_filter(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	void *data = (void *)(long)ctx->data;
	struct hdr_cursor nh = { .pos = data };
	struct ethhdr *eth;
	struct iphdr *iph;
	struct ipv6hdr *ip6h;
	struct udphdr *udph;
	struct rule *r;
	__u32 hash, cpu;
	int eth_type, ip_proto;

	eth_type = parse_ethhdr_vlan(&nh, data_end, &eth, 0);
	if (eth_type == bpf_htons(ETH_P_IP)) {
		struct lpm_v4_key k4 = { .prefixlen = 32 };

		ip_proto = parse_iphdr(&nh, data_end, &iph);
		if (ip_proto < 0)
			return XDP_DROP;
		__builtin_memcpy(k4.addr, &iph->saddr, sizeof(k4.addr));
		r = bpf_map_lookup_elem(&blocklist_v4, &k4);
		if (r)
			return drop_by(r, STAT_DROP_V4);
		hash = iph->saddr ^ iph->daddr;
	} else if (eth_type == bpf_htons(ETH_P_IPV6)) {
		struct lpm_v6_key k6 = { .prefixlen = 128 };

		ip_proto = parse_ip6hdr(&nh, data_end, &ip6h);
		if (ip_proto < 0)
			return XDP_DROP;
		__builtin_memcpy(k6.addr, &ip6h->saddr, sizeof(k6.addr));
		r = bpf_map_lookup_elem(&blocklist_v6, &k6);
		if (r)
			return drop_by(r, STAT_DROP_V6);
		/* fold both addresses; the low words carry most entropy */
		hash = ip6h->saddr.in6_u.u6_addr32[3] ^ ip6h->daddr.in6_u.u6_addr32[3] ^
		       ip6h->saddr.in6_u.u6_addr32[2] ^ ip6h->daddr.in6_u.u6_addr32[2];
	} else {
		/* ARP, LLDP...: not ours to judge */
		return XDP_PASS;
	}

	if (ip_proto == IPPROTO_UDP) {
		__u16 dport;

		if (parse_udphdr(&nh, data_end, &udph) < 0)
			return XDP_DROP;
		dport = udph->dest;
		r = bpf_map_lookup_elem(&blocked_udp_ports, &dport);
		if (r)
			return drop_by(r, STAT_DROP_PORT);
		/* source and dest ports in one word: order-sensitive is fine,
		 * both directions of a flow need not share a CPU here */
		hash ^= ((__u32)udph->source << 16) | udph->dest;
	}
	hash ^= ip_proto;

	stat_inc(STAT_PASS);
	if (nr_cpus == 0)
		return XDP_PASS;
	cpu = mix32(hash) % nr_cpus;
	/* Unpopulated slot: hand the packet to the local stack instead. */
	return bpf_redirect_map(&cpu_map, cpu, XDP_PASS);
}

char LICENSE[] SEC("license") = "GPL";
