// An array map declared BPF_F_NO_PREALLOC, which BPF_MAP_CREATE refuses (EINVAL): libbpf
// creates maps before it loads programs, so the object's program never loads, however sound.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c array_no_prealloc.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

SEC("xdp")
int count(struct xdp_md *ctx)
{
	__u32 key = 0;
	__u64 *value = bpf_map_lookup_elem(&counters, &key);

	if (value)
		__sync_fetch_and_add(value, 1);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
