// bpf_find_vma's callback is verified as a callback of the call (cb(task, vma, ctx), returning
// 0 or 1), with the caller's context pointer as its third argument: an index it leaves
// unbounded in that context makes the caller's array access unsafe. The task comes from
// bpf_get_current_task_btf, a trusted pointer.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c find_vma_callback.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct task_struct;
struct vm_area_struct;

struct walk {
	__u64 index;
};

__u8 slots[4];

static long bounded(struct task_struct *task, struct vm_area_struct *vma, struct walk *w)
{
	w->index = 3;
	return 0;
}

static long unbounded(struct task_struct *task, struct vm_area_struct *vma, struct walk *w)
{
	w->index = bpf_get_prandom_u32();
	return 0;
}

SEC("xdp")
int index_set_in_range(struct xdp_md *ctx)
{
	struct walk w = { .index = 0 };

	bpf_find_vma(bpf_get_current_task_btf(), 0, bounded, &w, 0);
	return slots[w.index & 3] ? XDP_PASS : XDP_DROP;
}

SEC("xdp")
int index_set_out_of_range(struct xdp_md *ctx)
{
	struct walk w = { .index = 0 };

	bpf_find_vma(bpf_get_current_task_btf(), 0, unbounded, &w, 0);
	return slots[w.index] ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
