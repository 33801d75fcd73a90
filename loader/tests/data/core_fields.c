// CO-RE test program for bpfemu-loader's relocation tests (loader/tests/core_*.rs).
// Local declarations of kernel types, deliberately in a different order and with flavors, so
// that relocating against /sys/kernel/btf/vmlinux changes offsets, sizes and values.
#include <linux/types.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#define __pai __attribute__((preserve_access_index))

/* Only two fields, in the opposite order from the kernel's. */
struct sk_buff___local {
	__u32 mark;
	unsigned int len;
	__u8 pkt_type:3;
	__u32 no_such_field_in_kernel;
} __pai;

/* saddr/daddr sit inside an anonymous union in the kernel's iphdr. */
struct iphdr {
	__u8 ihl:4, version:4;
	__u8 tos;
	__u16 tot_len;
	__u32 saddr;
	__u32 daddr;
} __pai;

struct ethhdr {
	unsigned char h_dest[6];
	unsigned char h_source[6];
	__u16 h_proto;
} __pai;

struct xdp_md {
	__u32 data;
	__u32 data_end;
	__u32 data_meta;
	__u32 ingress_ifindex;
	__u32 rx_queue_index;
	__u32 egress_ifindex;
} __pai;

enum xdp_action___x { XDP_PASS___x = 77, XDP_NOT_AN_ACTION = 5 };

struct no_such_struct_anywhere { int x; };

volatile __u64 out[32];

SEC("xdp")
int fields(struct xdp_md *ctx)
{
	struct sk_buff___local *skb = (void *)(long)ctx->data;
	struct iphdr *ip = (void *)(long)ctx->data_end;

	out[0] = skb->len;
	out[1] = skb->mark;
	out[2] = ip->daddr;
	out[3] = ip->tot_len;
	out[4] = BPF_CORE_READ_BITFIELD(ip, version);
	out[5] = BPF_CORE_READ_BITFIELD(skb, pkt_type);
	out[6] = bpf_core_field_exists(skb->no_such_field_in_kernel);
	out[7] = bpf_core_field_exists(skb->len);
	out[8] = bpf_core_field_size(skb->len);
	out[9] = bpf_core_field_offset(struct ethhdr, h_proto);
	return XDP_PASS___x;
}

SEC("xdp")
int types(struct xdp_md *ctx)
{
	out[10] = bpf_core_type_exists(struct ethhdr);
	out[11] = bpf_core_type_exists(struct no_such_struct_anywhere);
	out[12] = bpf_core_type_size(struct ethhdr);
	out[13] = bpf_core_type_size(struct iphdr);
	out[14] = bpf_core_type_id_kernel(struct ethhdr);
	out[15] = bpf_core_type_id_local(struct ethhdr);
	out[16] = bpf_core_type_matches(struct ethhdr);
	out[17] = bpf_core_enum_value_exists(enum xdp_action___x, XDP_PASS___x);
	out[18] = bpf_core_enum_value_exists(enum xdp_action___x, XDP_NOT_AN_ACTION);
	out[19] = bpf_core_enum_value(enum xdp_action___x, XDP_PASS___x);
	return 2;
}

SEC("xdp")
int poisoned(struct xdp_md *ctx)
{
	struct sk_buff___local *skb = (void *)(long)ctx->data;

	/* Unguarded: the field does not exist in the kernel, so the load is poisoned. */
	out[20] = skb->no_such_field_in_kernel;
	/* So is the value of an enumerator the kernel does not have. */
	out[21] = bpf_core_enum_value(enum xdp_action___x, XDP_NOT_AN_ACTION);
	return 2;
}

char LICENSE[] SEC("license") = "GPL";
