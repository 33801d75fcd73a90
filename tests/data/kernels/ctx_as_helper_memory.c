// The context passed where a helper wants memory: refused by every kernel, in other words
// from 7.2 on, whose helper memory arguments take a context too (only a syscall program's
// may be read there). 6.18: "R1 type=ctx expected=fp, pkt, ..., trusted_ptr_"; 7.2:
// "R1 type=ctx expected=fp", and "dereference of modified ctx ptr R1 off=4 disallowed" for
// a moved one.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c ctx_as_helper_memory.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int csum_of_ctx(struct xdp_md *ctx)
{
	return bpf_csum_diff((void *)ctx, 4, 0, 0, 0) ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int csum_of_moved_ctx(struct xdp_md *ctx)
{
	return bpf_csum_diff((void *)ctx + 4, 4, 0, 0, 0) ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
