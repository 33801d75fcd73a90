// A subprogram that may leave through a tail call before it writes its caller's stack slot.
// When the tail call jumps, the write never happens and the caller reads the slot it set
// itself. 6.18's stack liveness takes the write after the call as sure, so the slot is dead
// across the call and the caller's second path (the slot holding an out-of-frame offset) is
// pruned: accepted. 7.2 knows a tail call may leave and refuses that path's read. The control
// writes the slot with no tail call before it: accepted everywhere.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c tail_call_stack_write.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} next_stage SEC(".maps");

__attribute__((naked, noinline, used)) static int store_after_tail_call(void)
{
	asm volatile(
		"r7 = r2;"
		"r2 = %[next_stage] ll;"
		"r3 = 0;"
		"call %[bpf_tail_call];"
		"*(u64 *)(r7 + 0) = -16;"
		"r0 = 0;"
		"exit;"
		:
		: [next_stage] "i"(&next_stage), [bpf_tail_call] "i"(BPF_FUNC_tail_call)
		: "memory");
}

__attribute__((naked, noinline, used)) static int store_only(void)
{
	asm volatile(
		"*(u64 *)(r2 + 0) = -16;"
		"r0 = 0;"
		"exit;" ::: "memory");
}

SEC("xdp")
__attribute__((naked)) int offset_left_by_a_tail_call(void)
{
	asm volatile(
		"r6 = r1;"
		"*(u64 *)(r10 - 16) = -16;"
		"call %[bpf_get_prandom_u32];"
		"r7 = r0;"
		"r8 = r0;"
		"r8 &= 3;"
		"r8 += 1;"
		"r8 *= 2;"
		"r8 -= 1;"
		"r8 |= 1;"
		"r8 ^= 2;"
		"if r7 == 7 goto 2f;"
		"1:"
		"r1 = r6;"
		"r2 = r10;"
		"r2 += -16;"
		"call store_after_tail_call;"
		"r1 = *(u64 *)(r10 - 16);"
		"r2 = r10;"
		"r2 += r1;"
		"r0 = *(u64 *)(r2 + 0);"
		"r0 = 2;"
		"exit;"
		"2:"
		"*(u64 *)(r10 - 16) = -768;"
		"goto 1b;"
		:
		: [bpf_get_prandom_u32] "i"(BPF_FUNC_get_prandom_u32)
		: "memory");
}

SEC("xdp")
__attribute__((naked)) int offset_always_rewritten(void)
{
	asm volatile(
		"r6 = r1;"
		"*(u64 *)(r10 - 16) = -16;"
		"call %[bpf_get_prandom_u32];"
		"r7 = r0;"
		"r8 = r0;"
		"r8 &= 3;"
		"r8 += 1;"
		"r8 *= 2;"
		"r8 -= 1;"
		"r8 |= 1;"
		"r8 ^= 2;"
		"if r7 == 7 goto 2f;"
		"1:"
		"r2 = r10;"
		"r2 += -16;"
		"call store_only;"
		"r1 = *(u64 *)(r10 - 16);"
		"r2 = r10;"
		"r2 += r1;"
		"r0 = *(u64 *)(r2 + 0);"
		"r0 = 2;"
		"exit;"
		"2:"
		"*(u64 *)(r10 - 16) = -768;"
		"goto 1b;"
		:
		: [bpf_get_prandom_u32] "i"(BPF_FUNC_get_prandom_u32)
		: "memory");
}

char _license[] SEC("license") = "GPL";
