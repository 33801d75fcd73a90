// Programs whose function symbols are gone, as in stripped objects and those the old
// samples/bpf and iproute2 toolchains left: each executable section is one program, named by
// its section (iproute2's convention). The committed `named_by_section.o` is built and then
// stripped of the two entry symbols; `named_by_section.full.o` is the same object before
// stripping, which libbpf names by function (the tests check both load to the same code).
// Rebuild (in this directory):
//   clang-19 -O2 -g -target bpf -mcpu=v3 -I/usr/include/x86_64-linux-gnu \
//     -fdebug-prefix-map=$PWD=. -c named_by_section.c -o named_by_section.full.o
//   llvm-objcopy-19 --strip-symbol=count_protocols --strip-symbol=drop_short \
//     named_by_section.full.o named_by_section.o
// What is left: sections `xdp` and `prog` without function symbols, a call from `xdp` into
// the global subprogram `proto_slot` in .text, a BTF-defined map, func_info and line_info.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} protocols SEC(".maps");

__attribute__((noinline)) int proto_slot(__u16 proto)
{
	if (proto == __builtin_bswap16(ETH_P_IP))
		return 1;
	if (proto == __builtin_bswap16(ETH_P_IPV6))
		return 2;
	if (proto == __builtin_bswap16(ETH_P_ARP))
		return 3;
	return 0;
}

SEC("xdp")
int count_protocols(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u32 slot;
	__u64 *count;

	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	slot = proto_slot(eth->h_proto);
	count = bpf_map_lookup_elem(&protocols, &slot);
	if (count)
		__sync_fetch_and_add(count, 1);
	return XDP_PASS;
}

SEC("prog")
int drop_short(struct xdp_md *ctx)
{
	return ctx->data_end - ctx->data < 64 ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
