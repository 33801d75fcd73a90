// XDP programs that run from devmap and cpumap entries (expected attach types BPF_XDP_DEVMAP
// and BPF_XDP_CPUMAP), which BPF_PROG_TEST_RUN refuses, beside a plain one it runs.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp/devmap")
int on_devmap(struct xdp_md *ctx)
{
	return XDP_PASS;
}

SEC("xdp/cpumap")
int on_cpumap(struct xdp_md *ctx)
{
	return XDP_PASS;
}

SEC("xdp.frags/devmap")
int on_devmap_frags(struct xdp_md *ctx)
{
	return XDP_DROP;
}

SEC("xdp")
int plain(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
