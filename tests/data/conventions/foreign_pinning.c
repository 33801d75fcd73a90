// A map pinned the way Cilium pins its tail-call map (`CILIUM_PIN_REPLACE`, 16: its loader's
// own meaning), once in an object of static programs (cilium/ebpf's convention: a warning, the
// map not pinned) and once, with PROGRAM_IS_GLOBAL, in one of global programs (libbpf's: the
// object is refused, "invalid pinning value 16").
// Rebuild (in this directory):
//   clang-19 -O2 -g -target bpf -mcpu=v3 -I/usr/include/x86_64-linux-gnu \
//     -fdebug-prefix-map=$PWD=. -c foreign_pinning.c -o foreign_pinning.o
//   clang-19 -O2 -g -target bpf -mcpu=v3 -I/usr/include/x86_64-linux-gnu \
//     -fdebug-prefix-map=$PWD=. -DPROGRAM_IS_GLOBAL -c foreign_pinning.c -o foreign_pinning.libbpf.o
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
	__uint(pinning, 16);
} calls SEC(".maps");

#ifdef PROGRAM_IS_GLOBAL
SEC("xdp") int
#else
static __attribute__((section("xdp"), used)) int
#endif
dispatch(struct xdp_md *ctx)
{
	bpf_tail_call(ctx, &calls, 1);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
