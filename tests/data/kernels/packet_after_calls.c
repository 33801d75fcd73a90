// Packet pointers kept or forgotten across calls that may move the packet, which the kernels
// treat apart (behaviour.rs: forgets_packets_at_tail_calls, forgets_packets_at_every_tail_call):
// 5.10 and 6.1 forget them only at the packet helpers themselves; 6.12 (Debian's 6.12.95) also
// at every tail call and at a call of a global function that may move the packet; 6.18 and
// 7.2 keep them across a tail call in the main program, which either leaves it or falls
// through with nothing moved. Each program reads a byte through a pointer checked before the
// call; the last one is a control every kernel accepts.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c packet_after_calls.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
} jumps SEC(".maps");

/* Moves the packet's start: a global function that may change packet data. */
__noinline int pull(struct xdp_md *ctx)
{
	return bpf_xdp_adjust_head(ctx, 0) ? 0 : 1;
}

/* A tail call from a global function: it may change packet data too. */
__noinline int jump(struct xdp_md *ctx)
{
	bpf_tail_call(ctx, &jumps, 0);
	return 1;
}

/* Neither: a global function that only computes. */
__noinline int twice(int x)
{
	return x * 2;
}

SEC("xdp")
int tail_call_in_main(struct xdp_md *ctx)
{
	volatile __u8 *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;

	if ((void *)(data + 1) > end)
		return XDP_PASS;
	bpf_tail_call(ctx, &jumps, 0);
	return data[0] == 0x45 ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int global_that_pulls(struct xdp_md *ctx)
{
	volatile __u8 *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;

	if ((void *)(data + 1) > end)
		return XDP_PASS;
	if (!pull(ctx))
		return XDP_ABORTED;
	return data[0] == 0x45 ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int global_that_tail_calls(struct xdp_md *ctx)
{
	volatile __u8 *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;

	if ((void *)(data + 1) > end)
		return XDP_PASS;
	if (!jump(ctx))
		return XDP_ABORTED;
	return data[0] == 0x45 ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int global_that_computes(struct xdp_md *ctx)
{
	volatile __u8 *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;

	if ((void *)(data + 1) > end)
		return XDP_PASS;
	if (twice(ctx->rx_queue_index) == 6)
		return XDP_ABORTED;
	return data[0] == 0x45 ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
