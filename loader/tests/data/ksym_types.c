// A kfunc declared with a parameter type of another kind than the kernel's (a forward
// declaration where vmlinux has a struct): libbpf refuses the extern, "func_proto [N]
// incompatible with vmlinux [M]"; a weak one it leaves unresolved.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct bpf_key;
extern void bpf_key_put(struct bpf_key *key) __ksym;
extern struct bpf_key *bpf_lookup_system_key(__u64 id) __ksym __weak;

SEC("xdp")
int put_key(struct xdp_md *ctx)
{
	bpf_key_put((struct bpf_key *)(long)ctx->data_meta);
	return XDP_PASS;
}

SEC("xdp")
int maybe_lookup(struct xdp_md *ctx)
{
	return bpf_lookup_system_key ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
