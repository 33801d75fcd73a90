// Global functions whose pointer arguments are tagged `arg:trusted`, `arg:untrusted`,
// `arg:nullable`: the kernel types them as kernel objects by the pointee's name in vmlinux
// (`btf_prepare_func_args`). A trusted argument takes a kernel pointer to that struct (NULL
// too when nullable) at no variable offset; an untrusted one, read-only, takes anything; a
// pointer to void or an integer tagged untrusted is memory of size 0. A global function that
// calls a helper that may sleep is refused to XDP, which never sleeps.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c global_ptr_args.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define __arg_trusted __attribute__((btf_decl_tag("arg:trusted")))
#define __arg_untrusted __attribute__((btf_decl_tag("arg:untrusted")))
#define __arg_nullable __attribute__((btf_decl_tag("arg:nullable")))

struct task_struct {
	int pid;
	int tgid;
} __attribute__((preserve_access_index));

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;

__u32 offset;

__attribute__((noinline)) int trusted_or_null(struct task_struct *task __arg_trusted __arg_nullable)
{
	if (!task)
		return 0;
	return task->pid;
}

__attribute__((noinline)) int trusted(struct task_struct *task __arg_trusted)
{
	return task->tgid;
}

__attribute__((noinline)) int untrusted(struct task_struct *task __arg_untrusted)
{
	return task->pid;
}

__attribute__((noinline)) int untrusted_mem(void *p __arg_untrusted)
{
	return *(int *)p;
}

__attribute__((noinline, weak)) int untrusted_nullable(struct task_struct *task __arg_untrusted __arg_nullable)
{
	return 0;
}

__attribute__((noinline)) int sleeps(void *dst)
{
	return bpf_copy_from_user_task(dst, 4, 0, bpf_get_current_task_btf(), 0);
}

SEC("xdp")
int trusted_task_ok(struct xdp_md *ctx)
{
	struct task_struct *t = bpf_get_current_task_btf();

	return (trusted_or_null(t) + trusted_or_null(0) + trusted(t)) & 1;
}

SEC("xdp")
int trusted_gets_null(struct xdp_md *ctx)
{
	return trusted(0) & 1;
}

SEC("xdp")
int trusted_gets_ctx(struct xdp_md *ctx)
{
	return trusted_or_null((void *)ctx) & 1;
}

SEC("xdp")
int trusted_gets_other_struct(struct xdp_md *ctx)
{
	return trusted_or_null(bpf_cast_to_kern_ctx(ctx)) & 1;
}

SEC("xdp")
int trusted_gets_variable_offset(struct xdp_md *ctx)
{
	return trusted((void *)bpf_get_current_task_btf() + (offset & 4)) & 1;
}

SEC("xdp")
int untrusted_gets_anything(struct xdp_md *ctx)
{
	int r = untrusted((void *)ctx) + untrusted(0) + untrusted((void *)&offset);

	r += untrusted_mem(bpf_get_current_task_btf()) + untrusted_mem(&offset) + untrusted_mem(0);
	return r & 1;
}

SEC("xdp")
int untrusted_and_nullable(struct xdp_md *ctx)
{
	return untrusted_nullable(0) & 1;
}

SEC("xdp")
int global_that_sleeps(struct xdp_md *ctx)
{
	int v = 0;

	return sleeps(&v) & 1;
}

char LICENSE[] SEC("license") = "GPL";
