// A spin-lock map whose `.maps` DATASEC carries the kind flag, which BPF_BTF_LOAD refuses
// ("Invalid btf_info kind_flag") and libbpf sends as it is: the kernel refuses the object's
// BTF, libbpf creates the map without it, and the program that takes the lock is refused
// ("map 'counters' has to have BTF in order to use bpf_spin_lock").
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c btf_datasec_flag.c
// then set bit 31 of the `.maps` DATASEC's info word in the object's .BTF (the only DATASEC
// named `.maps`; `bpftool btf dump file` shows it; python3 or a hex editor does the rest).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct counter { struct bpf_spin_lock lock; __u64 packets; };

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct counter);
} counters SEC(".maps");

SEC("xdp")
int count_locked(struct xdp_md *ctx)
{
	__u32 key = 0;
	struct counter *c = bpf_map_lookup_elem(&counters, &key);

	if (!c)
		return XDP_PASS;
	bpf_spin_lock(&c->lock);
	c->packets++;
	bpf_spin_unlock(&c->lock);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
