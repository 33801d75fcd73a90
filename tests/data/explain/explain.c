// Programs the kernel's verifier rejects, one per class of error that `bpfemu verify` explains:
// each rejection's note and `--explain` must name the instruction where the fact that failed
// was established or lost (tests/explain_cli.rs holds them to it).
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c explain.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct slots {
	unsigned char bytes[64];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, struct slots);
} table SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, struct slots);
} flows SEC(".maps");

// Packet bounds: 14 bytes are checked, byte 23 is read.
SEC("xdp")
int packet_bounds(struct xdp_md *ctx)
{
	unsigned char *data = (void *)(long)ctx->data;
	unsigned char *end = (void *)(long)ctx->data_end;
	if (data + 14 > end)
		return XDP_PASS;
	return data[23] == 1 ? XDP_DROP : XDP_PASS;
}

// Null check: the lookup's result is used before it is checked.
SEC("xdp")
int null_check(struct xdp_md *ctx)
{
	__u32 key = ctx->rx_queue_index;
	struct slots *s = bpf_map_lookup_elem(&flows, &key);
	return s->bytes[0] ? XDP_DROP : XDP_PASS;
}

// Unbounded scalar: an index read from the map indexes the value unchecked.
SEC("xdp")
int unbounded_index(struct xdp_md *ctx)
{
	__u32 key = 0;
	struct slots *s = bpf_map_lookup_elem(&table, &key);
	if (!s)
		return XDP_PASS;
	__u64 index = *(__u64 *)s;
	return s->bytes[index] ? XDP_DROP : XDP_PASS;
}

// Arithmetic that loses a bound: a checked index minus the queue number may be negative.
SEC("xdp")
int negative_index(struct xdp_md *ctx)
{
	__u32 key = 0;
	struct slots *s = bpf_map_lookup_elem(&table, &key);
	if (!s)
		return XDP_PASS;
	__u64 index = s->bytes[1] & 63;
	long at = (long)index - (long)ctx->rx_queue_index;
	return s->bytes[at] ? XDP_DROP : XDP_PASS;
}

// Uninitialised stack: a dynptr on the stack is read, but nothing made it one (privileged
// programs may read stack bytes never written; a dynptr must have been initialised).
SEC("xdp")
int uninit_stack(struct xdp_md *ctx)
{
	struct bpf_dynptr ptr;
	__u32 word = 0;
	if (bpf_dynptr_read(&word, sizeof(word), &ptr, 0, 0))
		return XDP_PASS;
	return word ? XDP_DROP : XDP_PASS;
}

// Too large: a bounded loop the verifier walks once per iteration, past its budget.
SEC("xdp")
int too_large(struct xdp_md *ctx)
{
	__u32 sum = 0;
#pragma clang loop unroll(disable)
	for (__u32 i = 0; i < 1000000; i++)
		sum += (ctx->rx_queue_index ^ i) & 7;
	return sum & 1 ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
