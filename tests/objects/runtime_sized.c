// Maps sized at run time (max_entries 0 in the object, as xdp-tools' xdp-bench declares them)
// next to a socket storage map, which has no entries at all (max_entries must stay 0).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, __u64);
} sized_later_a SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
} sized_later_b SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} per_socket SEC(".maps");

SEC("xdp")
int count_by_length(struct xdp_md *ctx)
{
	__u32 key = ctx->data_end - ctx->data;
	__u64 one = 1;
	bpf_map_update_elem(&sized_later_a, &key, &one, BPF_ANY);
	key = 0;
	__u64 *n = bpf_map_lookup_elem(&sized_later_b, &key);
	if (n)
		*n += 1;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
