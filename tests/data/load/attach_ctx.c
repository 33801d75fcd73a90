// struct xdp_md's egress_ifindex is readable only by programs loaded for a devmap entry
// (expected attach type BPF_XDP_DEVMAP, from libbpf's section names xdp/devmap and
// xdp.frags/devmap); a plain XDP program and a cpumap one are refused the access.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c attach_ctx.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define READS_EGRESS(name, section)                              \
	SEC(section) int name(struct xdp_md *ctx)               \
	{                                                        \
		return ctx->egress_ifindex ? XDP_PASS : XDP_DROP; \
	}

READS_EGRESS(egress_plain, "xdp")
READS_EGRESS(egress_frags, "xdp.frags")
READS_EGRESS(egress_devmap, "xdp/devmap")
READS_EGRESS(egress_devmap_frags, "xdp.frags/devmap")
READS_EGRESS(egress_cpumap, "xdp/cpumap")
READS_EGRESS(egress_cpumap_frags, "xdp.frags/cpumap")

char _license[] SEC("license") = "GPL";
