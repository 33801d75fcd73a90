// Programs that are `static` functions, as Cilium's `bpf_xdp.o` has them: cilium/ebpf loads
// every function of a program section as a program, whatever its binding; libbpf 1.7 refuses
// the object ("program is static and not supported").
// Rebuild (in this directory):
//   clang-19 -O2 -g -target bpf -mcpu=v3 -I/usr/include/x86_64-linux-gnu \
//     -fdebug-prefix-map=$PWD=. -c static_programs.c -o static_programs.o
// What it holds: two static programs in `xdp`, one calling a static function of the same
// section (a call clang leaves without a relocation), one calling a static subprogram in
// .text (a call relocated against the section symbol), and a BTF-defined map.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} seen SEC(".maps");

static __attribute__((noinline)) int is_ipv4(struct ethhdr *eth)
{
	return eth->h_proto == __builtin_bswap16(ETH_P_IP);
}

static __attribute__((section("xdp"), used, noinline)) int long_enough(struct xdp_md *ctx)
{
	return ctx->data_end - ctx->data >= 60 ? XDP_PASS : XDP_DROP;
}

static __attribute__((section("xdp"), used)) int count_ipv4(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u32 key;
	__u64 *count;

	if ((void *)(eth + 1) > data_end)
		return XDP_ABORTED;
	key = is_ipv4(eth);
	count = bpf_map_lookup_elem(&seen, &key);
	if (count)
		__sync_fetch_and_add(count, 1);
	return XDP_PASS;
}

static __attribute__((section("xdp"), used)) int drop_runts(struct xdp_md *ctx)
{
	return long_enough(ctx);
}

char LICENSE[] SEC("license") = "GPL";
