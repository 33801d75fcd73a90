// Two programs in one section, their symbols stripped: iproute2's convention takes the section
// whole, so the second function is code the first never reaches, and the kernel refuses the
// program ("unreachable insn"). func_info names two functions where the code makes one
// subprogram, which the kernel would refuse first; iproute2 loads without func_info, and so
// does bpfemu, saying so.
// Rebuild (in this directory):
//   clang-19 -O2 -g -target bpf -mcpu=v3 -I/usr/include/x86_64-linux-gnu \
//     -fdebug-prefix-map=$PWD=. -c two_in_one.c -o two_in_one.o
//   llvm-objcopy-19 --strip-symbol=pass_all --strip-symbol=drop_all two_in_one.o
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int pass_all(struct xdp_md *ctx)
{
	return XDP_PASS;
}

SEC("xdp")
int drop_all(struct xdp_md *ctx)
{
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
