// SPDX-License-Identifier: GPL-2.0
/*
 * pass: returns XDP_PASS for every frame and does nothing else. The floor of
 * the per-packet cost: what a replay or a bench measures on it is the runtime
 * around the program (frame set-up, the engine's entry and exit, the capture
 * reader), not the program.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int xdp_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
