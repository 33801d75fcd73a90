// SPDX-License-Identifier: GPL-2.0
/*
 * l4lb.c - Katran-style L4 load balancer (IPv4, TCP/UDP).
 *
 * Packets to a VIP (addr, port, proto) are steered to a backend ("real") and
 * encapsulated in IP-in-IP so the real can answer the client directly (direct
 * server return).  Backend choice:
 *   1. an LRU connection table pins established flows to the real they
 *      started on, so a ring change does not break live connections;
 *   2. otherwise the flow hash indexes the VIP's slice of a consistent-hashing
 *      ring (built by userspace, e.g. Maglev), which maps to a backend index.
 * The outer IPv4 header is built in the headroom grown by
 * bpf_xdp_adjust_head, with a full checksum, and the frame goes back out of
 * the same NIC (XDP_TX) towards the default gateway.
 */
#include "common.h"

#define MAX_VIPS	64
#define RING_SIZE	1024		/* slots per VIP; power of two */
#define MAX_REALS	4096

struct vip_key {
	__be32 addr;
	__be16 port;
	__u8 proto;
	__u8 pad;
};

struct vip_meta {
	__u32 flags;
	__u32 vip_num;		/* selects the VIP's slice of ch_rings */
};

#define F_NO_PORT	(1U << 0)	/* match VIP on address+proto only */

struct real_def {
	__be32 addr;
	__u32 flags;
};

struct flow_key {
	__be32 saddr;
	__be32 daddr;
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 pad[3];
};

struct conn_val {
	__u32 real_idx;
	__u32 pad;
	__u64 last_seen_ns;
};

/* Data-plane configuration filled by the control plane. */
struct lb_ctl {
	__u8 gw_mac[ETH_ALEN];	/* next hop towards all reals */
	__u8 pad[2];
	__be32 src_addr;	/* outer source address of encapsulated packets */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_VIPS);
	__type(key, struct vip_key);
	__type(value, struct vip_meta);
} vip_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_VIPS * RING_SIZE);
	__type(key, __u32);
	__type(value, __u32);		/* index into reals */
} ch_rings SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_REALS);
	__type(key, __u32);
	__type(value, struct real_def);
} reals SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct flow_key);
	__type(value, struct conn_val);
} conn_table SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lb_ctl);
} ctl_array SEC(".maps");

enum { ST_VIP_HIT, ST_CONN_HIT, ST_NEW_FLOW, ST_NO_REAL, ST_MAX };

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ST_MAX);
	__type(key, __u32);
	__type(value, __u64);
} lb_stats SEC(".maps");

static __always_inline void stat_inc(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&lb_stats, &idx);

	if (v)
		*v += 1;
}

/* Small Jenkins-style mix of the 5-tuple, good enough to spread a ring. */
static __always_inline __u32 flow_hash(const struct flow_key *f)
{
	__u32 a = f->saddr, b = f->daddr;
	__u32 c = ((__u32)f->sport << 16 | f->dport) ^ f->proto;

	a -= c; a ^= (c << 4) | (c >> 28); c += b;
	b -= a; b ^= (a << 6) | (a >> 26); a += c;
	c -= b; c ^= (b << 8) | (b >> 24); b += a;
	a -= c; a ^= (c << 16) | (c >> 16); c += b;
	return c ^ b;
}

static __always_inline struct real_def *pick_real(struct flow_key *flow,
						  struct vip_meta *vip,
						  bool is_syn)
{
	struct conn_val *conn, nconn = {};
	__u32 slot, *real_idx;

	/* A SYN always starts a new connection: rehash even if a stale LRU
	 * entry for the same 5-tuple survived. */
	if (!is_syn) {
		conn = bpf_map_lookup_elem(&conn_table, flow);
		if (conn) {
			conn->last_seen_ns = bpf_ktime_get_ns();
			stat_inc(ST_CONN_HIT);
			return bpf_map_lookup_elem(&reals, &conn->real_idx);
		}
	}

	slot = vip->vip_num * RING_SIZE + (flow_hash(flow) & (RING_SIZE - 1));
	real_idx = bpf_map_lookup_elem(&ch_rings, &slot);
	if (!real_idx)
		return 0;

	nconn.real_idx = *real_idx;
	nconn.last_seen_ns = bpf_ktime_get_ns();
	bpf_map_update_elem(&conn_table, flow, &nconn, BPF_ANY);
	stat_inc(ST_NEW_FLOW);
	return bpf_map_lookup_elem(&reals, &nconn.real_idx);
}

