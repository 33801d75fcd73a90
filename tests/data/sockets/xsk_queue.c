// An AF_XDP socket's queue, for verifier/tests/xdp_xlated_corpus.rs: a lookup in an XSKMAP
// gives a `struct bpf_xdp_sock`, whose `queue_id` load the kernel rewrites into a load from
// its `struct xdp_sock`; sign-extending and narrow-field loads of a `struct bpf_sock` beside it.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v4
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c xsk_queue.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

SEC("xdp")
int xsk_queue(struct xdp_md *ctx)
{
	__u32 key = ctx->rx_queue_index & 3;
	struct bpf_xdp_sock *xsk = bpf_map_lookup_elem(&xsks, &key);
	struct bpf_sock_tuple tuple = {};
	struct bpf_sock *sk;
	long ret = 0;

	if (xsk)
		ret = xsk->queue_id;
	sk = bpf_sk_lookup_udp(ctx, &tuple, sizeof(tuple.ipv4), BPF_F_CURRENT_NETNS, 0);
	if (sk) {
		ret += *(volatile __s8 *)&sk->protocol;
		ret += *(volatile __s16 *)&sk->state;
		ret += *(volatile __s32 *)&sk->rx_queue_mapping;
		ret += *(volatile __u8 *)&sk->rx_queue_mapping;
		ret += *(volatile __s8 *)((__u8 *)&sk->src_ip4 + 1);
		ret += *(volatile __u16 *)&sk->type;
		bpf_sk_release(sk);
	}
	return ret;
}

char _license[] SEC("license") = "GPL";
