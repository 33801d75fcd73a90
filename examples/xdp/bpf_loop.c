// SPDX-License-Identifier: GPL-2.0
/*
 * bpf_loop.c - walk IPv6 extension headers with the bpf_loop helper.
 *
 * The chain of IPv6 extension headers has no fixed length, and an unrolled
 * walk multiplies verifier states.  bpf_loop (kernel >= 5.17) calls a
 * callback up to N times; the verifier checks the callback body once,
 * independent of N.  The callback cannot hold packet pointers across
 * iterations, so it reads each header with bpf_xdp_load_bytes at a scalar
 * offset kept in the loop context on the caller's stack.
 *
 * Policy: find the upper-layer protocol behind Hop-by-Hop, Routing,
 * Fragment and Destination Options headers; drop packets carrying a Type 0
 * routing header (deprecated by RFC 5095) or a chain too long to finish.
 */
#include "common.h"

#define MAX_EXT_HDRS 16

#ifndef NEXTHDR_HOP
#define NEXTHDR_HOP		0
#define NEXTHDR_ROUTING		43
#define NEXTHDR_FRAGMENT	44
#define NEXTHDR_DEST		60
#define NEXTHDR_NONE		59
#endif

struct walk_ctx {
	struct xdp_md *xdp;
	__u32 off;		/* offset of the current header from data */
	__u8 nexthdr;		/* type of the header at off */
	__u8 done;
	__u8 bad;
};

struct ext_hdr {	/* common start of every extension header */
	__u8 nexthdr;
	__u8 hdrlen;
	__u8 type;	/* routing header: routing type */
	__u8 pad;
};

/* Return 0 to continue, 1 to stop (bpf_loop contract). */
static long walk_one(__u64 index, void *arg)
{
	struct walk_ctx *w = arg;
	struct ext_hdr h;

	switch (w->nexthdr) {
	case NEXTHDR_HOP:
	case NEXTHDR_ROUTING:
	case NEXTHDR_DEST:
	case NEXTHDR_FRAGMENT:
		break;
	default:		/* upper-layer header reached */
		w->done = 1;
		return 1;
	}

	if (bpf_xdp_load_bytes(w->xdp, w->off, &h, sizeof(h))) {
		w->bad = 1;	/* chain runs past the frame */
		return 1;
	}
	if (w->nexthdr == NEXTHDR_ROUTING && h.type == 0) {
		w->bad = 1;
		return 1;
	}
	/* Fragment header is fixed 8 bytes; others are (hdrlen + 1) * 8. */
	w->off += w->nexthdr == NEXTHDR_FRAGMENT ? 8 : (h.hdrlen + 1) * 8;
	w->nexthdr = h.nexthdr;
	return 0;
}

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 256);	/* indexed by upper-layer protocol */
	__type(key, __u32);
	__type(value, __u64);
} l4_seen SEC(".maps");

SEC("xdp")
int xdp_ipv6_exthdr(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	void *data = (void *)(long)ctx->data;
	struct hdr_cursor nh = { .pos = data };
	struct walk_ctx w = { .xdp = ctx };
	struct ethhdr *eth;
	struct ipv6hdr *ip6h;
	__u32 proto;
	__u64 *cnt;
	long n;

	if (parse_ethhdr_vlan(&nh, data_end, &eth, 0) != bpf_htons(ETH_P_IPV6))
		return XDP_PASS;
	if (parse_ip6hdr(&nh, data_end, &ip6h) < 0)
		return XDP_DROP;

	w.off = nh.pos - data;
	w.nexthdr = ip6h->nexthdr;

	n = bpf_loop(MAX_EXT_HDRS, walk_one, &w, 0);
	if (n < 0 || w.bad || !w.done)
		return XDP_DROP;

	proto = w.nexthdr;
	cnt = bpf_map_lookup_elem(&l4_seen, &proto);
	if (cnt)
		*cnt += 1;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
