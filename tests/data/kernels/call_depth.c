// How deep calls may nest (behaviour::max_call_frames): 7.2 allows 16 frames (MAX_CALL_FRAMES
// 16), the older kernels 8. The walk refuses a call that would need one frame too many ("the
// call stack of N frames is too deep"); check_max_stack_depth counts the frames of each call
// chain again after the walk, where 7.2 (and 6.18) start counting afresh at a global function,
// which is verified on its own. The last program is a control every kernel accepts.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c call_depth.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* A chain of static functions: chainN calls chainN-1 ... chain0, N + 1 frames in all. */
static __noinline int chain0(int x)
{
	return x & 1;
}

#define LINK(n, prev)                                  \
	static __noinline int chain##n(int x)          \
	{                                              \
		return prev(x + 1) + 1;                \
	}

LINK(1, chain0)
LINK(2, chain1)
LINK(3, chain2)
LINK(4, chain3)
LINK(5, chain4)
LINK(6, chain5)
LINK(7, chain6)
LINK(8, chain7)
LINK(9, chain8)
LINK(10, chain9)
LINK(11, chain10)
LINK(12, chain11)
LINK(13, chain12)
LINK(14, chain13)
LINK(15, chain14)
LINK(16, chain15)

/* Main plus 8 nested calls: 9 frames, one more than the kernels before 7.2 allow. */
SEC("xdp")
int nine_frames(struct xdp_md *ctx)
{
	return chain7(ctx->ingress_ifindex) & 3;
}

/* Main plus 15 nested calls: 16 frames, 7.2's limit. */
SEC("xdp")
int sixteen_frames(struct xdp_md *ctx)
{
	return chain14(ctx->ingress_ifindex) & 3;
}

/* Main plus 16 nested calls: 17 frames, too many everywhere. */
SEC("xdp")
int seventeen_frames(struct xdp_md *ctx)
{
	return chain15(ctx->ingress_ifindex) & 3;
}

/* A global function in the middle of a chain: its own walk has 7 frames; counted from main,
 * the chain main -> enter -> through_global -> chain5 .. chain0 has 9. */
__noinline int through_global(int x)
{
	return chain5(x) + 1;
}

static __noinline int enter(int x)
{
	return through_global(x) + 1;
}

SEC("xdp")
int global_in_chain(struct xdp_md *ctx)
{
	return enter(ctx->ingress_ifindex) & 3;
}

/* Main plus 7 nested calls: 8 frames, allowed everywhere. */
SEC("xdp")
int eight_frames(struct xdp_md *ctx)
{
	return chain6(ctx->ingress_ifindex) & 3;
}

char _license[] SEC("license") = "GPL";
