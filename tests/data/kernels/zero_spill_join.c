// A u64 on the stack is zero on one path and a byte of the packet on the other; clang joins
// the paths before the one store. From 6.8 the kernel spills the zero as a scalar like any
// other, the zero stays imprecise and the second path is pruned at the store; 5.10 and 6.1
// write the zero as STACK_ZERO and make its register precise, so the second path, whose
// register is a byte, is not pruned there and the rest is walked again.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c zero_spill_join.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u64);
	__type(value, __u64);
} seen SEC(".maps");

SEC("xdp")
int count_by_tag(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	__u8 *p = (void *)(long)ctx->data;
	volatile __u64 tag;
	__u64 *n;

	if ((void *)(p + 4) > data_end)
		return XDP_PASS;
	if (p[0] == 7)
		tag = 0;
	else
		tag = p[1];
	n = bpf_map_lookup_elem(&seen, (void *)&tag);
	if (!n)
		return XDP_PASS;
	if (*n > 100)
		return XDP_DROP;
	if (*n > 10)
		*n += 2;
	else
		*n += 1;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
