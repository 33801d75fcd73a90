// Refusals whose words changed after 6.12 (behaviour.rs: words_exit_leaks_by_resource,
// words_helper_stack_access_by_direction). Hand-written instructions, so that every kernel
// sees the same program.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c exit_leaks.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} events SEC(".maps");

struct locked {
	struct bpf_spin_lock lock;
	__u64 count;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct locked);
} counters SEC(".maps");

/* A ring buffer record reserved and never submitted. */
SEC("xdp")
__attribute__((naked)) int leaks_record(void)
{
	asm volatile(
		"r1 = %[events] ll;"
		"r2 = 8;"
		"r3 = 0;"
		"call %[bpf_ringbuf_reserve];"
		"r0 = 2;"
		"exit;"
		:
		: [events] "i"(&events), [bpf_ringbuf_reserve] "i"(BPF_FUNC_ringbuf_reserve)
		: "memory");
}

/* A lock taken and never released. */
SEC("xdp")
__attribute__((naked)) int exits_holding_lock(void)
{
	asm volatile(
		"r1 = 0;"
		"*(u32 *)(r10 - 4) = r1;"
		"r2 = r10;"
		"r2 += -4;"
		"r1 = %[counters] ll;"
		"call %[bpf_map_lookup_elem];"
		"if r0 == 0 goto 1f;"
		"r1 = r0;"
		"call %[bpf_spin_lock];"
		"1:"
		"r0 = 2;"
		"exit;"
		:
		: [counters] "i"(&counters), [bpf_map_lookup_elem] "i"(BPF_FUNC_map_lookup_elem),
		  [bpf_spin_lock] "i"(BPF_FUNC_spin_lock)
		: "memory");
}

/* A map key of 4 bytes whose last 2 lie above the frame. */
SEC("xdp")
__attribute__((naked)) int key_past_the_frame(void)
{
	asm volatile(
		"r1 = 0;"
		"*(u32 *)(r10 - 4) = r1;"
		"r2 = r10;"
		"r2 += -2;"
		"r1 = %[counters] ll;"
		"call %[bpf_map_lookup_elem];"
		"r0 = 2;"
		"exit;"
		:
		: [counters] "i"(&counters), [bpf_map_lookup_elem] "i"(BPF_FUNC_map_lookup_elem)
		: "memory");
}

char LICENSE[] SEC("license") = "GPL";
