// SPDX-License-Identifier: GPL-2.0
/* bpf_for over bounds read from the packet: bytes 14-15 are the start and bytes 16-17 the end
 * (big-endian, signed 16-bit, so empty, reversed and wide ranges all come from packets).
 * Each step adds to a sum and a count kept in a map and XORs the step into one of the
 * packet's first 8 bytes; the return value is the count's low bits, as an XDP action.
 * A second loop, nested, runs over a byte-sized range for each outer step; a third, in a
 * subprogram, counts the even numbers of a range from the start (byte 19 its width). */
#include <linux/bpf.h>
#include "iter_num.h"

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} totals SEC(".maps");

static __always_inline void add(__u32 key, __u64 v)
{
	__u64 *slot = bpf_map_lookup_elem(&totals, &key);

	if (slot)
		*slot += v;
}

/* An iterator in a subprogram's frame: the even numbers of [lo, hi). */
static __attribute__((noinline)) int evens(int lo, int hi)
{
	int i, n = 0;

	bpf_for(i, lo, hi) {
		if (!(i & 1))
			n++;
	}
	return n;
}

SEC("xdp")
int iter_sum(struct xdp_md *ctx)
{
	__u8 *data = (void *)(long)ctx->data;
	__u8 *data_end = (void *)(long)ctx->data_end;
	__s64 sum = 0;
	__u32 count = 0, inner = 0;
	int start, end, i, j;

	if (data + 20 > data_end)
		return XDP_PASS;
	start = (__s16)((data[14] << 8) | data[15]);
	end = (__s16)((data[16] << 8) | data[17]);
	bpf_for(i, start, end) {
		sum += (__s64)i * 7 - 3;
		__u8 *byte = data + (i & 7);

		if (byte + 1 > data_end)
			break;
		*byte ^= (__u8)i;
		count++;
		if ((i & 0x3ff) == 0) {
			bpf_for(j, 0, data[18] & 0xf)
				inner += j + 1;
		}
	}
	add(0, sum);
	add(1, count);
	add(2, inner);
	add(3, evens(start, start + (data[19] & 0x3f)));
	return count & 3;
}
