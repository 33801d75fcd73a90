// An XDP object in iproute2's format, as `ip link set dev DEV xdp obj iproute2_style.o` loads
// it: its own `struct bpf_elf_map` in the `maps` section (id, pinning, inner_id, inner_idx past
// the libbpf fields), the entry program in iproute2's default section `prog`, tail-call
// targets in sections `ID/KEY` that go into the prog array whose id is ID at index KEY, and an
// array-of-maps whose inner template and slot come from inner_id / inner_idx. No libbpf header.
#include <linux/bpf.h>
#include <linux/if_ether.h>

#define __section(NAME) __attribute__((section(NAME), used))

#define PIN_NONE 0
#define PIN_OBJECT_NS 1
#define PIN_GLOBAL_NS 2

struct bpf_elf_map {
	__u32 type;
	__u32 size_key;
	__u32 size_value;
	__u32 max_elem;
	__u32 flags;
	__u32 id;
	__u32 pinning;
	__u32 inner_id;
	__u32 inner_idx;
};

static void *(*map_lookup_elem)(void *map, const void *key) = (void *)BPF_FUNC_map_lookup_elem;
static long (*tail_call)(void *ctx, void *map, __u32 index) = (void *)BPF_FUNC_tail_call;

#define JMP_MAP_ID 1
#define INNER_MAP_ID 2

struct bpf_elf_map __section("maps") counters = {
	.type = BPF_MAP_TYPE_ARRAY,
	.size_key = sizeof(__u32),
	.size_value = sizeof(__u64),
	.max_elem = 4,
	.pinning = PIN_GLOBAL_NS,
};

struct bpf_elf_map __section("maps") jmp_table = {
	.type = BPF_MAP_TYPE_PROG_ARRAY,
	.size_key = sizeof(__u32),
	.size_value = sizeof(__u32),
	.max_elem = 4,
	.id = JMP_MAP_ID,
	.pinning = PIN_OBJECT_NS,
};

// The inner template, put into every map-in-map whose inner_id is its id, at inner_idx.
struct bpf_elf_map __section("maps") per_slot = {
	.type = BPF_MAP_TYPE_ARRAY,
	.size_key = sizeof(__u32),
	.size_value = sizeof(__u64),
	.max_elem = 2,
	.id = INNER_MAP_ID,
	.inner_idx = 3,
};

struct bpf_elf_map __section("maps") outer = {
	.type = BPF_MAP_TYPE_ARRAY_OF_MAPS,
	.size_key = sizeof(__u32),
	.size_value = sizeof(__u32),
	.max_elem = 8,
	.inner_id = INNER_MAP_ID,
};

static __always_inline void count(__u32 slot)
{
	__u64 *n = map_lookup_elem(&counters, &slot);
	if (n)
		__sync_fetch_and_add(n, 1);
}

// Entry: counts every packet through the inner map at outer[3], then jumps by the low bit of
// the EtherType: even to 1/0 (passes), odd to 1/1 (rewrites and sends back). Packets shorter
// than an Ethernet header, and tail calls that find no program, are dropped.
__section("prog") int entry(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u32 slot = 3, zero = 0;

	void *inner = map_lookup_elem(&outer, &slot);
	if (inner) {
		__u64 *n = map_lookup_elem(inner, &zero);
		if (n)
			__sync_fetch_and_add(n, 1);
	}
	count(0);
	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	tail_call(ctx, &jmp_table, eth->h_proto & 1);
	count(3);
	return XDP_DROP;
}

__section("1/0") int even_proto(struct xdp_md *ctx)
{
	count(1);
	return XDP_PASS;
}

__section("1/1") int odd_proto(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	unsigned char tmp[ETH_ALEN];

	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	count(2);
	__builtin_memcpy(tmp, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, tmp, ETH_ALEN);
	return XDP_TX;
}

char __license[] __section("license") = "GPL";
