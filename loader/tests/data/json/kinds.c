// SPDX-License-Identifier: GPL-2.0
/*
 * kinds.c - map key/value types covering every BTF kind bpftool's BTF dumper
 * formats (ints of every width and encoding, bitfields, char strings, enums,
 * enum64, bool, pointers, __int128, anonymous and named unions/structs,
 * nested arrays, global data), so gen.sh can record what `bpftool -j map
 * dump` prints for them. Built by gen.sh; not part of the XDP corpus.
 */
#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>

enum color { RED = 1, GREEN = 2, BLUE = -3 };
enum big : unsigned long long { SMALL = 1, HUGE = 0xfedcba9876543210ULL };
enum small8 : unsigned char { S0 = 0, S200 = 200 };

struct flags {
	unsigned int a : 3;
	unsigned int b : 5;
	int c : 7;		/* signed bitfield */
	unsigned int d : 17;
	unsigned long long e : 40;
	unsigned char f : 1;
};

struct kinds {
	char name[12];		/* string when it looks like one */
	char raw[4];		/* list otherwise */
	unsigned char bytes[3];
	signed char sc;
	char ch;
	short s16;
	unsigned short u16;
	int s32;
	long long s64;
	unsigned long long u64;
	_Bool yes;
	enum color col;
	enum big big;
	enum small8 sm;
	struct flags fl;
	void *ptr;
	__int128 i128;
	unsigned __int128 u128;
	union {
		__u32 v4;
		__u8 v6[16];
	};
	struct {
		__u16 port;
		__u16 zone;
	} named;
	__u32 grid[2][3];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, struct flags);
	__type(value, struct kinds);
} kinds_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 16);
	__type(key, enum color);
	__type(value, struct flags);
} pcpu SEC(".maps");

char greeting[8] = "hello";
const volatile enum color fav = GREEN;
const volatile char tag[5] = "ab\\\"";
__u64 counter;
struct flags bss_flags;

SEC("xdp")
int kinds_prog(struct xdp_md *ctx)
{
	struct flags k = {};
	enum color c = RED;

	if (bpf_map_lookup_elem(&kinds_map, &k))
		counter++;
	if (bpf_map_lookup_elem(&pcpu, &c))
		counter++;
	if (fav == GREEN && greeting[0] == 'h' && tag[0] == 'a')
		bss_flags.a = 1;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
