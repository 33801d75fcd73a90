// An XDP program every kernel since 4.x accepts: a bounds-checked read of the Ethernet
// header's protocol field, passing IPv4 and dropping the rest.
#include <linux/bpf.h>
#include <linux/if_ether.h>

#define SEC(name) __attribute__((section(name), used))

SEC("xdp")
int pass_ipv4(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		return XDP_ABORTED;
	return eth->h_proto == __builtin_bswap16(ETH_P_IP) ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
