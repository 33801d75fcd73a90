/* SPDX-License-Identifier: GPL-2.0 */
/*
 * common.h - small packet-parsing and checksum helpers shared by the bpfemu
 * XDP corpus.  Everything is `static __always_inline` so each program is
 * self-contained after compilation (no cross-object calls) and the verifier
 * sees the bounds checks inline, next to the accesses they protect.
 *
 * Parsing follows the "cursor" style: a pointer that advances through the
 * packet, and every helper checks `hdr + 1 > data_end` before touching a
 * header, which is exactly the comparison the verifier needs to mark the
 * packet range as readable.
 */
#ifndef BPFEMU_XDP_COMMON_H
#define BPFEMU_XDP_COMMON_H

#include <stdbool.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/in.h>
#include <linux/udp.h>
#include <linux/tcp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#ifndef ETH_P_8021Q
#define ETH_P_8021Q 0x8100
#endif
#ifndef ETH_P_8021AD
#define ETH_P_8021AD 0x88A8
#endif

/* Maximum VLAN tags we peel: 2 covers QinQ (802.1ad outer + 802.1Q inner). */
#define VLAN_MAX_DEPTH 2

/* The kernel's struct vlan_hdr lives in a non-uapi header; declare our own. */
struct vlanhdr {
	__be16 h_vlan_TCI;
	__be16 h_vlan_encapsulated_proto;
};

struct hdr_cursor {
	void *pos;
};

static __always_inline int proto_is_vlan(__u16 h_proto)
{
	return h_proto == bpf_htons(ETH_P_8021Q) ||
	       h_proto == bpf_htons(ETH_P_8021AD);
}

/*
 * Parse the Ethernet header and up to VLAN_MAX_DEPTH VLAN tags.  Returns the
 * inner EtherType in network byte order, or -1 when the frame is truncated.
 * The loop has a constant bound, so clang fully unrolls it at -O2 and the
 * verifier sees straight-line code.
 */
static __always_inline int parse_ethhdr_vlan(struct hdr_cursor *nh,
					     void *data_end,
					     struct ethhdr **ethhdr,
					     __u16 *vlan_ids)
{
	struct ethhdr *eth = nh->pos;
	struct vlanhdr *vlh;
	__u16 h_proto;
	int i;

	if ((void *)(eth + 1) > data_end)
		return -1;

	nh->pos = eth + 1;
	*ethhdr = eth;
	h_proto = eth->h_proto;
	vlh = nh->pos;

#pragma unroll
	for (i = 0; i < VLAN_MAX_DEPTH; i++) {
		if (!proto_is_vlan(h_proto))
			break;
		if ((void *)(vlh + 1) > data_end)
			return -1;
		if (vlan_ids)
			vlan_ids[i] = bpf_ntohs(vlh->h_vlan_TCI) & 0x0fff;
		h_proto = vlh->h_vlan_encapsulated_proto;
		vlh++;
	}
	nh->pos = vlh;
	return h_proto;
}

static __always_inline int parse_ethhdr(struct hdr_cursor *nh, void *data_end,
					struct ethhdr **ethhdr)
{
	return parse_ethhdr_vlan(nh, data_end, ethhdr, 0);
}

/* Returns the IPv4 protocol number, or -1.  Honours the IHL field. */
static __always_inline int parse_iphdr(struct hdr_cursor *nh, void *data_end,
				       struct iphdr **iphdr)
{
	struct iphdr *iph = nh->pos;
	int hdrsize;

	if ((void *)(iph + 1) > data_end)
		return -1;

	hdrsize = iph->ihl * 4;
	/* An IHL below 5 is malformed and would make the cursor go backwards. */
	if (hdrsize < (int)sizeof(*iph))
		return -1;
	if (nh->pos + hdrsize > data_end)
		return -1;

	nh->pos += hdrsize;
	*iphdr = iph;
	return iph->protocol;
}

/* Returns the IPv6 next header (no extension-header walk), or -1. */
static __always_inline int parse_ip6hdr(struct hdr_cursor *nh, void *data_end,
					struct ipv6hdr **ip6hdr)
{
	struct ipv6hdr *ip6h = nh->pos;

	if ((void *)(ip6h + 1) > data_end)
		return -1;

	nh->pos = ip6h + 1;
	*ip6hdr = ip6h;
	return ip6h->nexthdr;
}

static __always_inline int parse_udphdr(struct hdr_cursor *nh, void *data_end,
					struct udphdr **udphdr)
{
	struct udphdr *h = nh->pos;

	if ((void *)(h + 1) > data_end)
		return -1;
	nh->pos = h + 1;
	*udphdr = h;
	return bpf_ntohs(h->len) - (int)sizeof(struct udphdr);
}

static __always_inline int parse_tcphdr(struct hdr_cursor *nh, void *data_end,
					struct tcphdr **tcphdr)
{
	struct tcphdr *h = nh->pos;
	int len;

	if ((void *)(h + 1) > data_end)
		return -1;
	len = h->doff * 4;
	if (len < (int)sizeof(*h))
		return -1;
	if (nh->pos + len > data_end)
		return -1;
	nh->pos += len;
	*tcphdr = h;
	return len;
}

static __always_inline void swap_src_dst_mac(struct ethhdr *eth)
{
	__u8 tmp[ETH_ALEN];

	__builtin_memcpy(tmp, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, tmp, ETH_ALEN);
}

/* Fold a 32-bit one's-complement sum into 16 bits (two rounds suffice). */
static __always_inline __u16 csum_fold_helper(__u32 csum)
{
	csum = (csum & 0xffff) + (csum >> 16);
	csum = (csum & 0xffff) + (csum >> 16);
	return (__u16)~csum;
}

/*
 * RFC 1624 incremental update, HC' = ~(~HC + ~m + m'), for one 16-bit word.
 * All values in network byte order; one's-complement arithmetic is
 * byte-order independent so no swapping is needed.
 */
static __always_inline void csum_replace2(__sum16 *sum, __be16 old, __be16 new)
{
	__u32 csum = (__u16)~*sum;

	csum += (__u16)~old;
	csum += new;
	*sum = csum_fold_helper(csum);
}

static __always_inline void csum_replace4(__sum16 *sum, __be32 old, __be32 new)
{
	__u32 csum = (__u16)~*sum;

	csum += (__u16)~(old & 0xffff);
	csum += (__u16)~(old >> 16);
	csum += new & 0xffff;
	csum += new >> 16;
	*sum = csum_fold_helper(csum);
}

/*
 * Full IPv4 header checksum over a fixed 20-byte header (no options), as an
 * unrolled sum of ten 16-bit words.  The caller zeroes iph->check first.
 */
static __always_inline __u16 ipv4_csum_20(struct iphdr *iph)
{
	__u16 *w = (__u16 *)iph;
	__u32 csum = 0;
	int i;

#pragma unroll
	for (i = 0; i < (int)(sizeof(*iph) >> 1); i++)
		csum += w[i];
	return csum_fold_helper(csum);
}

#endif /* BPFEMU_XDP_COMMON_H */
