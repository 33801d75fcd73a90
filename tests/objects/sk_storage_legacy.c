// A socket storage map in the legacy `maps` section, without BTF for its key and value: the
// kernel refuses to create it (EINVAL), so neither libbpf nor bpfemu loads the object.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct legacy_map_def {
	unsigned int type;
	unsigned int key_size;
	unsigned int value_size;
	unsigned int max_entries;
	unsigned int map_flags;
};

struct legacy_map_def SEC("maps") legacy_marks = {
	.type = BPF_MAP_TYPE_SK_STORAGE,
	.key_size = sizeof(int),
	.value_size = sizeof(__u64),
	.max_entries = 0,
	.map_flags = BPF_F_NO_PREALLOC,
};

SEC("xdp")
int pass_all(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