SEC("xdp")
int xdp_l4lb(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	void *data = (void *)(long)ctx->data;
	struct hdr_cursor nh = { .pos = data };
	struct ethhdr *eth, *new_eth;
	struct iphdr *iph, *outer;
	struct flow_key flow = {};
	struct vip_key vk = {};
	struct vip_meta *vip;
	struct real_def *real;
	struct lb_ctl *ctl;
	__u8 orig_dmac[ETH_ALEN];
	__u16 inner_len;
	__u8 tos;
	bool is_syn = false;
	__u32 zero = 0;
	int proto;

	if (parse_ethhdr(&nh, data_end, &eth) != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	proto = parse_iphdr(&nh, data_end, &iph);
	if (proto < 0)
		return XDP_DROP;
	/* Fragments carry no L4 header after the first: leave them to the stack. */
	if (iph->frag_off & bpf_htons(0x3fff))
		return XDP_PASS;

	if (proto == IPPROTO_TCP) {
		struct tcphdr *th;

		if (parse_tcphdr(&nh, data_end, &th) < 0)
			return XDP_DROP;
		flow.sport = th->source;
		flow.dport = th->dest;
		is_syn = th->syn && !th->ack;
	} else if (proto == IPPROTO_UDP) {
		struct udphdr *uh;

		if (parse_udphdr(&nh, data_end, &uh) < 0)
			return XDP_DROP;
		flow.sport = uh->source;
		flow.dport = uh->dest;
	} else {
		return XDP_PASS;
	}
	flow.saddr = iph->saddr;
	flow.daddr = iph->daddr;
	flow.proto = proto;

	vk.addr = iph->daddr;
	vk.port = flow.dport;
	vk.proto = proto;
	vip = bpf_map_lookup_elem(&vip_map, &vk);
	if (!vip) {
		vk.port = 0;	/* port-less VIP */
		vip = bpf_map_lookup_elem(&vip_map, &vk);
		if (!vip || !(vip->flags & F_NO_PORT))
			return XDP_PASS;
	}
	stat_inc(ST_VIP_HIT);

	ctl = bpf_map_lookup_elem(&ctl_array, &zero);
	if (!ctl)
		return XDP_ABORTED;

	real = pick_real(&flow, vip, is_syn);
	if (!real) {
		stat_inc(ST_NO_REAL);
		return XDP_DROP;
	}

	/* Everything adjust_head invalidates must be read now. */
	inner_len = bpf_ntohs(iph->tot_len);
	tos = iph->tos;
	__builtin_memcpy(orig_dmac, eth->h_dest, ETH_ALEN);

	if (bpf_xdp_adjust_head(ctx, 0 - (int)sizeof(struct iphdr)))
		return XDP_DROP;

	/* All packet pointers are stale after adjust_head: reload and
	 * re-prove the bounds for the new Ethernet + outer IP headers. */
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	new_eth = data;
	outer = data + sizeof(struct ethhdr);
	if ((void *)(outer + 1) > data_end)
		return XDP_DROP;

	/* New L2 header: from us (the MAC the client used) to the gateway. */
	__builtin_memcpy(new_eth->h_dest, ctl->gw_mac, ETH_ALEN);
	__builtin_memcpy(new_eth->h_source, orig_dmac, ETH_ALEN);
	new_eth->h_proto = bpf_htons(ETH_P_IP);

	outer->version = 4;
	outer->ihl = sizeof(*outer) >> 2;
	outer->tos = tos;
	outer->tot_len = bpf_htons(inner_len + sizeof(*outer));
	outer->id = 0;
	outer->frag_off = 0;
	outer->ttl = 64;
	outer->protocol = IPPROTO_IPIP;
	outer->saddr = ctl->src_addr;
	outer->daddr = real->addr;
	outer->check = 0;
	outer->check = ipv4_csum_20(outer);

	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
