// SPDX-License-Identifier: GPL-2.0
/*
 * socket_lookups.c - look up the socket each TCP or UDP packet is for, and count what was
 * found in a map: the verifier's reference tracking (every socket found is released) and
 * field reads through struct bpf_sock, run against the kernel by tests/diff_semantics.rs.
 *
 * slot 0: lookups that found nothing, 1: sockets found, 2: packets not TCP/UDP over IPv4,
 * 3: sum of the families of the sockets found, 4: sk_lookup_udp/skc_lookup_tcp NULLs.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/in.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 5);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

static __always_inline void bump(__u32 slot, __u64 by)
{
	__u64 *v = bpf_map_lookup_elem(&counts, &slot);

	if (v)
		__sync_fetch_and_add(v, by);
}

SEC("xdp")
int lookup_sockets(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct bpf_sock_tuple tuple = {};
	struct bpf_sock *sk;
	struct udphdr *l4;

	if ((void *)(ip + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP) ||
	    (ip->protocol != IPPROTO_TCP && ip->protocol != IPPROTO_UDP)) {
		bump(2, 1);
		return XDP_PASS;
	}
	/* Ports sit at the same place in TCP and UDP headers. */
	l4 = (void *)ip + sizeof(*ip);
	if ((void *)(l4 + 1) > data_end) {
		bump(2, 1);
		return XDP_PASS;
	}
	tuple.ipv4.saddr = ip->saddr;
	tuple.ipv4.daddr = ip->daddr;
	tuple.ipv4.sport = l4->source;
	tuple.ipv4.dport = l4->dest;
	if (ip->protocol == IPPROTO_TCP)
		sk = bpf_sk_lookup_tcp(ctx, &tuple, sizeof(tuple.ipv4), BPF_F_CURRENT_NETNS, 0);
	else
		sk = bpf_sk_lookup_udp(ctx, &tuple, sizeof(tuple.ipv4), BPF_F_CURRENT_NETNS, 0);
	if (!sk) {
		bump(0, 1);
	} else {
		bump(3, sk->family + sk->dst_port + sk->state);
		bump(1, 1);
		bpf_sk_release(sk);
	}
	/* A listening socket of any state, in the namespace given by id 0. */
	sk = (struct bpf_sock *)bpf_skc_lookup_tcp(ctx, &tuple, sizeof(tuple.ipv4), 0, 0);
	if (sk) {
		bump(1, 1);
		bpf_sk_release(sk);
		return XDP_DROP;
	}
	bump(4, 1);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
