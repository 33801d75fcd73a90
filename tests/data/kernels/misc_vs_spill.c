// A u64 key on the stack is a spilled register (one byte of the packet) on one path and two
// u32 stores (STACK_MISC bytes) on the other. From 6.8 the kernel compares the slot as two
// scalars, the spilled one imprecise, and prunes the second path where they meet; 5.10 and
// 6.1 want the same slot types and walk the rest again.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c misc_vs_spill.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u64);
	__type(value, __u64);
} seen SEC(".maps");

union key {
	__u64 whole;
	__u32 halves[2];
};

SEC("xdp")
int count_by_key(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	__u8 *p = (void *)(long)ctx->data;
	volatile union key k;
	__u64 *n;

	if ((void *)(p + 4) > data_end)
		return XDP_PASS;
	if (p[0] != 7) {
		k.whole = p[1];
	} else {
		k.halves[0] = p[2];
		k.halves[1] = p[3];
	}
	n = bpf_map_lookup_elem(&seen, (void *)&k);
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
