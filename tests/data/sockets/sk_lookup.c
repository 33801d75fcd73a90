// Socket lookups from XDP, for tests/sockets_vs_kernel.rs: the tuple is the packet's
// (source = the remote end, destination = the local end), the lookup and its arguments are
// chosen by the last byte of the Ethernet source address (`MODE_*`), and every field of the
// socket found (or zeros and `found = 0`) is written into the next slot of `seen`; the action
// says whether a socket was found (PASS) or not (DROP), and the packet's first 4 bytes get
// the socket's state and family when one was. The MODE_SYNCOOKIE* modes also ask
// bpf_tcp_check_syncookie about the packet's headers and the TCP socket found.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c sk_lookup.c
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

enum {
	MODE_SK = 0,       /* bpf_sk_lookup_tcp / bpf_sk_lookup_udp by the protocol */
	MODE_SKC = 1,      /* bpf_skc_lookup_tcp (TCP only) */
	MODE_BAD_SIZE = 2, /* the tuple's size plus one */
	MODE_FLAGS = 3,    /* flags 1 */
	MODE_NETNS0 = 4,   /* netns_id 0: a namespace by id */
	MODE_NETNS_U32 = 5, /* netns_id 0xffffffff: the current one, as a u32 */
	/* bpf_tcp_check_syncookie on the socket MODE_SK found: with the packet's IP and TCP
	 * headers, a short IP header (8 bytes) or a short TCP header (12 bytes). */
	MODE_SYNCOOKIE = 6,
	MODE_SYNCOOKIE_SHORT_IP = 7,
	MODE_SYNCOOKIE_SHORT_TCP = 8,
};

struct seen {
	__u32 found;
	__u32 mode;
	__u32 bound_dev_if, family, type, protocol, mark, priority;
	__u32 src_ip4, src_ip6[4], src_port;
	__u32 dst_port, dst_port16, dst_ip4, dst_ip6[4];
	__u32 state;
	__s32 rx_queue_mapping;
	/* narrow loads */
	__u32 family8, src_port16, dst_ip4_byte2, src_ip6_half1, dst_port_byte1;
	__s64 syncookie;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, struct seen);
} seen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} next SEC(".maps");

static __always_inline void common_fields(struct seen *s, struct bpf_sock *sk)
{
	s->family = sk->family;
	s->src_ip4 = sk->src_ip4;
	s->src_ip6[0] = sk->src_ip6[0];
	s->src_ip6[1] = sk->src_ip6[1];
	s->src_ip6[2] = sk->src_ip6[2];
	s->src_ip6[3] = sk->src_ip6[3];
	s->src_port = sk->src_port;
	s->dst_port = *(volatile __u32 *)&sk->dst_port;
	s->dst_port16 = sk->dst_port;
	s->dst_ip4 = sk->dst_ip4;
	s->dst_ip6[0] = sk->dst_ip6[0];
	s->dst_ip6[1] = sk->dst_ip6[1];
	s->dst_ip6[2] = sk->dst_ip6[2];
	s->dst_ip6[3] = sk->dst_ip6[3];
	s->state = sk->state;
	s->family8 = *(volatile __u8 *)&sk->family;
	s->src_port16 = *(volatile __u16 *)&sk->src_port;
	s->dst_ip4_byte2 = *((volatile __u8 *)&sk->dst_ip4 + 2);
	s->src_ip6_half1 = *((volatile __u16 *)&sk->src_ip6[3] + 1);
	s->dst_port_byte1 = *((volatile __u8 *)&sk->dst_port + 1);
}

/* bpf_tcp_check_syncookie as `mode` asks, on the headers after `eth`. */
static __always_inline long check_syncookie(struct bpf_sock *sk, struct ethhdr *eth,
					    void *data_end, __u32 tuple_size, __u32 mode)
{
	void *iph = eth + 1;

	if (tuple_size == sizeof(((struct bpf_sock_tuple *)0)->ipv4)) {
		struct tcphdr *th = iph + sizeof(struct iphdr);

		if ((void *)(th + 1) > data_end)
			return 1;
		if (mode == MODE_SYNCOOKIE_SHORT_IP)
			return bpf_tcp_check_syncookie(sk, iph, 8, th, sizeof(*th));
		if (mode == MODE_SYNCOOKIE_SHORT_TCP)
			return bpf_tcp_check_syncookie(sk, iph, sizeof(struct iphdr), th, 12);
		return bpf_tcp_check_syncookie(sk, iph, sizeof(struct iphdr), th, sizeof(*th));
	} else {
		struct tcphdr *th = iph + sizeof(struct ipv6hdr);

		if ((void *)(th + 1) > data_end)
			return 1;
		if (mode == MODE_SYNCOOKIE_SHORT_IP)
			return bpf_tcp_check_syncookie(sk, iph, 8, th, sizeof(*th));
		if (mode == MODE_SYNCOOKIE_SHORT_TCP)
			return bpf_tcp_check_syncookie(sk, iph, sizeof(struct ipv6hdr), th, 12);
		return bpf_tcp_check_syncookie(sk, iph, sizeof(struct ipv6hdr), th, sizeof(*th));
	}
}

