// SPDX-License-Identifier: GPL-2.0
/*
 * spin_lock.c - token-bucket rate limiter with a bpf_spin_lock per bucket.
 *
 * Each traffic class (here: the DSCP of the packet, 64 classes) has a token
 * bucket in an ARRAY value guarded by a struct bpf_spin_lock.  Refill and
 * take must be atomic together - several CPUs receive the same class - and
 * two fields cannot be updated with one atomic instruction, hence the lock.
 * Verifier rules this exercises: the lock must be in a map value with BTF,
 * only one lock held at a time, no helper calls and no packet access while
 * holding it, and every path must unlock.  So the clock is read and the
 * packet length computed before taking the lock.
 */
#include "common.h"

#define NSEC_PER_SEC 1000000000ULL

struct bucket {
	struct bpf_spin_lock lock;
	__u32 pad;
	__u64 tokens;		/* bytes currently allowed */
	__u64 last_ns;		/* last refill */
	__u64 rate_bps;		/* bytes per second; 0 = unlimited */
	__u64 burst;		/* bucket depth in bytes */
	__u64 dropped;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 64);	/* one bucket per DSCP value */
	__type(key, __u32);
	__type(value, struct bucket);
} buckets SEC(".maps");

SEC("xdp")
int xdp_ratelimit(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	void *data = (void *)(long)ctx->data;
	struct hdr_cursor nh = { .pos = data };
	struct ethhdr *eth;
	struct iphdr *iph;
	struct bucket *b;
	__u64 now, elapsed, refill, len;
	__u32 class;
	bool pass;

	if (parse_ethhdr(&nh, data_end, &eth) != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	if (parse_iphdr(&nh, data_end, &iph) < 0)
		return XDP_DROP;

	class = iph->tos >> 2;		/* DSCP, 0..63 */
	len = data_end - data;
	b = bpf_map_lookup_elem(&buckets, &class);
	if (!b)
		return XDP_PASS;

	now = bpf_ktime_get_ns();	/* no helper calls under the lock */

	bpf_spin_lock(&b->lock);
	if (!b->rate_bps) {
		pass = true;
	} else {
		elapsed = now - b->last_ns;
		/* cap elapsed so the multiplication cannot overflow */
		if (elapsed > NSEC_PER_SEC)
			elapsed = NSEC_PER_SEC;
		refill = elapsed * b->rate_bps / NSEC_PER_SEC;
		b->tokens += refill;
		if (b->tokens > b->burst)
			b->tokens = b->burst;
		b->last_ns = now;

		pass = b->tokens >= len;
		if (pass)
			b->tokens -= len;
		else
			b->dropped++;
	}
	bpf_spin_unlock(&b->lock);

	return pass ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
