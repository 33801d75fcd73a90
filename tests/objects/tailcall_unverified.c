// A dispatcher the verifier accepts whose prog array holds a stage it rejects (the Ethernet
// header is read before the packet's length is checked). `--engine jit-trusted` must refuse
// the dispatcher: a tail call would run the unverified stage on host memory.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>

int unchecked_stage(struct xdp_md *ctx);

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, int(void *));
} stages SEC(".maps") = {
	.values = { [0] = (void *)&unchecked_stage },
};

SEC("xdp")
int dispatcher(struct xdp_md *ctx)
{
	bpf_tail_call(ctx, &stages, 0);
	return XDP_PASS;
}

SEC("xdp")
int unchecked_stage(struct xdp_md *ctx)
{
	struct ethhdr *eth = (void *)(long)ctx->data;
	return eth->h_proto == 0x0008 ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
