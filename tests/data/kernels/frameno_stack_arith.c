// A subprogram builds a pointer to its own stack as `scalar += r10` and stores through it.
// Before 7.2 the result keeps the scalar's frame number (0): the verifier takes it for the
// caller's fp-8, and the store for a write of the caller's stack. So the callee's own fp-8
// still holds, for the verifier, the map value it spilled there, while at run time it holds
// the 0 just stored: the program writes through 0. Kernels up to 6.18 accept it; 7.2 refuses
// the store through the reloaded scalar.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c frameno_stack_arith.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

__attribute__((naked, noinline, used)) static int overwrite_own_slot(void)
{
	asm volatile(
		"*(u64 *)(r10 - 8) = r1;"
		"r6 = -8;"
		"r6 += r10;"
		"*(u64 *)(r6 + 0) = r2;"
		"r7 = *(u64 *)(r10 - 8);"
		"*(u64 *)(r7 + 0) = r3;"
		"r0 = 0;"
		"exit;" ::: "memory");
}

SEC("xdp")
__attribute__((naked)) int store_through_own_frame(void)
{
	asm volatile(
		"r1 = 0;"
		"*(u32 *)(r10 - 4) = r1;"
		"r2 = r10;"
		"r2 += -4;"
		"r1 = %[counters] ll;"
		"call %[lookup];"
		"if r0 != 0 goto 1f;"
		"r0 = 2;"
		"exit;"
		"1:"
		"r1 = r0;"
		"r2 = 0;"
		"r3 = 7;"
		"call overwrite_own_slot;"
		"r0 = 2;"
		"exit;"
		:
		: [counters] "i"(&counters), [lookup] "i"(BPF_FUNC_map_lookup_elem)
		: "memory");
}

char _license[] SEC("license") = "GPL";
