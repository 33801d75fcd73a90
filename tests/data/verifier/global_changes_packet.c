// Global functions that move the packet (bpf_xdp_adjust_head, directly or through another
// global function): packet pointers the caller proved before the call are gone after it, as
// for a direct call. The kernel tracks it per subprogram (changes_pkt_data) because it does
// not walk into global functions. Pointers re-derived after the call are fine.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c global_changes_packet.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

__attribute__((noinline)) int shrink(struct xdp_md *ctx)
{
	return bpf_xdp_adjust_head(ctx, 4);
}

__attribute__((noinline)) int shrink_twice_removed(struct xdp_md *ctx)
{
	return shrink(ctx) + 1;
}

__attribute__((noinline)) int touches_nothing(struct xdp_md *ctx)
{
	return ctx->ingress_ifindex == 1;
}

SEC("xdp")
int stale_after_global(struct xdp_md *ctx)
{
	int *p = (void *)(long)ctx->data;

	if ((void *)(p + 1) > (void *)(long)ctx->data_end)
		return XDP_DROP;
	shrink_twice_removed(ctx);
	*p = 42;
	return XDP_PASS;
}

SEC("xdp")
int fresh_after_global(struct xdp_md *ctx)
{
	int *p;

	shrink(ctx);
	p = (void *)(long)ctx->data;
	if ((void *)(p + 1) > (void *)(long)ctx->data_end)
		return XDP_DROP;
	*p = 42;
	return XDP_PASS;
}

SEC("xdp")
int kept_across_harmless_global(struct xdp_md *ctx)
{
	int *p = (void *)(long)ctx->data;

	if ((void *)(p + 1) > (void *)(long)ctx->data_end)
		return XDP_DROP;
	touches_nothing(ctx);
	*p = 42;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
