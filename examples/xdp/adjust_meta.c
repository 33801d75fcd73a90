// SPDX-License-Identifier: GPL-2.0
/*
 * adjust_meta.c - hand a classification result to later stages through XDP
 * metadata.
 *
 * bpf_xdp_adjust_meta grows a small area (at most 32 bytes, multiple of 4)
 * in front of the packet data.  A TC program or an AF_XDP application reads
 * it from skb->data_meta / the UMEM frame, so work done here (parsing,
 * hashing, a mark) is not repeated.  The verifier only allows writes to
 * [data_meta, data) after an explicit `meta + 1 > data` check.
 */
#include "common.h"

/* Layout shared with the consumer (TC: skb->data_meta .. skb->data). */
struct xdp_meta {
	__u32 mark;		/* becomes skb->mark in the TC program */
	__u32 flow_hash;
	__u16 l3_off;
	__u16 l4_off;
	__u8 l4_proto;
	__u8 pad[3];
};

_Static_assert(sizeof(struct xdp_meta) % 4 == 0, "meta must be 4-byte aligned");
_Static_assert(sizeof(struct xdp_meta) <= 32, "meta is limited to 32 bytes");

SEC("xdp")
int xdp_set_meta(struct xdp_md *ctx)
{
	void *data, *data_end, *data_meta;
	struct hdr_cursor nh;
	struct xdp_meta *meta;
	struct ethhdr *eth;
	struct iphdr *iph;
	__u16 l3_off, l4_off = 0;
	__u32 hash = 0;
	int proto = 0;

	/* Grow the metadata first.  Like every helper that may change packet
	 * data, this invalidates all packet pointers in the verifier's view,
	 * so data/data_end/data_meta are (re)loaded only afterwards. */
	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(*meta)))
		return XDP_PASS;	/* driver without metadata support */

	data_meta = (void *)(long)ctx->data_meta;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;

	meta = data_meta;
	if ((void *)(meta + 1) > data)
		return XDP_ABORTED;

	nh.pos = data;
	if (parse_ethhdr_vlan(&nh, data_end, &eth, 0) == bpf_htons(ETH_P_IP)) {
		l3_off = nh.pos - data;
		proto = parse_iphdr(&nh, data_end, &iph);
		if (proto >= 0) {
			l4_off = nh.pos - data;
			hash = iph->saddr ^ iph->daddr ^ proto;
		}
	} else {
		l3_off = nh.pos - data;
	}

	meta->mark = proto == IPPROTO_TCP ? 0x100 : proto == IPPROTO_UDP ? 0x200 : 0;
	meta->flow_hash = hash;
	meta->l3_off = l3_off;
	meta->l4_off = l4_off;
	meta->l4_proto = proto < 0 ? 0 : proto;
	meta->pad[0] = meta->pad[1] = meta->pad[2] = 0;

	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
