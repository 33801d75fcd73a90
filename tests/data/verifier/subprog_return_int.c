// A subprogram holding a classic packet load (LD_ABS/LD_IND) or a tail call must say, in its
// BTF, that it returns a scalar: 6.18 checks the func_info records before the walk
// (check_btf_func) and refuses a void one with "LD_ABS is only allowed in functions that
// return 'int'." or "tail_call is only allowed in functions that return 'int'.". XDP may not
// run LD_ABS at all, so the int-returning LD_ABS subprogram is refused later, at the load.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c subprog_return_int.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u32);
} jumps SEC(".maps");

static __attribute__((noinline)) void void_tail_call(struct xdp_md *ctx)
{
	bpf_tail_call(ctx, &jumps, 0);
}

static __attribute__((noinline)) int int_tail_call(struct xdp_md *ctx)
{
	bpf_tail_call(ctx, &jumps, 0);
	return XDP_PASS;
}

static __attribute__((noinline)) void void_ld_abs(struct xdp_md *ctx)
{
	// r6 = ctx; r0 = *(u32 *)skb[0] (BPF_LD | BPF_ABS | BPF_W)
	asm volatile("r6 = r1; .8byte 0x0000000000000020" ::: "r0", "r6");
}

static __attribute__((noinline)) int int_ld_abs(struct xdp_md *ctx)
{
	asm volatile("r6 = r1; .8byte 0x0000000000000020" ::: "r0", "r6");
	return XDP_PASS;
}

SEC("xdp")
int tail_call_in_void(struct xdp_md *ctx)
{
	void_tail_call(ctx);
	return XDP_PASS;
}

SEC("xdp")
int tail_call_in_int(struct xdp_md *ctx)
{
	return int_tail_call(ctx);
}

SEC("xdp")
int ld_abs_in_void(struct xdp_md *ctx)
{
	void_ld_abs(ctx);
	return XDP_PASS;
}

SEC("xdp")
int ld_abs_in_int(struct xdp_md *ctx)
{
	return int_ld_abs(ctx);
}

char LICENSE[] SEC("license") = "GPL";
