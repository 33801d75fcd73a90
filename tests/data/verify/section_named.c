// Two programs, each alone in its section, for `--prog SECTION`: the one in `xdp` reads the
// Ethernet header before checking the packet's length (the kernel's verifier rejects it), the
// one in `xdp.frags` checks first. Every command must verify the program a section name picks.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c section_named.c
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int reads_unchecked(struct xdp_md *ctx)
{
	struct ethhdr *eth = (void *)(long)ctx->data;
	return eth->h_proto == 0x0008 ? XDP_PASS : XDP_DROP;
}

SEC("xdp.frags")
int reads_checked(struct xdp_md *ctx)
{
	struct ethhdr *eth = (void *)(long)ctx->data;
	if ((void *)(eth + 1) > (void *)(long)ctx->data_end)
		return XDP_ABORTED;
	return eth->h_proto == 0x0008 ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
