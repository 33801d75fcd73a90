// How `btf_prepare_func_args` reads the `arg:` decl tags of a global function's parameters
// beyond trusted and untrusted objects (global_ptr_args.c): `arg:nullable` belongs to kernel
// objects only, an unknown tag is refused, `arg:arena` takes an arena pointer or a scalar; a
// trusted argument takes a kernel pointer at a fixed offset when the struct nested there is
// the one expected (`btf_struct_ids_match` walks to it), and a static function's tags are
// only noted in the log.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c global_arg_tags.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define __arg_trusted __attribute__((btf_decl_tag("arg:trusted")))
#define __arg_nullable __attribute__((btf_decl_tag("arg:nullable")))
#define __arg_nonnull __attribute__((btf_decl_tag("arg:nonnull")))
#define __arg_arena __attribute__((btf_decl_tag("arg:arena")))
#define __arg_unknown __attribute__((btf_decl_tag("arg:shiny")))

struct sched_entity {
	__u64 vruntime;
} __attribute__((preserve_access_index));

struct task_struct {
	int pid;
	struct sched_entity se;
} __attribute__((preserve_access_index));

__attribute__((noinline, weak)) int entity(struct sched_entity *se __arg_trusted)
{
	return se->vruntime & 1;
}

__attribute__((noinline, weak)) int task(struct task_struct *t __arg_trusted)
{
	return t->pid & 1;
}

__attribute__((noinline, weak)) int nullable_mem(int *p __arg_nullable)
{
	return p ? *p : 0;
}

__attribute__((noinline, weak)) int unknown_tag(int *p __arg_unknown)
{
	return p ? *p : 0;
}

__attribute__((noinline, weak)) int arena(void *p __arg_arena)
{
	return p != 0;
}

static __attribute__((noinline)) int static_tagged(int *p __arg_nonnull)
{
	return *p;
}

SEC("xdp")
int nested_struct_at_offset(struct xdp_md *ctx)
{
	struct task_struct *t = bpf_get_current_task_btf();

	return entity(&t->se) & 1;
}

SEC("xdp")
int offset_pointer_as_outer_struct(struct xdp_md *ctx)
{
	struct task_struct *t = bpf_get_current_task_btf();

	return task((void *)&t->se) & 1;
}

SEC("xdp")
int nullable_on_memory(struct xdp_md *ctx)
{
	int v = ctx->rx_queue_index;

	return nullable_mem(&v) & 1;
}

SEC("xdp")
int unknown_arg_tag(struct xdp_md *ctx)
{
	int v = ctx->rx_queue_index;

	return unknown_tag(&v) & 1;
}

SEC("xdp")
int arena_takes_scalar(struct xdp_md *ctx)
{
	return arena((void *)(long)ctx->rx_queue_index) & 1;
}

SEC("xdp")
int arena_refuses_ctx(struct xdp_md *ctx)
{
	return arena(ctx) & 1;
}

SEC("xdp")
int static_function_tags(struct xdp_md *ctx)
{
	int v = ctx->rx_queue_index;

	return static_tagged(&v) & 1;
}

char LICENSE[] SEC("license") = "GPL";
