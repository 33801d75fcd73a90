// Open-coded iterators: the numeric iterator kfuncs (bpf_iter_num_new/next/destroy, what
// libbpf's bpf_for and bpf_repeat expand to) in XDP programs the kernel accepts and rejects.
// Built by tests/objects/build.sh tests/data/verify (clang-19, -mcpu=v3, debug paths relative).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

// The kernel's opaque iterator state (uapi linux/bpf.h since 6.4; older headers lack it).
struct bpf_iter_num {
	__u64 __opaque[1];
} __attribute__((aligned(8)));

extern int bpf_iter_num_new(struct bpf_iter_num *it, int start, int end) __ksym;
extern int *bpf_iter_num_next(struct bpf_iter_num *it) __ksym;
extern void bpf_iter_num_destroy(struct bpf_iter_num *it) __ksym;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

// Sums the first 32 bytes of the packet, each read checked against the packet's end, and
// keeps the sum in counters[0].
SEC("xdp")
int xdp_iter_sum(struct xdp_md *ctx)
{
	unsigned char *data = (void *)(long)ctx->data;
	unsigned char *end = (void *)(long)ctx->data_end;
	struct bpf_iter_num it;
	__u64 sum = 0;
	__u32 key = 0;
	int *i;

	bpf_iter_num_new(&it, 0, 32);
	while ((i = bpf_iter_num_next(&it))) {
		unsigned int at = *i;

		if (at >= 32 || data + at + 1 > end)
			break;
		sum += data[at];
	}
	bpf_iter_num_destroy(&it);
	__u64 *slot = bpf_map_lookup_elem(&counters, &key);
	if (slot)
		*slot = sum;
	return sum & 1 ? XDP_DROP : XDP_PASS;
}

// Counts packet bytes by value class into the map, indexing with a bounded element.
SEC("xdp")
int xdp_iter_histogram(struct xdp_md *ctx)
{
	unsigned char *data = (void *)(long)ctx->data;
	unsigned char *end = (void *)(long)ctx->data_end;
	struct bpf_iter_num it;
	int *i;

	bpf_iter_num_new(&it, 0, 64);
	while ((i = bpf_iter_num_next(&it))) {
		unsigned int at = *i & 63;

		if (data + at + 1 > end)
			break;
		__u32 key = data[at] >> 4;
		__u64 *slot = bpf_map_lookup_elem(&counters, &key);
		if (slot)
			*slot += 1;
	}
	bpf_iter_num_destroy(&it);
	return XDP_PASS;
}

// Nested iterators: a 4 x 8 walk over a stack array.
SEC("xdp")
int xdp_iter_nested(struct xdp_md *ctx)
{
	struct bpf_iter_num outer, inner;
	unsigned char grid[32] = {};
	int *i, *j;

	bpf_iter_num_new(&outer, 0, 4);
	while ((i = bpf_iter_num_next(&outer))) {
		bpf_iter_num_new(&inner, 0, 8);
		while ((j = bpf_iter_num_next(&inner))) {
			unsigned int at = (*i * 8 + *j) & 31;

			grid[at] += 1;
		}
		bpf_iter_num_destroy(&inner);
	}
	bpf_iter_num_destroy(&outer);
	return grid[ctx->rx_queue_index & 31] == 1 ? XDP_PASS : XDP_DROP;
}

// Rejected: the element indexes the packet without a check against its end.
SEC("xdp")
int xdp_iter_unchecked_packet(struct xdp_md *ctx)
{
	unsigned char *data = (void *)(long)ctx->data;
	struct bpf_iter_num it;
	__u64 sum = 0;
	int *i;

	bpf_iter_num_new(&it, 0, 16);
	while ((i = bpf_iter_num_next(&it)))
		sum += data[*i & 15];
	bpf_iter_num_destroy(&it);
	return sum ? XDP_PASS : XDP_DROP;
}

// Rejected: the iterator is never destroyed (its reference leaks).
SEC("xdp")
int xdp_iter_leaked(struct xdp_md *ctx)
{
	struct bpf_iter_num it;
	int n = 0;

	bpf_iter_num_new(&it, 0, 8);
	while (bpf_iter_num_next(&it))
		n++;
	return n == 8 ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
