// A planted bug for `bpfemu fuzz` to find: the program aborts on IPv6 packets that carry a
// hop-by-hop options header, a case its author forgot. Everything else passes or drops.
// Build (from this folder): clang-19 -O2 -g -target bpf -mcpu=v3 -fdebug-prefix-map=$PWD=. \
//   -I/usr/include/x86_64-linux-gnu -c hop_by_hop_bug.c -o build/hop_by_hop_bug.o
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ipv6.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define NEXTHDR_HOP 0
#define NEXTHDR_UDP 17

SEC("xdp")
int hop_by_hop_bug(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > data_end)
			return XDP_DROP;
		return ip->ttl > 1 ? XDP_PASS : XDP_DROP;
	}
	if (eth->h_proto != bpf_htons(ETH_P_IPV6))
		return XDP_PASS;
	struct ipv6hdr *ip6 = (void *)(eth + 1);
	if ((void *)(ip6 + 1) > data_end)
		return XDP_DROP;
	if (ip6->nexthdr == NEXTHDR_UDP)
		return XDP_PASS;
	if (ip6->nexthdr == NEXTHDR_HOP)
		return XDP_ABORTED; /* the bug */
	return XDP_DROP;
}

char _license[] SEC("license") = "GPL";
