// A constant compared after a call to a static subprogram must be precise, and backtracking
// meets the subprogram's exit on its way. From 6.4 it follows the value through the call and
// marks only that register; before (5.10, 6.1) it gives up there and marks every scalar of the
// checkpoints above the call's precise, so the second path to the join, whose r7 (read at the
// end, never needed precise) differs, is not pruned there and walks on to the return from the
// call: 44 instructions on 5.10 and 6.1, 36 on 6.12 and later.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c precision_past_call.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

__attribute__((naked, noinline, used)) static int nothing(void)
{
	asm volatile(
		"r0 = 0;"
		"exit;" ::: "memory");
}

SEC("xdp")
__attribute__((naked)) int compare_after_call(void)
{
	asm volatile(
		"r6 = *(u32 *)(r1 + 12);"
		"r7 = 0;"
		"r9 = 0;"
		"r9 = 1;"
		"goto +0;"
		"r9 = 2;"
		"goto +0;"
		"r9 = 3;"
		"r9 = 4;"
		"if r6 > 10 goto 1f;"
		"r7 = 1;"
		"1:"
		"r8 = 5;"
		"r9 = 0;"
		"r9 = 1;"
		"goto +0;"
		"r9 = 2;"
		"goto +0;"
		"r9 = 3;"
		"r9 = 4;"
		"r9 = 5;"
		"call nothing;"
		"if r8 > 3 goto 2f;"
		"r0 = 1;"
		"exit;"
		"2:"
		"r1 = r7;"
		"r9 = 0;"
		"r9 = 1;"
		"r9 = 2;"
		"r9 = 3;"
		"r0 = 2;"
		"exit;" ::: "memory");
}

char _license[] SEC("license") = "GPL";
