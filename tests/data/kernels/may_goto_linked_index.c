// A may_goto loop (can_loop) whose index, once copied, carries a constant-offset link
// (`r1 += 1` after `r2 = r1`) back to the loop's head, where the checkpoint holds the index
// with no id. 6.18 prunes that first return against the checkpoint (the old register was
// independent); Debian's 6.12.95 wants the link flags equal and walks the body once more.
// 5.10 and 6.1 have no may_goto.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c may_goto_linked_index.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define SLOTS 600

__u32 first;
__u64 slots[SLOTS];

/* True until the kernel's bound on the loop (may_goto) says stop, as libbpf's can_loop. */
#define can_loop                                                                   \
	({                                                                         \
		__label__ stop, go_on;                                             \
		int more = 1;                                                      \
		asm volatile goto("may_goto %l[stop]" :::: stop);                  \
		goto go_on;                                                        \
	stop:                                                                      \
		more = 0;                                                          \
	go_on:                                                                     \
		more;                                                              \
	})

SEC("xdp")
int fill_slots(struct xdp_md *ctx)
{
	__u64 i;

	for (i = first; i < SLOTS && can_loop; i++) {
		asm volatile("" : "+r"(i));
		slots[i] = i;
	}
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
