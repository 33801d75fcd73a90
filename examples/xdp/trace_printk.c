// SPDX-License-Identifier: GPL-2.0
/*
 * trace_printk: logs every IPv4 frame's protocol, length and TTL with
 * bpf_printk (the debugging aid most XDP programs start with), counts frames
 * in .bss, and passes everything.
 *
 * bpf_printk is bpf_trace_printk with the format on the stack; the kernel
 * writes the line to the trace pipe, bpfemu keeps it with the packet index.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

__u64 frames_seen = 0;

SEC("xdp")
int xdp_trace(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip;

	__sync_fetch_and_add(&frames_seen, 1);
	if ((void *)(eth + 1) > data_end)
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP)) {
		bpf_printk("non-ip ethertype 0x%x len %u", bpf_ntohs(eth->h_proto),
			   (__u32)(data_end - data));
		return XDP_PASS;
	}
	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end)
		return XDP_PASS;
	bpf_printk("ipv4 proto %d len %d ttl %u", ip->protocol,
		   bpf_ntohs(ip->tot_len), ip->ttl);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