static __always_inline void full_fields(struct seen *s, struct bpf_sock *sk)
{
	s->bound_dev_if = sk->bound_dev_if;
	s->type = sk->type;
	s->protocol = sk->protocol;
	s->mark = sk->mark;
	s->priority = sk->priority;
	/* A connection's depends on the path of the packets it received (on the loopback, not
	 * always -1 or 0): read only where nothing was received. */
	if (sk->protocol != IPPROTO_TCP || sk->state != BPF_TCP_ESTABLISHED)
		s->rx_queue_mapping = sk->rx_queue_mapping;
}

SEC("xdp")
int sk_lookup(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct bpf_sock_tuple tuple = {};
	__u32 size, tuple_size, zero = 0, *slot, mode;
	__u8 proto;
	void *l4;
	struct bpf_sock *sk = 0;
	struct seen *s;
	__u64 netns = BPF_F_CURRENT_NETNS, flags = 0;

	if ((void *)(eth + 1) > data_end)
		return XDP_ABORTED;
	mode = eth->h_source[5];
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);

		if ((void *)(ip + 1) > data_end)
			return XDP_ABORTED;
		tuple.ipv4.saddr = ip->saddr;
		tuple.ipv4.daddr = ip->daddr;
		proto = ip->protocol;
		l4 = ip + 1;
		size = sizeof(tuple.ipv4);
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);

		if ((void *)(ip6 + 1) > data_end)
			return XDP_ABORTED;
		__builtin_memcpy(tuple.ipv6.saddr, &ip6->saddr, 16);
		__builtin_memcpy(tuple.ipv6.daddr, &ip6->daddr, 16);
		proto = ip6->nexthdr;
		l4 = ip6 + 1;
		size = sizeof(tuple.ipv6);
	} else {
		return XDP_ABORTED;
	}
	/* TCP and UDP both start with the two ports. */
	if (l4 + sizeof(struct udphdr) > data_end)
		return XDP_ABORTED;
	if (size == sizeof(tuple.ipv4)) {
		tuple.ipv4.sport = ((struct udphdr *)l4)->source;
		tuple.ipv4.dport = ((struct udphdr *)l4)->dest;
	} else {
		tuple.ipv6.sport = ((struct udphdr *)l4)->source;
		tuple.ipv6.dport = ((struct udphdr *)l4)->dest;
	}
	tuple_size = size;
	if (mode == MODE_BAD_SIZE)
		size += 1;
	if (mode == MODE_FLAGS)
		flags = 1;
	if (mode == MODE_NETNS0)
		netns = 0;
	if (mode == MODE_NETNS_U32)
		netns = 0xffffffffULL;

	slot = bpf_map_lookup_elem(&next, &zero);
	if (!slot)
		return XDP_ABORTED;
	__u32 index = *slot & 63;
	*slot += 1;
	s = bpf_map_lookup_elem(&seen, &index);
	if (!s)
		return XDP_ABORTED;
	__builtin_memset(s, 0, sizeof(*s));
	s->mode = mode;

	if (proto == IPPROTO_TCP && mode == MODE_SKC) {
		struct bpf_sock *skc = (struct bpf_sock *)bpf_skc_lookup_tcp(ctx, &tuple, size, netns, flags);

		if (!skc)
			return XDP_DROP;
		s->found = 1;
		common_fields(s, skc);
		bpf_sk_release(skc);
		goto found;
	}
	if (proto == IPPROTO_TCP)
		sk = bpf_sk_lookup_tcp(ctx, &tuple, size, netns, flags);
	else if (proto == IPPROTO_UDP)
		sk = bpf_sk_lookup_udp(ctx, &tuple, size, netns, flags);
	if (!sk)
		return XDP_DROP;
	s->found = 1;
	common_fields(s, sk);
	full_fields(s, sk);
	if (proto == IPPROTO_TCP && mode >= MODE_SYNCOOKIE)
		s->syncookie = check_syncookie(sk, eth, data_end, tuple_size, mode);
	bpf_sk_release(sk);
found:
	if (data + 4 > data_end)
		return XDP_ABORTED;
	((__u8 *)data)[0] = s->state;
	((__u8 *)data)[1] = s->family;
	((__u8 *)data)[2] = s->src_port;
	((__u8 *)data)[3] = s->dst_port16 >> 8;
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
