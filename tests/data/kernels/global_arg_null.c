// Global functions' pointer arguments that 7.2 refuses and 6.18 lets through (behaviour.rs:
// refuses_null_and_stale_packet_global_args): a NULL constant for an `arg:nonnull` argument (6.18's
// check_mem_reg passes any NULL before the non-NULL test), and a packet pointer passed to a
// global function that may change packet data. Each has a control the kernels all accept.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c global_arg_null.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define __arg_nonnull __attribute__((btf_decl_tag("arg:nonnull")))

__noinline int product(int *a __arg_nonnull, int *b __arg_nonnull)
{
	return *a * *b;
}

SEC("xdp")
int null_to_nonnull(struct xdp_md *ctx)
{
	int y = ctx->rx_queue_index;

	return product((int *)0, &y) == 6 ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int stack_to_nonnull(struct xdp_md *ctx)
{
	int x = 3, y = ctx->rx_queue_index;

	return product(&x, &y) == 6 ? XDP_DROP : XDP_PASS;
}

/* Reads the byte and moves the packet's start: the function may change packet data. */
__noinline int read_then_pull(struct xdp_md *ctx, __u8 *byte __arg_nonnull)
{
	int first = *byte;

	if (bpf_xdp_adjust_head(ctx, 0))
		return 0;
	return first;
}

/* Reads the byte only. */
__noinline int read_only(__u8 *byte __arg_nonnull)
{
	return *byte;
}

SEC("xdp")
int packet_to_pulling_global(struct xdp_md *ctx)
{
	__u8 *data = (void *)(long)ctx->data;
	__u8 *end = (void *)(long)ctx->data_end;

	if (data + 1 > end)
		return XDP_PASS;
	return read_then_pull(ctx, data) == 0x45 ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int packet_to_reading_global(struct xdp_md *ctx)
{
	__u8 *data = (void *)(long)ctx->data;
	__u8 *end = (void *)(long)ctx->data_end;

	if (data + 1 > end)
		return XDP_PASS;
	return read_only(data) == 0x45 ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
