// An XDP program calling a kfunc XDP may call that bpfemu's verifier does not check yet
// (bpf_throw): `bpfemu verify` calls it undecided and exits 2.
// Built with: clang-19 -O2 -g -target bpf -mcpu=v3 -I/usr/include/x86_64-linux-gnu -c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

extern void bpf_throw(__u64 cookie) __ksym;

SEC("xdp")
int xdp_throws(struct xdp_md *ctx)
{
	if (ctx->rx_queue_index == 77)
		bpf_throw(1);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
