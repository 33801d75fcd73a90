// A bpf_loop callback (its address is an ld_imm64 the kernel refuses without func_info)
// in an object whose BTF is large: at BTF log level 1 the kernel logs every type, and this
// one's log needs more than 64 KiB. A loader that asks for that log on the first
// BPF_BTF_LOAD gets ENOSPC, loses the BTF, and the program fails with "missing btf
// func_info"; libbpf asks for no log first and the program loads.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c big_btf_callback.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define S16 "0123456789abcdef"
#define S256 S16 S16 S16 S16 S16 S16 S16 S16 S16 S16 S16 S16 S16 S16 S16 S16
#define TAG(n) __attribute__((btf_decl_tag(#n S256 S256 S256)))
#define TAG10(n) TAG(n##0) TAG(n##1) TAG(n##2) TAG(n##3) TAG(n##4) \
	TAG(n##5) TAG(n##6) TAG(n##7) TAG(n##8) TAG(n##9)

static int add_one(__u32 index, void *ctx)
{
	*(__u64 *)ctx += index;
	return 0;
}

SEC("xdp")
TAG10(a) TAG10(b) TAG10(c) TAG10(d) TAG10(e) TAG10(f) TAG10(g) TAG10(h)
int loops(struct xdp_md *ctx)
{
	__u64 sum = 0;

	bpf_loop(4, add_one, &sum, 0);
	return sum == 6 ? XDP_PASS : XDP_DROP;
}

char _license[] SEC("license") = "GPL";
