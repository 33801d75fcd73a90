// Maps whose BTF the kernel refuses (map_check_btf: a bpf_spin_lock in an LRU hash, a
// bpf_timer in a per-CPU array), which libbpf then creates again without BTF: the maps load,
// but a program that takes their lock or timer is refused ("map 'X' has to have BTF in order
// to use bpf_spin_lock"). The same lock in a plain hash map keeps its BTF and loads.
// Rebuild (in this directory): clang-19 -O2 -g -target bpf -mcpu=v3
//   -I/usr/include/x86_64-linux-gnu -fdebug-prefix-map=$PWD=. -c btf_dropped.c
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct locked { struct bpf_spin_lock lock; __u64 count; };
struct timed { struct bpf_timer timer; __u64 count; };

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, struct locked);
} lru_locked SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, struct timed);
} percpu_timed SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, struct locked);
} hash_locked SEC(".maps");

static int bump(void *map)
{
	__u32 key = 0;
	struct locked *v = bpf_map_lookup_elem(map, &key);

	if (!v)
		return XDP_DROP;
	bpf_spin_lock(&v->lock);
	v->count++;
	bpf_spin_unlock(&v->lock);
	return XDP_PASS;
}

SEC("xdp")
int lock_in_lru(struct xdp_md *ctx)
{
	return bump(&lru_locked);
}

SEC("xdp")
int lock_in_hash(struct xdp_md *ctx)
{
	return bump(&hash_locked);
}

SEC("xdp")
int timer_in_percpu_array(struct xdp_md *ctx)
{
	__u32 key = 0;
	struct timed *v = bpf_map_lookup_elem(&percpu_timed, &key);

	if (v)
		bpf_timer_init(&v->timer, &percpu_timed, 0);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
