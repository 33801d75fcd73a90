// Tail calls from a subprogram: one that succeeds returns to the subprogram's caller with the
// return value of the program it jumped to, and after it the caller's packet pointers are
// gone (that program may have moved the packet); 6.18 walks that return at the call. A tail
// call from the main program needs no such path (a success ends the program).
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c tail_call_subprogram.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u32);
} jumps SEC(".maps");

__u32 table[4];

static __attribute__((noinline)) int jump_or_index(struct xdp_md *ctx, int index)
{
	int same;

	bpf_tail_call(ctx, &jumps, 0);
	/* Opaque to the compiler, which would otherwise use `index` in the caller. */
	asm volatile("%0 = %1" : "=r"(same) : "r"(index));
	return same;
}

SEC("xdp")
int index_after_tail_call(struct xdp_md *ctx)
{
	int i = jump_or_index(ctx, 3);

	return table[i] ? XDP_PASS : XDP_DROP;
}

SEC("xdp")
int index_checked_after_tail_call(struct xdp_md *ctx)
{
	int i = jump_or_index(ctx, 3);

	if (i < 0 || i > 3)
		return XDP_DROP;
	return table[i] ? XDP_PASS : XDP_DROP;
}

SEC("xdp")
int packet_after_subprogram_tail_call(struct xdp_md *ctx)
{
	unsigned char *data = (void *)(long)ctx->data;

	if (data + 8 > (unsigned char *)(long)ctx->data_end)
		return XDP_DROP;
	jump_or_index(ctx, 0);
	return data[0] ? XDP_PASS : XDP_DROP;
}

SEC("xdp")
int packet_after_main_tail_call(struct xdp_md *ctx)
{
	unsigned char *data = (void *)(long)ctx->data;

	if (data + 8 > (unsigned char *)(long)ctx->data_end)
		return XDP_DROP;
	bpf_tail_call(ctx, &jumps, 1);
	return data[0] ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
