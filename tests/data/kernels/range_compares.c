// Conditional jumps as 6.8 changed them (behaviour.rs: compares_register_ranges,
// refuses_zero_size_by_its_range, infers_non_null_from_pointer_equality): each program is
// judged differently by 5.10/6.1 and by 6.12 on. The size register of bpf_trace_printk
// (ARG_CONST_SIZE: zero refused) stands for any helper's, as 5.10 has few others for XDP.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c range_compares.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, char[64]);
} text SEC(".maps");

/* A size in [0, 63] from the packet's length, opaque to clang. */
static __always_inline __u64 small_size(struct xdp_md *ctx)
{
	__u64 n = (ctx->data_end - ctx->data) & 63;

	asm volatile("" : "+r"(n));
	return n;
}

/* A size that may be zero: every kernel refuses it, 6.12 on for its range, 5.10 and 6.1 with
 * the words of the memory it sizes. */
SEC("xdp")
int zero_size_from_range(struct xdp_md *ctx)
{
	__u32 key = 0;
	char *fmt = bpf_map_lookup_elem(&text, &key);
	__u64 n = small_size(ctx);

	if (!fmt)
		return XDP_PASS;
	bpf_trace_printk(fmt, n);
	return XDP_PASS;
}

/* `n != 0` cuts 0 off [0, 63] from 6.8 on; 5.10 and 6.1 learn nothing from `!=`. */
SEC("xdp")
int not_equal_cuts_range_end(struct xdp_md *ctx)
{
	__u32 key = 0;
	char *fmt = bpf_map_lookup_elem(&text, &key);
	__u64 n = small_size(ctx);

	if (!fmt)
		return XDP_PASS;
	if (n != 0) {
		asm volatile("" : "+r"(n));
		bpf_trace_printk(fmt, n);
	}
	return XDP_PASS;
}

/* `n < limit`, both unknown, bounds n by limit's maximum from 6.8 on; before, only a
 * comparison with a constant taught anything. */
SEC("xdp")
int range_against_range(struct xdp_md *ctx)
{
	__u32 key = 0;
	char *fmt = bpf_map_lookup_elem(&text, &key);
	__u64 n = ctx->rx_queue_index | 1;
	__u64 limit = small_size(ctx) + 1;

	if (!fmt)
		return XDP_PASS;
	asm volatile("" : "+r"(n));
	if (n < limit) {
		asm volatile("" : "+r"(n));
		bpf_trace_printk(fmt, n);
	}
	return XDP_PASS;
}

/* `b == a`, a checked non-NULL, makes b non-NULL on the equal edge from 6.2 on; 5.10 and 6.1
 * only learn it from a comparison with zero. */
SEC("xdp")
int pointer_equal_to_checked(struct xdp_md *ctx)
{
	__u32 k0 = 0, k1 = ctx->rx_queue_index;
	char *a = bpf_map_lookup_elem(&text, &k0);
	char *b = bpf_map_lookup_elem(&text, &k1);

	if (!a)
		return XDP_PASS;
	asm volatile("" : "+r"(b));
	if (a == b) {
		asm volatile("" : "+r"(b));
		b[0] = 1;
	}
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
