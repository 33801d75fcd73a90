// A program the kernel's verifier rejects: the Ethernet header is read before the packet's
// length is checked. `bpfemu verify` must point at the read of h_proto with the kernel's message.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c unchecked_read.c
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int xdp_ok(struct xdp_md *ctx)
{
	return XDP_PASS;
}

SEC("xdp")
int xdp_unchecked(struct xdp_md *ctx)
{
	struct ethhdr *eth = (void *)(long)ctx->data;
	return eth->h_proto == 0x0008 ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
