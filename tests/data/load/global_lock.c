// A bpf_spin_lock among global variables: libbpf 1.7 makes a global data map with a
// non-static variable mmap()able and maps it into memory at once, and the kernel refuses to
// mmap() a map holding a special field, so libbpf fails the map, and so every program of the
// object ("map '.data.locked': failed to create: -ENOTSUPP"). Hidden (__hidden), the
// variables are static to libbpf, the map is not mapped, and the lock is valid.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c global_lock.c
// and global_lock_hidden.o from the same source with -DHIDDEN.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#ifdef HIDDEN
#define private(name) SEC(".data." #name) __attribute__((visibility("hidden"), aligned(8)))
#else
#define private(name) SEC(".data." #name) __attribute__((aligned(8)))
#endif

private(locked) struct bpf_spin_lock lock;
private(locked) int guarded;

SEC("xdp")
int count_under_lock(struct xdp_md *ctx)
{
	bpf_spin_lock(&lock);
	guarded++;
	bpf_spin_unlock(&lock);
	return XDP_PASS;
}

SEC("xdp")
int call_under_lock(struct xdp_md *ctx)
{
	bpf_spin_lock(&lock);
	guarded += bpf_get_prandom_u32();
	bpf_spin_unlock(&lock);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
