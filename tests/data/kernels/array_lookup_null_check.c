// An array lookup by a constant key in range, then a NULL check with work on both sides.
// From 6.14 the kernel knows such a lookup cannot miss and walks the found side only; 5.10,
// 6.1 and 6.12 get map_value_or_null and walk the NULL side too.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c array_lookup_null_check.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} misses SEC(".maps");

SEC("xdp")
int count_packets(struct xdp_md *ctx)
{
	__u32 key = 0;
	__u64 *n = bpf_map_lookup_elem(&stats, &key);

	if (!n) {
		__u64 *m = bpf_map_lookup_elem(&misses, &key);

		if (m)
			*m += 1;
		return XDP_ABORTED;
	}
	*n += ctx->data_end - ctx->data;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
