// An object under a license the kernel does not read as GPL-compatible ("MIT"): its program
// that calls bpf_trace_printk (a GPL-only helper) is refused at load, the other is not.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c non_gpl.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int prints(struct xdp_md *ctx)
{
	bpf_printk("ifindex %d", ctx->ingress_ifindex);
	return XDP_PASS;
}

SEC("xdp")
int passes(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "MIT";
