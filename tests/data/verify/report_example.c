// The HTML report's example (`bpfemu verify --html`): a program the kernel's verifier rejects
// on its second path, after a loop it walks iteration by iteration and branches it prunes.
// The IPv4 header is read without checking that it is in the packet.
// Built by tests/objects/build.sh tests/data/verify (clang-19, -mcpu=v3, debug paths relative).
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

SEC("xdp")
int xdp_udp_after_sum(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	unsigned char *bytes = data;
	__u32 sum = 0;

	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
#pragma clang loop unroll(disable)
	for (int i = 0; i < 6; i++)
		sum += bytes[i];
	if (eth->h_proto != bpf_htons(ETH_P_IP)) {
		if (eth->h_dest[0] == 0xff)
			sum += bpf_get_prandom_u32();
		if (eth->h_source[0] == 0xff)
			sum += bpf_get_prandom_u32();
		if (eth->h_source[1] == 0xff)
			sum += bpf_get_prandom_u32();
		return sum & 1 ? XDP_PASS : XDP_DROP;
	}
	struct iphdr *ip = (void *)(eth + 1);
	return ip->protocol == IPPROTO_UDP ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
