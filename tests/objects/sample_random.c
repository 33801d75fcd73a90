// "Sample 1 in 4": the verdict depends only on bpf_get_prandom_u32. `bpfemu diff` must not
// call its packets mismatches, and must say they are not compared.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int sample_quarter(struct xdp_md *ctx)
{
	return (bpf_get_prandom_u32() & 3) == 0 ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
