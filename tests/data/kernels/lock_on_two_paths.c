// Two paths reach the same bpf_spin_lock region, each with a map value found by its own
// lookup (so a lock id of its own). From 6.7 the kernel maps lock ids through the id map
// when it compares states, and the second path is pruned inside the region; 5.10 and 6.1
// want the same id and walk the region again.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c lock_on_two_paths.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct counter {
	struct bpf_spin_lock lock;
	__u32 pad;
	__u64 packets;
	__u64 bytes;
	__u64 limit;
	__u64 over;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, struct counter);
} counters SEC(".maps");

SEC("xdp")
int count_under_lock(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	__u8 *p = (void *)(long)ctx->data;
	struct counter *c;
	__u64 len;
	__u32 key;

	if ((void *)(p + 8) > data_end)
		return XDP_PASS;
	if (p[0] == 1 && (void *)(p + 16) <= data_end)
		key = p[9];
	else
		key = p[1];
	len = data_end - (void *)p;
	c = bpf_map_lookup_elem(&counters, &key);
	if (!c)
		return XDP_PASS;
	bpf_spin_lock(&c->lock);
	c->packets++;
	if (c->bytes > c->limit)
		c->bytes = c->limit;
	c->bytes += len;
	if (c->bytes > c->limit)
		c->over++;
	if (c->packets > c->limit)
		c->packets = 0;
	bpf_spin_unlock(&c->lock);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
