// An `ld_imm64` that names a map by a file descriptor written in the object (src_reg
// BPF_PSEUDO_MAP_FD, imm 0, no relocation): libbpf passes it on as written, and the kernel
// finds no map behind fd 0 ("fd 0 is not pointing to valid bpf_map"), although the object
// has a map of its own. The map used through a relocation loads.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c map_fd_written.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4);
	__type(key, __u64);
	__type(value, __u64);
} table SEC(".maps");

SEC("xdp")
__attribute__((naked)) int fd_written_in_object(void)
{
	asm volatile (
	"r2 = 0;"
	"*(u64 *)(r10 - 8) = r2;"
	"r2 = r10;"
	"r2 += -8;"
	".8byte 0x0000000000001118;"	/* r1 = map by fd 0 (ld_imm64, src 1) */
	".8byte 0;"
	"call 3;"			/* bpf_map_delete_elem */
	"r0 = 2;"
	"exit;"
	::: "memory");
}

SEC("xdp")
int relocated_map(struct xdp_md *ctx)
{
	__u64 key = 0;

	bpf_map_delete_elem(&table, &key);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
