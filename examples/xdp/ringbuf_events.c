// SPDX-License-Identifier: GPL-2.0
/*
 * ringbuf_events.c - report dropped packets to userspace through a RINGBUF.
 *
 * An XDP "drop monitor": TCP SYNs to ports outside an allow set are dropped
 * and each drop is reported with the first bytes of the frame, like a tiny
 * pcap of rejected traffic.  Two ways of producing a record are shown:
 *   - bpf_ringbuf_reserve/submit: the record is written in place in the
 *     ring, no copy; the verifier tracks the reservation and rejects any
 *     path that neither submits nor discards it;
 *   - bpf_ringbuf_output: copy a small stack struct into the ring, simpler
 *     for fixed-size summaries.
 */
#include "common.h"

#define SNAP 64

enum { EV_DROP = 1, EV_SUMMARY = 2 };

struct drop_event {
	__u16 type;
	__u16 cap_len;		/* bytes valid in pkt[] */
	__u32 pkt_len;
	__u32 ifindex;
	__u32 rx_queue;
	__u64 ts_ns;
	__u8 pkt[SNAP];
};

struct summary_event {
	__u16 type;
	__u16 pad;
	__u32 drops_since_last;
	__u64 ts_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);	/* bytes; power of two, page multiple */
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u16);	/* TCP destination port, network order */
	__type(value, __u8);
} allowed_ports SEC(".maps");

__u32 drops_pending;	/* .bss: drops since the last summary */

static __always_inline void report_drop(struct xdp_md *ctx, __u32 pkt_len)
{
	struct drop_event *e;
	__u64 cap = pkt_len < SNAP ? pkt_len : SNAP;

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e)
		return;		/* ring full: consumer too slow, lose the event */

	/* Copy the snapshot first, while cap is still in a register.  The
	 * size argument must be provably in [1, SNAP]: re-establish both
	 * bounds right before the call, each behind a compiler barrier:
	 * otherwise clang folds them into one `(cap - 1) <= 63` range test
	 * whose result the verifier cannot map back onto cap (seen at v2). */
	e->cap_len = 0;
	asm volatile("" : "+r"(cap));
	if (cap >= 1) {
		asm volatile("" : "+r"(cap));
		if (cap <= SNAP && bpf_xdp_load_bytes(ctx, 0, e->pkt, cap) == 0)
			e->cap_len = cap;
	}

	e->type = EV_DROP;
	e->pkt_len = pkt_len;
	e->ifindex = ctx->ingress_ifindex;
	e->rx_queue = ctx->rx_queue_index;
	e->ts_ns = bpf_ktime_get_ns();
	bpf_ringbuf_submit(e, 0);

	/* Every 32 drops, a compact summary via the copying API; wake the
	 * consumer only for summaries to batch notifications.  The counter is
	 * approximate across CPUs on purpose: using the result of an atomic
	 * add (BPF_FETCH) needs -mcpu=v3, and this corpus also builds for v2. */
	drops_pending++;
	if (drops_pending >= 32) {
		struct summary_event s = {
			.type = EV_SUMMARY,
			.drops_since_last = drops_pending,
		};

		s.ts_ns = bpf_ktime_get_ns();
		drops_pending = 0;
		bpf_ringbuf_output(&events, &s, sizeof(s), BPF_RB_FORCE_WAKEUP);
	}
}

SEC("xdp")
int xdp_drop_monitor(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	void *data = (void *)(long)ctx->data;
	struct hdr_cursor nh = { .pos = data };
	struct ethhdr *eth;
	struct iphdr *iph;
	struct tcphdr *th;
	__u16 dport;

	if (parse_ethhdr(&nh, data_end, &eth) != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	if (parse_iphdr(&nh, data_end, &iph) != IPPROTO_TCP)
		return XDP_PASS;
	if (parse_tcphdr(&nh, data_end, &th) < 0)
		return XDP_PASS;
	if (!th->syn || th->ack)
		return XDP_PASS;	/* only police connection attempts */

	dport = th->dest;
	if (bpf_map_lookup_elem(&allowed_ports, &dport))
		return XDP_PASS;

	report_drop(ctx, data_end - data);
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
