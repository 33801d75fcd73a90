// SPDX-License-Identifier: GPL-2.0
/*
 * adjust_tail.c - snap-length truncation with bpf_xdp_adjust_tail.
 *
 * A mirror/monitoring port often needs only the headers of each frame.
 * Cutting the frame in XDP (negative delta to bpf_xdp_adjust_tail) saves
 * the copies and skb allocation for the payload before the capture socket
 * sees it.  Frames on a configured "keep whole" UDP port are left alone.
 * Also shows that data_end must be reloaded after the helper.
 */
#include "common.h"

const volatile __u32 snaplen = 128;		/* bytes kept per frame */
const volatile __u16 keep_udp_port = 0;	/* host order; 0 = none */

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);	/* bytes trimmed */
} trimmed_bytes SEC(".maps");

static __always_inline bool keep_whole(void *data, void *data_end)
{
	struct hdr_cursor nh = { .pos = data };
	struct ethhdr *eth;
	struct iphdr *iph;
	struct udphdr *uh;

	if (!keep_udp_port)
		return false;
	if (parse_ethhdr(&nh, data_end, &eth) != bpf_htons(ETH_P_IP))
		return false;
	if (parse_iphdr(&nh, data_end, &iph) != IPPROTO_UDP)
		return false;
	if (parse_udphdr(&nh, data_end, &uh) < 0)
		return false;
	return uh->dest == bpf_htons(keep_udp_port);
}

SEC("xdp")
int xdp_snap(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	void *data = (void *)(long)ctx->data;
	__u32 len = data_end - data;
	__u32 zero = 0;
	__u64 *cnt;
	int delta;

	if (len <= snaplen || keep_whole(data, data_end))
		return XDP_PASS;

	delta = (int)snaplen - (int)len;	/* negative: shrink */
	if (bpf_xdp_adjust_tail(ctx, delta))
		return XDP_PASS;

	/* Old data_end is invalid now; the new one must equal data + snaplen. */
	data_end = (void *)(long)ctx->data_end;
	data = (void *)(long)ctx->data;
	if (data_end - data != snaplen)
		return XDP_ABORTED;

	cnt = bpf_map_lookup_elem(&trimmed_bytes, &zero);
	if (cnt)
		*cnt += len - snaplen;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
