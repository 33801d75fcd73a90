// A packet byte divided by 3, plus another taken modulo 10, is at most 94 from 7.2 on, so the
// branch for larger values is dead; 6.18 and older make the result of any division or modulo
// an unknown scalar and walk that branch too.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c div_mod_of_packet.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} large SEC(".maps");

SEC("xdp")
int split(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	__u8 *p = (void *)(long)ctx->data;
	__u64 code, *n;
	__u32 key = 1;
	volatile __u64 limit = 2000;	/* hidden from clang, a constant to the verifier */

	if ((void *)(p + 2) > data_end)
		return XDP_PASS;
	code = (__u64)p[0] / 3 + (__u64)p[1] % 10;
	if (code > limit) {
		n = bpf_map_lookup_elem(&large, &key);
		if (n)
			*n += code;
		return XDP_DROP;
	}
	return code > 50 ? XDP_TX : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
