// A pointer's fixed offset is part of its one offset in 7.2's words, apart in 6.18's; both
// refuse these. A misaligned stack load: 6.18 "misaligned stack access off 0+-8+2 size 8",
// 7.2 "off -8+2". A map value pointer moved below its start: 6.18 "R0 min value is outside
// of the allowed memory range", 7.2 "R0 min value is negative, either use unsigned index or
// do a if (index >=0) check.".
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c pointer_offset_words.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* The operands and clobbers of a naked program written in BPF assembly. */
#define IMM(name) [name] "i"(name)
#define IMM_ADDR(name) [name] "i"(&name)
#define CLOBBER_ALL "r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "memory"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} single SEC(".maps");

SEC("xdp")
__attribute__((naked)) int misaligned_stack_load(void)
{
	asm volatile ("					\
	r1 = 0;						\
	*(u64 *)(r10 - 16) = r1;			\
	*(u64 *)(r10 - 8) = r1;				\
	r2 = r10;					\
	r2 += -8;					\
	r0 = *(u64 *)(r2 + 2);				\
	r0 = 2;						\
	exit;						\
"	:: : CLOBBER_ALL);
}

SEC("xdp")
__attribute__((naked)) int map_value_below_start(void)
{
	asm volatile ("					\
	r1 = 0;						\
	*(u32 *)(r10 - 4) = r1;				\
	r2 = r10;					\
	r2 += -4;					\
	r1 = %[single] ll;				\
	call %[bpf_map_lookup_elem];			\
	if r0 == 0 goto 1f;				\
	r0 += -1;					\
	r0 = *(u8 *)(r0 + 0);				\
1:	r0 = 2;						\
	exit;						\
"	:
	: IMM(bpf_map_lookup_elem), IMM_ADDR(single)
	: CLOBBER_ALL);
}

char LICENSE[] SEC("license") = "GPL";
