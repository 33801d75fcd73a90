// SPDX-License-Identifier: GPL-2.0
/* The three numeric-iterator kfuncs called directly with edge arguments; every return value
 * of bpf_iter_num_new, and every value bpf_iter_num_next hands out (NONE for NULL), goes into
 * the array `out` in call order, so that a run's map holds the whole sequence. Packet byte 14
 * picks an extra start, byte 15 an extra width, for a case that depends on the packet. */
#include <linux/bpf.h>
#include "iter_num.h"

char LICENSE[] SEC("license") = "GPL";

#define SLOTS 96
#define NONE 0x4e4f4e45ULL /* "NONE" */
#define INT_MIN (-2147483647 - 1)
#define INT_MAX 2147483647
#define BPF_MAX_LOOPS (8 * 1024 * 1024)

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} out SEC(".maps");

static __always_inline void put(__u32 slot, __u64 v)
{
	__u64 *p = bpf_map_lookup_elem(&out, &slot);

	if (p)
		*p = v;
}

/* The next value, NONE when the iterator is done. */
static __always_inline __u64 next(struct bpf_iter_num *it)
{
	int *p = bpf_iter_num_next(it);

	return p ? (__u64)(__s64)*p : NONE;
}

/* new(start, end), then `steps` next calls, then destroy: 1 + steps slots from `slot`. */
#define CASE(slot, start, end, steps)                                           \
	do {                                                                    \
		struct bpf_iter_num it;                                         \
		put((slot), (__u64)(__s64)bpf_iter_num_new(&it, (start), (end))); \
		for (int k = 0; k < (steps); k++)                               \
			put((slot) + 1 + k, next(&it));                         \
		bpf_iter_num_destroy(&it);                                      \
	} while (0)

SEC("xdp")
int iter_edges(struct xdp_md *ctx)
{
	__u8 *data = (void *)(long)ctx->data;
	__u8 *data_end = (void *)(long)ctx->data_end;
	struct bpf_iter_num it;
	int base = 0, width = 0;

	if (data + 16 <= data_end) {
		base = (__s8)data[14];
		width = data[15] & 7;
	}

	CASE(0, 5, 3, 2);                            /* start > end: -EINVAL */
	CASE(3, 0, BPF_MAX_LOOPS, 3);                /* exactly 8M: fine */
	CASE(7, 0, BPF_MAX_LOOPS + 1, 2);            /* 8M + 1: -E2BIG */
	CASE(10, -4, BPF_MAX_LOOPS - 4, 2);          /* 8M, negative start */
	CASE(13, INT_MIN, INT_MAX, 2);               /* widest: -E2BIG, no overflow */
	CASE(16, INT_MAX, INT_MAX, 2);               /* empty at INT_MAX */
	CASE(19, INT_MAX - 2, INT_MAX, 4);           /* up to INT_MAX - 1 */
	CASE(24, INT_MIN, INT_MIN + 3, 5);           /* cur starts at INT_MIN - 1: wraps */
	CASE(30, 7, 7, 2);                           /* empty range */
	CASE(33, -3, 1, 6);                          /* negative values, then drained twice */
	CASE(40, INT_MAX, INT_MIN, 1);               /* reversed extremes: -EINVAL */
	CASE(42, base, base + width, 9);             /* from the packet */

	/* destroy, then new again on the same iterator */
	put(52, (__u64)(__s64)bpf_iter_num_new(&it, 100, 102));
	put(53, next(&it));
	bpf_iter_num_destroy(&it);
	put(54, (__u64)(__s64)bpf_iter_num_new(&it, -2, 0));
	put(55, next(&it));
	put(56, next(&it));
	put(57, next(&it));
	put(58, next(&it));
	bpf_iter_num_destroy(&it);

	/* a failed new, then next */
	put(59, (__u64)(__s64)bpf_iter_num_new(&it, 1, 0));
	put(60, next(&it));
	bpf_iter_num_destroy(&it);
	return XDP_PASS;
}
