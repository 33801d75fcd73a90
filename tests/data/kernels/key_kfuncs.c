// The key kfuncs from XDP: refused as "not allowed" by 6.1 and 6.12 (registered for tracing
// programs only), callable from 6.13 on; 5.10's BTF lacks them (profile/kfuncs.rs).
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c key_kfuncs.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct bpf_key {
	int opaque;	/* libbpf wants a struct, not a forward declaration */
};
extern struct bpf_key *bpf_lookup_system_key(__u64 id) __ksym;
extern void bpf_key_put(struct bpf_key *key) __ksym;

SEC("xdp")
int system_key(struct xdp_md *ctx)
{
	struct bpf_key *key = bpf_lookup_system_key(1);

	if (key)
		bpf_key_put(key);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
