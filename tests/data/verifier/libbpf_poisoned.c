// Instructions libbpf poisons on purpose, and the log line a libbpf user then reads: a call
// to a weak kfunc the kernel does not have becomes `call unknown#2002000000+N`, a CO-RE
// relocation with no target `call unknown#195896080`. The kernel can only say `invalid func
// unknown#...` when it reaches one; libbpf 1.7 rewrites that into "kfunc 'X' is referenced
// but wasn't resolved" or "failed to resolve CO-RE relocation <kind> [id] ...". Guarded
// uses are dead code the verifier never reaches, and load.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c libbpf_poisoned.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

extern int bpfemu_kfunc_nobody_has(int x) __ksym __weak;

// Types no kernel has: every relocation against them finds no target.
struct bpfemu_absent {
	int first;
	struct {
		char pad[3];
		unsigned int low : 4, high : 4;
	} inner;
} __attribute__((preserve_access_index));

enum bpfemu_absent_kind { BPFEMU_ABSENT_A = 1, BPFEMU_ABSENT_B = -7 };

SEC("xdp")
int kfunc_called(struct xdp_md *ctx)
{
	return bpfemu_kfunc_nobody_has(1) ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int kfunc_guarded(struct xdp_md *ctx)
{
	if (bpfemu_kfunc_nobody_has)
		return bpfemu_kfunc_nobody_has(2) ? XDP_DROP : XDP_PASS;
	return XDP_PASS;
}

SEC("xdp")
int field_offset_missing(struct xdp_md *ctx)
{
	return bpf_core_field_offset(struct bpfemu_absent, inner.high) & 3;
}

SEC("xdp")
int enum_value_missing(struct xdp_md *ctx)
{
	return bpf_core_enum_value(enum bpfemu_absent_kind, BPFEMU_ABSENT_B) & 3;
}

SEC("xdp")
int field_guarded(struct xdp_md *ctx)
{
	if (bpf_core_field_exists(struct bpfemu_absent, first))
		return bpf_core_field_offset(struct bpfemu_absent, first) & 3;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
