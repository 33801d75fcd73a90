// Programs whose results depend on bpf_get_prandom_u32 and the clock, for `bpfemu diff`'s taint
// tracking against the kernel (both sides draw different random numbers):
// - `sample_one_in_four`: the verdict is random ("sample 1 in 4"); it also counts packets;
// - `random_beside_verdict`: draws a random number and reads the clock, stores both in a map
//   and writes the random number into the last byte of the source MAC address, but its verdict comes from the
//   packet and from `config` (no taint), and its packet counter is untainted too; a value set
//   in the kernel's `config` only is a real mismatch beside the random part;
// - `count_one_in_four`: counts every packet, then, 1 time in 4, bumps `sampled` and inserts a
//   key in `sampled_keys`: maps the run touches only on the branch it happened to take;
// - `bump_held_one_in_four`: looks its counter up before the draw and bumps it 1 time in 4
//   through the pointer it holds across the draw.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

struct last_draw {
	__u64 random;
	__u64 when_ns;
	__u64 packets;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct last_draw);
} draws SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} sampled SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
} sampled_keys SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} held SEC(".maps");

static __always_inline void count(__u32 slot)
{
	__u64 *n = bpf_map_lookup_elem(&counts, &slot);
	if (n)
		__sync_fetch_and_add(n, 1);
}

SEC("xdp")
int sample_one_in_four(struct xdp_md *ctx)
{
	count(0);
	return (bpf_get_prandom_u32() & 3) == 0 ? XDP_PASS : XDP_DROP;
}

SEC("xdp")
int random_beside_verdict(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u32 zero = 0;
	__u32 r = bpf_get_prandom_u32();

	count(1);
	struct last_draw *d = bpf_map_lookup_elem(&draws, &zero);
	if (d) {
		d->random = r;
		d->when_ns = bpf_ktime_get_ns();
		d->packets++;
	}
	if ((void *)(eth + 1) > data_end)
		return XDP_ABORTED;
	eth->h_source[5] = r;
	__u32 *drop_all = bpf_map_lookup_elem(&config, &zero);
	if (drop_all && *drop_all)
		return XDP_DROP;
	return eth->h_proto == __builtin_bswap16(ETH_P_IP) ? XDP_PASS : XDP_TX;
}

SEC("xdp")
int count_one_in_four(struct xdp_md *ctx)
{
	count(0);
	if ((bpf_get_prandom_u32() & 3) == 0) {
		__u32 zero = 0, key = 7, one = 1;
		__u64 *n = bpf_map_lookup_elem(&sampled, &zero);

		if (n)
			__sync_fetch_and_add(n, 1);
		bpf_map_update_elem(&sampled_keys, &key, &one, BPF_ANY);
	}
	return XDP_PASS;
}

SEC("xdp")
int bump_held_one_in_four(struct xdp_md *ctx)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&held, &zero);

	if (!n)
		return XDP_ABORTED;
	if ((bpf_get_prandom_u32() & 3) == 0)
		__sync_fetch_and_add(n, 1);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
