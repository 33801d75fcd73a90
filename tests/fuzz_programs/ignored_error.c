// Helper errors for `bpfemu fuzz` to find: both programs remember up to four IPv4 sources in
// a hash map. `learn_unchecked` drops bpf_map_update_elem's result, so once the map is full
// (-E2BIG) it goes on as if the source were remembered; `learn_checked` drops such packets.
// Build (from this folder): clang-19 -O2 -g -target bpf -mcpu=v3 -fdebug-prefix-map=$PWD=. \
//   -I/usr/include/x86_64-linux-gnu -c ignored_error.c -o build/ignored_error.o
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} sources SEC(".maps");

static __always_inline int source_of(struct xdp_md *ctx, __u32 *saddr)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);

	if ((void *)(ip + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return -1;
	*saddr = ip->saddr;
	return 0;
}

SEC("xdp")
int learn_unchecked(struct xdp_md *ctx)
{
	__u32 saddr;
	__u64 one = 1, *count;

	if (source_of(ctx, &saddr))
		return XDP_PASS;
	count = bpf_map_lookup_elem(&sources, &saddr);
	if (count) {
		__sync_fetch_and_add(count, 1);
		return XDP_PASS;
	}
	bpf_map_update_elem(&sources, &saddr, &one, BPF_NOEXIST);
	return XDP_PASS;
}

SEC("xdp")
int learn_checked(struct xdp_md *ctx)
{
	__u32 saddr;
	__u64 one = 1, *count;

	if (source_of(ctx, &saddr))
		return XDP_PASS;
	count = bpf_map_lookup_elem(&sources, &saddr);
	if (count) {
		__sync_fetch_and_add(count, 1);
		return XDP_PASS;
	}
	if (bpf_map_update_elem(&sources, &saddr, &one, BPF_NOEXIST))
		return XDP_DROP;
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
