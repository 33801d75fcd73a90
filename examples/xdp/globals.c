// SPDX-License-Identifier: GPL-2.0
/*
 * globals.c - configuration and state in global variables, plus a bounded
 * (not unrolled) loop.
 *
 * libbpf turns each global-data section into a single-entry ARRAY map:
 *   .rodata  `const volatile` load-time config; frozen before load, so the
 *            verifier knows the values and prunes dead branches;
 *   .data    initialised, writable at run time by userspace via mmap
 *            (here: a sampling rate that can be changed live);
 *   .bss     zero-initialised state and counters.
 * The program admits frames only from a list of trusted source MACs held
 * in .rodata.  The list is scanned by an ordinary `for` loop with a constant
 * bound that clang is told not to unroll, so the verifier sees a real
 * back-edge and must prove termination (bounded loops, kernel >= 5.3).
 */
#include "common.h"

#define MAX_TRUSTED 8

struct mac_cfg {
	__u8 addr[ETH_ALEN];
	__u16 vlan;		/* 0 = any VLAN */
};

/* .rodata */
const volatile __u32 n_trusted = 2;
const volatile struct mac_cfg trusted[MAX_TRUSTED] = {
	{ .addr = { 0x02, 0x00, 0x00, 0x00, 0x00, 0x01 } },
	{ .addr = { 0x02, 0x00, 0x00, 0x00, 0x00, 0x02 }, .vlan = 100 },
};
const volatile bool enforce = true;	/* false: count only */

/* .data */
__u32 sample_every = 64;		/* report 1 in N admitted packets */
__u32 verdict_for_untrusted = XDP_DROP;

/* .bss */
__u64 admitted;
__u64 rejected;
__u64 sampled;
__u32 last_untrusted_vlan;

static __always_inline bool mac_eq(const volatile __u8 *a, const __u8 *b)
{
	/* compare as 4 + 2 bytes: fewer branches than a byte loop */
	return *(const volatile __u32 *)a == *(const __u32 *)b &&
	       *(const volatile __u16 *)(a + 4) == *(const __u16 *)(b + 4);
}

SEC("xdp")
int xdp_trusted_macs(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	void *data = (void *)(long)ctx->data;
	struct hdr_cursor nh = { .pos = data };
	struct ethhdr *eth;
	__u16 vlans[VLAN_MAX_DEPTH] = {};
	__u8 src[ETH_ALEN];
	__u32 i;

	if (parse_ethhdr_vlan(&nh, data_end, &eth, vlans) < 0)
		return XDP_DROP;
	__builtin_memcpy(src, eth->h_source, ETH_ALEN);

#pragma clang loop unroll(disable)
	for (i = 0; i < MAX_TRUSTED; i++) {
		if (i >= n_trusted)
			break;
		if (!mac_eq(trusted[i].addr, src))
			continue;
		if (trusted[i].vlan && trusted[i].vlan != vlans[0])
			continue;
		/* plain (non-atomic) increments: a lost update is an
		 * acceptable statistics error, an atomic is not free */
		admitted++;
		if (sample_every && admitted % sample_every == 0)
			sampled++;
		return XDP_PASS;
	}

	__sync_fetch_and_add(&rejected, 1);
	last_untrusted_vlan = vlans[0];
	if (!enforce)
		return XDP_PASS;
	return verdict_for_untrusted == XDP_PASS ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
