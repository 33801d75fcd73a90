// Built with -mcpu=v4: the signed division becomes BPF_SDIV (BPF_DIV with offset 1), an
// instruction 6.6 introduced, so that 5.10 and 6.1 reject what 6.12 and later accept.
#include <linux/bpf.h>

#define SEC(name) __attribute__((section(name), used))

SEC("xdp")
int signed_divide(struct xdp_md *ctx)
{
	long len = (long)ctx->data_end - (long)ctx->data;
	/* A divisor the compiler cannot see, so that the division stays one. */
	long divisor = (long)ctx->rx_queue_index + 2;

	return (len - 100) / divisor < 0 ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
