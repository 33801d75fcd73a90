// Three XDP programs in one object, for `bpfemu diff`'s kernel side:
// - `counted_pass` counts packets in an array and passes them: the kernel accepts it;
// - `unchecked_read` reads the packet without a bounds check: the kernel rejects it, which must
//   not stop the others from being compared;
// - `legacy_section` sits in a pre-1.0 section name (`xdp_` prefix) that libbpf 1.x no longer
//   knows; bpfemu's loader resolves it to XDP, and the kernel is told so.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} packets SEC(".maps");

SEC("xdp")
int counted_pass(struct xdp_md *ctx)
{
	__u32 key = 0;
	__u64 *n = bpf_map_lookup_elem(&packets, &key);
	if (n)
		__sync_fetch_and_add(n, 1);
	return XDP_PASS;
}

SEC("xdp")
int unchecked_read(struct xdp_md *ctx)
{
	unsigned char *data = (unsigned char *)(long)ctx->data;
	return data[12] == 0x08 ? XDP_PASS : XDP_DROP;
}

SEC("xdp_legacy")
int legacy_section(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	return data + 60 > end ? XDP_DROP : XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
