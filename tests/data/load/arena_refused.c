// __arena globals libbpf 1.7 refuses to open: with -DTWO_ARENAS the object declares two arena
// maps ("only single ARENA map is supported"); without, it declares none
// ("to use global __arena variables the ARENA map should be explicitly declared").
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c arena_refused.c
//   -o arena_without_map.o, and with -DTWO_ARENAS -o arena_two_arenas.o
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define __arena __attribute__((address_space(1)))
#define BPF_MAP_TYPE_ARENA 33

#ifdef TWO_ARENAS
struct {
	__uint(type, BPF_MAP_TYPE_ARENA);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
} first SEC(".maps"), second SEC(".maps");
#else
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, int);
	__type(value, int);
	__uint(max_entries, 1);
} plain SEC(".maps");
#endif

int __arena counter = 1;

SEC("xdp")
int bump(struct xdp_md *ctx)
{
	counter++;
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
