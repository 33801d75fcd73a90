// A select on the sign of a 64-bit value, which clang writes as (x s>> 63) & 5: Debian's
// 6.12 and later walk the result as 0 and as 5, so a test for 1 is dead; 5.10 and 6.1 keep
// it a range with unknown bits 0 and 2 and walk the branch.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c sign_mask.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} odd SEC(".maps");

SEC("xdp")
int sign_select(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	__u8 *p = (void *)(long)ctx->data;
	volatile __u64 one = 1;	/* hidden from clang, a constant to the verifier */
	__u32 key = 1;
	__u64 r, *n;
	__s64 v;

	if ((void *)(p + 8) > data_end)
		return XDP_PASS;
	v = *(__s64 *)p;
	r = v < 0 ? 5 : 0;
	if (r == one) {
		n = bpf_map_lookup_elem(&odd, &key);
		if (n)
			*n += 1;
		return XDP_DROP;
	}
	return r ? XDP_TX : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
