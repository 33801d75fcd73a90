// Ring buffer records and perf event samples, for `bpfemu diff`'s comparison of what a run
// emits: every packet gets a reserved-and-submitted record (its length, its first bytes and a
// salt from a map), a reservation discarded, an output record, a perf sample of 3 bytes plus
// the first 14 packet bytes on the running CPU's slot (odd length: the kernel pads it), and
// the return value of an output into CPU 1's slot (EOPNOTSUPP on CPU 0, E2BIG on a one-CPU
// machine) as a last ring record.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} records SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} samples SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} salt SEC(".maps");

struct record {
	__u32 len;
	__u32 salt;
	__u8 head[6];
	__u16 pad;
};

/* Keeps struct record in the object's BTF (clang emits only the types globals, maps and
 * functions use), so that `replay --record-type records='struct record'` can show records typed. */
struct record *unused_record __attribute__((unused));

SEC("xdp")
int emit_records(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 zero = 0;
	__u32 *s = bpf_map_lookup_elem(&salt, &zero);
	if (!s || data + 14 > end)
		return XDP_ABORTED;
	struct record *r = bpf_ringbuf_reserve(&records, sizeof(*r), 0);
	if (r) {
		r->len = end - data;
		r->salt = *s;
		__builtin_memcpy(r->head, data, 6);
		r->pad = 0;
		bpf_ringbuf_submit(r, 0);
	}
	__u64 *gone = bpf_ringbuf_reserve(&records, sizeof(*gone), 0);
	if (gone)
		bpf_ringbuf_discard(gone, 0);
	__u64 len = end - data;
	bpf_ringbuf_output(&records, &len, sizeof(len), 0);
	__u8 small[3] = { 1, 2, 3 };
	bpf_perf_event_output(ctx, &samples, BPF_F_CURRENT_CPU | (14ULL << 32), small, 3);
	long rc = bpf_perf_event_output(ctx, &samples, 1, small, 3);
	bpf_ringbuf_output(&records, &rc, sizeof(rc), 0);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
