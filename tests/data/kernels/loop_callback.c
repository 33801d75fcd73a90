// bpf_loop with a callback that branches. From 6.7 the kernel walks the callback as a loop
// body, back to the call after each exit until the states converge; 6.1 enters it once at
// the call and goes on after the call from its exit. (5.10 has no bpf_loop.)
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c loop_callback.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct tally {
	__u64 sum;
	__u64 odd;
};

static long add_index(__u64 i, void *ctx)
{
	struct tally *t = ctx;

	t->sum += i;
	if (i & 1)
		t->odd++;
	if (t->sum > 1000)
		return 1;
	return 0;
}

SEC("xdp")
int sum_indexes(struct xdp_md *ctx)
{
	struct tally t = {};

	bpf_loop(8, add_index, &t, 0);
	if (t.odd > 2)
		return XDP_DROP;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
