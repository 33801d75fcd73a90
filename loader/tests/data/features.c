// Test object for the loader: the libbpf features the example corpus does not use.
// Build with build.sh; the .o is committed so the tests need no clang.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

extern int LINUX_KERNEL_VERSION __kconfig;
extern _Bool CONFIG_BPF_SYSCALL __kconfig __weak;
extern int bpf_xdp_metadata_rx_timestamp(const struct xdp_md *ctx, __u64 *timestamp) __ksym;

struct inner {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
};

struct inner inner_a SEC(".maps"), inner_b SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 3);
	__type(key, __u32);
	__array(values, struct inner);
} outer SEC(".maps") = {
	.values = { [0] = &inner_a, [2] = &inner_b },
};

/* max_entries left to the loader (--map-size sized=N). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, __u32);
} sized SEC(".maps");

__u32 custom_counter SEC(".data.custom") = 7;
const volatile __u32 limit = 100;

static __noinline int add_one(int x)
{
	return x + 1;
}

__noinline int twice(int x)
{
	return add_one(x) * 2;
}

static long loop_cb(__u32 i, void *ctx)
{
	return 0;
}

SEC("xdp.frags")
int first(struct xdp_md *ctx)
{
	__u64 ts = 0;
	__u32 key = 0;

	bpf_xdp_metadata_rx_timestamp(ctx, &ts);
	bpf_loop(4, loop_cb, 0, 0);
	if (LINUX_KERNEL_VERSION > 0 && CONFIG_BPF_SYSCALL)
		custom_counter += twice(ts);
	if (bpf_map_lookup_elem(&sized, &key))
		return XDP_DROP;
	return custom_counter > limit ? XDP_PASS : XDP_DROP;
}

SEC("xdp.frags")
int second(struct xdp_md *ctx)
{
	__u32 key = 0;

	if (bpf_map_lookup_elem(&outer, &key))
		return add_one(XDP_PASS);
	return twice(XDP_DROP);
}
