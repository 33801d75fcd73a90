// __arena globals (section .addr_space.1): libbpf 1.7 places them in the object's arena map
// and turns each reference into an ld_imm64 of the arena's address (a scalar to the
// verifier, made an arena pointer by addr_space_cast); the kernel refuses programs using an
// arena until it has a user address (map_extra or mmap()). Arena pointers take any
// arithmetic, with an arena pointer on either side. A spin lock in a private .bss section
// (its map's value is the section's BTF, a DATASEC) is a valid bpf_spin_lock; hidden, its
// variables are static to libbpf, which then does not make the map mmap()able (the kernel
// refuses to mmap a map with a spin lock).
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c arena_globals.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define __arena __attribute__((address_space(1)))
/* Linux 6.9's number; the system's linux/bpf.h may be older. */
#define BPF_MAP_TYPE_ARENA 33

struct {
	__uint(type, BPF_MAP_TYPE_ARENA);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 4);
} arena SEC(".maps");

int __arena counter = 7;
char __arena buf[64];

#define private(name) SEC(".bss." #name) __attribute__((visibility("hidden"), aligned(8)))

private(locked) struct bpf_spin_lock lock;
private(locked) int guarded;

SEC("xdp")
int arena_global_counter(struct xdp_md *ctx)
{
	counter++;
	buf[ctx->rx_queue_index & 63] = 1;
	return counter > 100 ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int scalar_plus_arena_pointer(struct xdp_md *ctx)
{
	char __arena *p = buf;
	long x = 12;

	asm volatile("%[x] += %[p];" : [x] "+r"(x) : [p] "r"(p));
	return *(char __arena *)x ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int arena_pointer_as_map_key(struct xdp_md *ctx)
{
	return bpf_map_lookup_elem(&arena, (void *)(unsigned long)buf) ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int private_lock(struct xdp_md *ctx)
{
	bpf_spin_lock(&lock);
	guarded++;
	bpf_spin_unlock(&lock);
	return XDP_PASS;
}

SEC("xdp")
int call_under_private_lock(struct xdp_md *ctx)
{
	bpf_spin_lock(&lock);
	guarded += bpf_get_prandom_u32();
	bpf_spin_unlock(&lock);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
