// Global functions (non-static, so BTF linkage global): the kernel verifies each once, after
// the program that calls it, for any arguments its prototype allows, and checks each call
// only against that prototype. Programs the kernel accepts and rejects for it.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define __noinline __attribute__((noinline))
#define __arg_nonnull __attribute__((btf_decl_tag("arg:nonnull")))

struct pair {
	__u64 a;
	__u64 b;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pair);
} pairs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, struct pair);
} hashed_pairs SEC(".maps");

/* Checks its own bounds: the caller's do not reach it. */
__noinline int first_byte_of_packet(struct xdp_md *ctx)
{
	unsigned char *data = (unsigned char *)(long)ctx->data;
	unsigned char *end = (unsigned char *)(long)ctx->data_end;

	if (data + 1 > end)
		return 0;
	return data[0];
}

/* Memory of the pointee's size, maybe NULL. */
__noinline int sum_pair(struct pair *p)
{
	if (!p)
		return 0;
	return (int)(p->a + p->b);
}

__noinline int masked(int x)
{
	return x & 0xff;
}

/* Calls another global function: both are verified. */
__noinline int sum_then_mask(struct pair *p)
{
	return masked(sum_pair(p));
}

SEC("xdp")
int calls_globals_ok(struct xdp_md *ctx)
{
	struct pair local = { 1, 2 };
	__u32 key = 0;
	struct pair *v = bpf_map_lookup_elem(&pairs, &key);
	int n = first_byte_of_packet(ctx) + sum_then_mask(&local) + sum_pair(v) + sum_pair(0);

	return n & 1 ? XDP_PASS : XDP_DROP;
}

__noinline int deref_unchecked(unsigned char *p)
{
	return p[0];
}

SEC("xdp")
int global_derefs_maybe_null_bad(struct xdp_md *ctx)
{
	unsigned char buf[4] = { 1, 2, 3, 4 };

	return deref_unchecked(buf) & 1 ? XDP_PASS : XDP_DROP;
}

__noinline int index_table(int i)
{
	int table[4] = { 1, 2, 3, 4 };

	return table[i & 7];
}

SEC("xdp")
int global_indexes_its_table(struct xdp_md *ctx)
{
	return index_table(2) & 1 ? XDP_PASS : XDP_DROP;
}

SEC("xdp")
int caller_passes_short_memory_bad(struct xdp_md *ctx)
{
	__u64 half = 7;

	return sum_pair((struct pair *)&half) & 1 ? XDP_PASS : XDP_DROP;
}

__noinline int nonnull_first(struct pair *p __arg_nonnull)
{
	return (int)p->a;
}

SEC("xdp")
int nonnull_arg_given_maybe_null_bad(struct xdp_md *ctx)
{
	__u32 key = 0;
	struct pair *v = bpf_map_lookup_elem(&hashed_pairs, &key);

	return nonnull_first(v) & 1 ? XDP_PASS : XDP_DROP;
}

SEC("xdp")
int nonnull_arg_given_checked_ok(struct xdp_md *ctx)
{
	__u32 key = 0;
	struct pair *v = bpf_map_lookup_elem(&hashed_pairs, &key);

	if (!v)
		return XDP_DROP;
	return nonnull_first(v) & 1 ? XDP_PASS : XDP_DROP;
}

__noinline struct pair *not_a_scalar(struct pair *p)
{
	volatile int zero = 0;

	return (struct pair *)((char *)p + zero);
}

SEC("xdp")
int global_returning_pointer_bad(struct xdp_md *ctx)
{
	struct pair local = { 1, 2 };
	struct pair *q = not_a_scalar(&local);

	return q->a & 1 ? XDP_PASS : XDP_DROP;
}

/* Never called: the kernel never verifies it. */
__noinline int never_called(unsigned char *p)
{
	return p[0];
}

char LICENSE[] SEC("license") = "GPL";
