// An XDP program beside programs of other types, as real objects carry them (a tracepoint
// that watches XDP, a tc program): bpfemu verifies the XDP one and names the others as not
// verified; `tc_only` alone makes an object with nothing bpfemu verifies.
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} exceptions SEC(".maps");

SEC("xdp")
int short_frames(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	return data + 64 > end ? XDP_DROP : XDP_PASS;
}

SEC("tracepoint/xdp/xdp_exception")
int count_exceptions(void *ctx)
{
	__u32 key = 0;
	__u64 *n = bpf_map_lookup_elem(&exceptions, &key);
	if (n)
		__sync_fetch_and_add(n, 1);
	return 0;
}

SEC("tc")
int tc_pass(struct __sk_buff *skb)
{
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
