// A loop with no exit: the kernel's verifier answers "infinite loop detected at insn N".
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int spin_forever(struct xdp_md *ctx)
{
	int verdict;

	asm volatile("%[v] = 0;"
		     "l0_%=: %[v] += 0;"
		     "if %[v] == 0 goto l0_%=;"
		     : [v] "=r"(verdict));
	return verdict;
}

char LICENSE[] SEC("license") = "GPL";
