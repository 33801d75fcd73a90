// A program that reads a map's kernel structure through the map pointer (root may: the
// kernel's check_ptr_to_map_access). The kernel accepts it; bpfemu's verifier too, but no
// bpfemu runtime has kernel structures to read, so --engine jit-trusted must refuse it.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c map_internals.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

SEC("xdp")
__attribute__((naked)) int xdp_map_internals(void)
{
	// The first 8 bytes of struct bpf_array (a scalar in 6.18's struct bpf_map), then XDP_PASS.
	asm volatile("r1 = %[counters] ll;"
		     "r0 = *(u64 *)(r1 + 0);"
		     "r0 = 2;"
		     "exit;"
		     :
		     : [counters] "i"(&counters));
}

char _license[] SEC("license") = "GPL";
