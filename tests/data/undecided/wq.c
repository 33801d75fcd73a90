// An XDP program calling a kfunc XDP may call that bpfemu's verifier does not check yet
// (bpf_wq_init, BPF workqueues): `bpfemu verify` calls it undecided and exits 2.
// Built by tests/objects/build.sh tests/data/undecided (clang-19, -mcpu=v3, debug paths relative).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct bpf_wq {
	__u64 opaque[2];	/* libbpf wants the struct the kernel has, not a forward declaration */
};
extern int bpf_wq_init(struct bpf_wq *wq, void *p__map, unsigned int flags) __ksym;

SEC("xdp")
int xdp_workqueue(struct xdp_md *ctx)
{
	if (ctx->rx_queue_index == 77)
		bpf_wq_init((void *)0, (void *)0, 0);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
