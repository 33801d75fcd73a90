// Global functions that take a `struct bpf_dynptr *`: the caller must pass an initialised
// dynptr (on its stack), and the function receives it read-only (CONST_PTR_TO_DYNPTR, a
// local dynptr whatever the caller's kind): it may read through it with bpf_dynptr_data and
// bpf_dynptr_slice, but not touch the dynptr's own bytes.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c global_dynptr.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

extern int bpf_dynptr_from_xdp(struct xdp_md *xdp, __u64 flags, struct bpf_dynptr *ptr__uninit) __ksym;
extern void *bpf_dynptr_slice(const struct bpf_dynptr *p, __u32 offset, void *buffer__opt,
			      __u32 buffer__szk) __ksym;

__attribute__((noinline, weak)) int reads(struct bpf_dynptr *dptr)
{
	long *d, t, buf[1] = {};

	d = bpf_dynptr_data(dptr, 0, sizeof(long));
	if (!d)
		return 0;
	t = *d + 1;
	d = bpf_dynptr_slice(dptr, 0, &buf, sizeof(long));
	if (!d)
		return t;
	return t + *d;
}

__attribute__((noinline, weak)) int overwrites(struct bpf_dynptr *dptr)
{
	*(volatile long *)dptr = 0;
	return 0;
}

SEC("xdp")
int passes_xdp_dynptr(struct xdp_md *ctx)
{
	struct bpf_dynptr dptr;

	bpf_dynptr_from_xdp(ctx, 0, &dptr);
	return reads(&dptr) & 1;
}

SEC("xdp")
int passes_uninitialised_dynptr(struct xdp_md *ctx)
{
	struct bpf_dynptr dptr;

	return reads(&dptr) & 1;
}

SEC("xdp")
int callee_writes_the_dynptr(struct xdp_md *ctx)
{
	struct bpf_dynptr dptr;

	bpf_dynptr_from_xdp(ctx, 0, &dptr);
	return overwrites(&dptr) & 1;
}

char LICENSE[] SEC("license") = "GPL";
