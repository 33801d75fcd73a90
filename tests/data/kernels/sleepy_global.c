// A global function that calls a sleepable helper, called from XDP, and the helper called
// directly. From 6.13 on the global call is refused at the caller (behaviour.rs:
// refuses_global_calls_that_may_sleep), and 7.2 words both refusals by where the walk stands
// (words_sleeping_calls_by_context); 6.12 assumes the call valid and refuses the helper when
// it verifies the function; 5.10 and 6.1 do not give XDP the helper at all.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c sleepy_global.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

__noinline int copy_word(__u64 user_address)
{
	__u64 word = 0;

	bpf_copy_from_user(&word, sizeof(word), (void *)user_address);
	return word == 1;
}

SEC("xdp")
int calls_sleepy_global(struct xdp_md *ctx)
{
	return copy_word(ctx->rx_queue_index) ? XDP_DROP : XDP_PASS;
}

/* The sleepable helper called from XDP itself. */
SEC("xdp")
int calls_sleepy_helper(struct xdp_md *ctx)
{
	__u64 word = 0;

	bpf_copy_from_user(&word, sizeof(word), (void *)(long)ctx->rx_queue_index);
	return word == 1 ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
