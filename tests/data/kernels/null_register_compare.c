// A map lookup's maybe-NULL result compared with a register holding zero: 7.2 takes it as a
// NULL check (not NULL on the other side) and accepts the load; 6.18 infers nothing from a
// register and refuses "R0 invalid mem access 'map_value_or_null'". A helper that may sleep,
// called from XDP: refused by both, in 7.2's words naming it and the context.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c null_register_compare.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* The operands and clobbers of a naked program written in BPF assembly. */
#define IMM(name) [name] "i"(name)
#define IMM_ADDR(name) [name] "i"(&name)
#define CLOBBER_ALL "r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "memory"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} table SEC(".maps");

SEC("xdp")
__attribute__((naked)) int lookup_against_zero_register(void)
{
	asm volatile ("					\
	r1 = 0;						\
	*(u32 *)(r10 - 4) = r1;				\
	r2 = r10;					\
	r2 += -4;					\
	r1 = %[table] ll;				\
	call %[bpf_map_lookup_elem];			\
	r1 = 0;						\
	if r0 == r1 goto 1f;				\
	r0 = *(u32 *)(r0 + 0);				\
1:	r0 = 2;						\
	exit;						\
"	:
	: IMM(bpf_map_lookup_elem), IMM_ADDR(table)
	: CLOBBER_ALL);
}

SEC("xdp")
int copy_from_user_in_xdp(struct xdp_md *ctx)
{
	char buf[4];

	return bpf_copy_from_user(buf, sizeof(buf), 0) ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
