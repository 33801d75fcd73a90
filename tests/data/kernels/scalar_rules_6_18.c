// Three rules of scalar tracking that 6.18 has and 6.12 and the kernels before it lack. Each
// program is refused by 5.10, 6.1 and 6.12 and accepted from 6.18, because only the newer
// kernel knows that the offset it adds to a map value is zero:
// - a helper that only reads the stack (the key of a lookup) leaves its bytes as they were;
//   before, every helper access turned them into unknown data (`clobber`);
// - a byte swap of a known value is known (`BPF_END` bounds); before, the result was unknown;
// - a range that holds a single member of its tnum is that constant (`r &= 8`, nonzero,
//   is 8, so `(r >> 3) - 1` is 0); before, it stayed [1, 8] (and the offset [-1, 0]).
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c scalar_rules_6_18.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, __u64);
	__type(value, __u64);
} values SEC(".maps");

SEC("xdp")
__attribute__((naked)) int key_kept_by_lookup(void)
{
	asm volatile(
		"r1 = 0;"
		"*(u64 *)(r10 - 8) = r1;"
		"r2 = r10;"
		"r2 += -8;"
		"r1 = %[values] ll;"
		"call %[lookup];"
		"if r0 == 0 goto 1f;"
		"r1 = *(u64 *)(r10 - 8);"
		"r0 += r1;"
		"r0 = *(u64 *)(r0 + 0);"
		"1:"
		"r0 = 2;"
		"exit;"
		:
		: [values] "i"(&values), [lookup] "i"(BPF_FUNC_map_lookup_elem)
		: "memory");
}

SEC("xdp")
__attribute__((naked)) int byte_swap_of_zero(void)
{
	asm volatile(
		"r6 = 0;"
		"r6 = be32 r6;"
		"*(u64 *)(r10 - 8) = r6;"
		"r2 = r10;"
		"r2 += -8;"
		"r1 = %[values] ll;"
		"call %[lookup];"
		"if r0 == 0 goto 1f;"
		"r0 += r6;"
		"r0 = *(u64 *)(r0 + 0);"
		"1:"
		"r0 = 2;"
		"exit;"
		:
		: [values] "i"(&values), [lookup] "i"(BPF_FUNC_map_lookup_elem)
		: "memory");
}

SEC("xdp")
__attribute__((naked)) int single_member_range(void)
{
	asm volatile(
		"r6 = *(u32 *)(r1 + 12);"
		"r6 &= 8;"
		"r1 = 0;"
		"*(u64 *)(r10 - 8) = r1;"
		"r2 = r10;"
		"r2 += -8;"
		"r1 = %[values] ll;"
		"call %[lookup];"
		"if r0 == 0 goto 1f;"
		"if w6 == 0 goto 1f;"
		"r6 >>= 3;"
		"r6 -= 1;"
		"r0 += r6;"
		"r0 = *(u64 *)(r0 + 0);"
		"1:"
		"r0 = 2;"
		"exit;"
		:
		: [values] "i"(&values), [lookup] "i"(BPF_FUNC_map_lookup_elem)
		: "memory");
}

char _license[] SEC("license") = "GPL";
