// Large maps, as katran's consistent-hash ring (33.5M entries) is: an array of 4M entries the
// program reads and writes one slot of, and a hash it adds a key to per packet length.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << 22);
	__type(key, __u32);
	__type(value, __u32);
} ring SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 16);
	__type(key, __u32);
	__type(value, __u64);
} lengths SEC(".maps");

SEC("xdp")
int ring_lookup(struct xdp_md *ctx)
{
	__u32 len = ctx->data_end - ctx->data;
	__u32 slot = (len * 2654435761u) & ((1 << 22) - 1);
	__u32 *v = bpf_map_lookup_elem(&ring, &slot);
	if (!v)
		return XDP_ABORTED;
	*v += 1;
	__u64 one = 1, *n = bpf_map_lookup_elem(&lengths, &len);
	if (n)
		*n += 1;
	else
		bpf_map_update_elem(&lengths, &len, &one, BPF_ANY);
	return *v & 1 ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
