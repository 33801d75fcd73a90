// Two bytes of the packet ORed together (a byte shifted left by 2, OR two low bits) are at
// most 1023 from 6.10 on, so the branch for larger values is dead; 5.10 and 6.1 make the
// OR of a register that is not a constant an unknown scalar and walk that branch too.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c or_of_unknowns.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} large SEC(".maps");

SEC("xdp")
int classify(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	__u8 *p = (void *)(long)ctx->data;
	__u64 code, *n;
	__u32 key = 1;
	volatile __u64 limit = 2000;	/* hidden from clang, a constant to the verifier */

	if ((void *)(p + 2) > data_end)
		return XDP_PASS;
	code = ((__u64)p[0] << 2) | (p[1] & 3);
	if (code > limit) {
		n = bpf_map_lookup_elem(&large, &key);
		if (n)
			*n += code;
		return XDP_DROP;
	}
	return code > 500 ? XDP_TX : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
