// SPDX-License-Identifier: GPL-2.0
/*
 * nat_lb.c - stateful destination-NAT load balancer (IPv4, TCP/UDP).
 *
 * Unlike the DSR balancer in l4lb.c, replies come back through us, so we
 * keep per-session state in both directions:
 *   client -> VIP:port          rewritten to  client -> backend:bport
 *   backend:bport -> client     rewritten to  VIP:port -> client
 * A session is created on the first packet that misses the table.  Two CPUs
 * can see the first packets of one flow at the same time, so the insert uses
 * BPF_NOEXIST and the loser re-reads the winner's entry: both then send the
 * flow to the same backend.
 *
 * Checksums are patched, not recomputed: the IPv4 header checksum and the
 * TCP/UDP checksum (which covers the pseudo-header addresses as well as the
 * ports) are adjusted with bpf_csum_diff for the 4-byte address and an RFC
 * 1624 update for the 2-byte port.  After rewriting, the stack routes the
 * packet (XDP_PASS with ip_forward on).
 */
#include "common.h"

struct vip_key {
	__be32 addr;
	__be16 port;
	__u8 proto;
	__u8 pad;
};

struct vip_val {
	__u32 backend_base;	/* first slot in `backends` */
	__u32 backend_count;
};

struct backend {
	__be32 addr;
	__be16 port;
	__u16 pad;
};

struct sess_key {
	__be32 saddr;
	__be32 daddr;
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 pad[3];
};

/* What to write over the packet: the new address and port on one side. */
struct sess_val {
	__be32 addr;
	__be16 port;
	__u8 rewrite_src;	/* 0: rewrite destination, 1: rewrite source */
	__u8 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, struct vip_key);
	__type(value, struct vip_val);
} vips SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct backend);
} backends SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);	/* idle sessions age out */
	__uint(max_entries, 131072);
	__type(key, struct sess_key);
	__type(value, struct sess_val);
} sessions SEC(".maps");

/* Plain globals: these land in .bss and are readable through the map. */
__u64 sessions_created;
__u64 insert_races;

/* Apply a 32-bit partial-sum delta (from bpf_csum_diff) to a checksum. */
static __always_inline void csum_apply(__sum16 *sum, __s64 delta)
{
	__u64 c = (__u16)~*sum;

	c += (__u32)delta;
	c = (c & 0xffffffff) + (c >> 32);
	*sum = csum_fold_helper((__u32)c);
}

/* Rewrite one endpoint (address and port) and patch both checksums. */
static __always_inline void rewrite(struct iphdr *iph, __be32 *addr,
				    __be16 *port, __sum16 *l4sum,
				    __be32 new_addr, __be16 new_port)
{
	__be32 old_addr = *addr;
	__s64 d;

	d = bpf_csum_diff(&old_addr, sizeof(old_addr), &new_addr,
			  sizeof(new_addr), 0);
	csum_apply(&iph->check, d);
	if (l4sum) {
		/* the pseudo-header makes the address part of the L4 sum */
		csum_apply(l4sum, d);
		csum_replace2(l4sum, *port, new_port);
	}
	*addr = new_addr;
	*port = new_port;
}

static __always_inline struct sess_val *new_session(struct sess_key *fwd,
						    struct vip_val *vip)
{
	struct sess_key rev = {};
	struct sess_val fv = {}, rv = {};
	struct backend *be;
	__u32 idx;

	if (!vip->backend_count)
		return 0;
	idx = vip->backend_base +
	      (fwd->saddr ^ fwd->sport ^ (fwd->saddr >> 16)) % vip->backend_count;
	be = bpf_map_lookup_elem(&backends, &idx);
	if (!be)
		return 0;

	fv.addr = be->addr;
	fv.port = be->port;
	if (bpf_map_update_elem(&sessions, fwd, &fv, BPF_NOEXIST)) {
		/* another CPU created it first: use theirs */
		__sync_fetch_and_add(&insert_races, 1);
		return bpf_map_lookup_elem(&sessions, fwd);
	}

	/* reply direction: backend -> client gets its source turned back into the VIP */
	rev.saddr = be->addr;
	rev.sport = be->port;
	rev.daddr = fwd->saddr;
	rev.dport = fwd->sport;
	rev.proto = fwd->proto;
	rv.addr = fwd->daddr;
	rv.port = fwd->dport;
	rv.rewrite_src = 1;
	bpf_map_update_elem(&sessions, &rev, &rv, BPF_ANY);

	__sync_fetch_and_add(&sessions_created, 1);
	return bpf_map_lookup_elem(&sessions, fwd);
}

SEC("xdp")
int xdp_nat_lb(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	void *data = (void *)(long)ctx->data;
	struct hdr_cursor nh = { .pos = data };
	struct ethhdr *eth;
	struct iphdr *iph;
	struct sess_key key = {};
	struct sess_val *sv;
	__be16 *sport, *dport;
	__sum16 *l4sum;
	int proto;

	if (parse_ethhdr(&nh, data_end, &eth) != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	proto = parse_iphdr(&nh, data_end, &iph);
	if (proto < 0)
		return XDP_DROP;
	if (iph->frag_off & bpf_htons(0x3fff))
		return XDP_PASS;	/* let the stack reassemble */

	if (proto == IPPROTO_TCP) {
		struct tcphdr *th;

		if (parse_tcphdr(&nh, data_end, &th) < 0)
			return XDP_DROP;
		sport = &th->source;
		dport = &th->dest;
		l4sum = &th->check;
	} else if (proto == IPPROTO_UDP) {
		struct udphdr *uh;

		if (parse_udphdr(&nh, data_end, &uh) < 0)
			return XDP_DROP;
		sport = &uh->source;
		dport = &uh->dest;
		/* a zero UDP checksum over IPv4 means "none": keep it zero */
		l4sum = uh->check ? &uh->check : 0;
	} else {
		return XDP_PASS;
	}

	key.saddr = iph->saddr;
	key.daddr = iph->daddr;
	key.sport = *sport;
	key.dport = *dport;
	key.proto = proto;

	sv = bpf_map_lookup_elem(&sessions, &key);
	if (!sv) {
		struct vip_key vk = {
			.addr = key.daddr, .port = key.dport, .proto = proto,
		};
		struct vip_val *vip = bpf_map_lookup_elem(&vips, &vk);

		if (!vip)
			return XDP_PASS;	/* not load-balanced traffic */
		sv = new_session(&key, vip);
		if (!sv)
			return XDP_DROP;	/* VIP without backends */
	}

	if (sv->rewrite_src)
		rewrite(iph, &iph->saddr, sport, l4sum, sv->addr, sv->port);
	else
		rewrite(iph, &iph->daddr, dport, l4sum, sv->addr, sv->port);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
