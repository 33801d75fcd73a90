// A socket storage map (as katran's tcp_pkt_router has), used by a sock_ops program, beside
// an XDP program of the same object: storage maps have no entries (max_entries 0,
// BPF_F_NO_PREALLOC, BTF key and value), and the XDP program runs.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} flow_marks SEC(".maps");

SEC("sockops")
int mark_flows(struct bpf_sock_ops *skops)
{
	struct bpf_sock *sk = skops->sk;
	if (!sk)
		return 1;
	__u64 *mark = bpf_sk_storage_get(&flow_marks, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (mark)
		*mark += 1;
	return 1;
}

SEC("xdp")
int pass_ipv4(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	if (data + 14 > end)
		return XDP_DROP;
	return ((__u8 *)data)[12] == 0x08 ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
