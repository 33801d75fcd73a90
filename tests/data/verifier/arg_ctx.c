// Global functions whose pointer argument is tagged `arg:ctx`: the kernel takes it as the
// program's context only when it points to nothing (`void *`) or to XDP's own context
// struct (`struct xdp_md`, also through a typedef); another program type's context (`u64 *`
// of tracing programs, an iterator's struct) is refused at the call ("Caller passes invalid
// args into func#N", after "arg#0 should be `struct xdp_md *`").
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c arg_ctx.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define __arg_ctx __attribute__((btf_decl_tag("arg:ctx")))

typedef struct xdp_md xdp_ctx_t;
struct bpf_iter__task;

__attribute__((noinline)) int takes_void(void *ctx __arg_ctx)
{
	return ctx != 0;
}

__attribute__((noinline)) int takes_xdp_md(struct xdp_md *ctx __arg_ctx)
{
	return ctx->ingress_ifindex;
}

__attribute__((noinline)) int takes_typedef(xdp_ctx_t *ctx __arg_ctx)
{
	return ctx->rx_queue_index;
}

__attribute__((noinline)) int takes_u64(__u64 *ctx __arg_ctx)
{
	return ctx != 0;
}

__attribute__((noinline)) int takes_iterator(struct bpf_iter__task *ctx __arg_ctx)
{
	return ctx != 0;
}

SEC("xdp")
int xdp_contexts(struct xdp_md *ctx)
{
	return (takes_void(ctx) + takes_xdp_md(ctx) + takes_typedef(ctx)) & 1 ? XDP_PASS : XDP_DROP;
}

SEC("xdp")
int tracing_context(struct xdp_md *ctx)
{
	return takes_u64((void *)ctx) ? XDP_PASS : XDP_DROP;
}

SEC("xdp")
int iterator_context(struct xdp_md *ctx)
{
	return takes_iterator((void *)ctx) ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
