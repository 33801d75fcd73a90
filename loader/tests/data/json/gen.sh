#!/bin/sh
# Regenerates the fixtures of loader/tests/btf_json.rs: what `bpftool -j map dump` prints for
# known bytes, so the test can compare bpfemu's BTF JSON with bpftool's without a kernel.
#
# Needs root, a bpf() that works, clang-19 and bpftool (recorded with bpftool v7.1.0 / libbpf
# 1.1 on Linux 6.18). Run from anywhere: sudo loader/tests/data/json/gen.sh
#
# For each object it mounts a private bpffs, `bpftool prog loadall OBJ DIR/p type xdp pinmaps
# DIR/m`, writes entries with `bpftool map update pinned DIR/m/MAP key hex .. value hex ..`
# (per-CPU maps: bpftool copies the value to every possible CPU), and saves
# `bpftool -j map dump pinned DIR/m/MAP` as OBJ@MAP.json (MAP: the pin name, i.e. libbpf's map
# name with dots turned into underscores). The bytes are in the dump itself (bpftool prints the
# raw "key"/"value" hex next to "formatted"), so no separate byte files are kept. Pins are
# removed and the bpffs unmounted on exit.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
CORPUS=$HERE/../../../../examples/xdp/build
FS=/tmp/bpffs-json
cd "$HERE"

clang-19 -O2 -g -target bpf -mcpu=v3 -I/usr/include/x86_64-linux-gnu \
	-fdebug-prefix-map="$HERE"=. -fdebug-compilation-dir=. -c kinds.c -o kinds.o

cleanup() {
	for d in "$FS"/*/; do [ -d "$d" ] && rm -rf "$d"; done
	umount "$FS" 2>/dev/null || true
	rmdir "$FS" 2>/dev/null || true
}
trap cleanup EXIT
mkdir -p "$FS"
mount -t bpf bpf "$FS"

# load OBJ_PATH STEM: loads the object and pins its maps under $FS/STEM/m.
# (bpffs refuses names with dots, hence the directory name without them.)
dir() { echo "$FS/$(echo "$1" | tr . _)"; }
load() {
	mkdir -p "$(dir "$2")"
	bpftool prog loadall "$1" "$(dir "$2")/p" type xdp pinmaps "$(dir "$2")/m" 2>/dev/null
}

# put STEM MAP KEY_HEX VALUE_HEX: one update, hex given as contiguous pairs ("0a0b..").
put() {
	bpftool map update pinned "$(dir "$1")/m/$2" \
		key hex $(echo "$3" | sed 's/../& /g') value hex $(echo "$4" | sed 's/../& /g')
}

# dump STEM MAP: records bpftool's JSON dump of the map.
dump() {
	bpftool -j map dump pinned "$(dir "$1")/m/$2" > "$1@$2.json"
}

# pattern N SEED: N bytes of a fixed pseudo-random sequence (hex).
pattern() {
	python3 -c 'import random,sys; r=random.Random(int(sys.argv[2])); print(bytes(r.randrange(256) for _ in range(int(sys.argv[1]))).hex())' "$1" "$2"
}

# kinds.o: every kind the dumper formats.
load kinds.o kinds
# struct kinds (176 bytes), laid out field by field (see kinds.c / bpftool btf dump file kinds.o).
KV1=$(python3 - <<'PY'
import struct
b = bytearray(176)
b[0:12] = b"eth0\0\x99\x98xyz\0\0"          # string; bytes after the NUL are not shown
b[12:16] = b"\x01\x02ab"                    # not a string: a list of numbers
b[16:19] = b"\xff\x00\x7f"                  # unsigned char[3]
b[19] = 0x80                                # signed char -128
b[20] = ord("A")                            # char (clang: SIGNED, named char): a number
struct.pack_into("<h", b, 22, -2)
struct.pack_into("<H", b, 24, 65535)
struct.pack_into("<i", b, 28, -123456)
struct.pack_into("<q", b, 32, -(1 << 62))
struct.pack_into("<Q", b, 40, (1 << 64) - 1)
b[48] = 1                                   # _Bool
struct.pack_into("<i", b, 52, -3)           # enum color BLUE
struct.pack_into("<Q", b, 56, 0xfedcba9876543210)  # enum64 HUGE
b[64] = 200                                 # enum small8 S200
b[72:88] = bytes.fromhex("fd4b" "0300" "0000" "0000" "ffffffffff00" "0100" "0000")[:16]
struct.pack_into("<Q", b, 88, 0xffff888812345678)  # pointer
b[96:112] = b"\xfe" + b"\xff" * 15          # __int128 -2
struct.pack_into("<QQ", b, 112, 0x1234, 0)  # unsigned __int128
struct.pack_into("<I", b, 128, 0x0100007f)  # anonymous union
struct.pack_into("<HH", b, 144, 8080, 7)    # named anonymous-typed struct
for i in range(6):
    struct.pack_into("<I", b, 148 + 4 * i, i * 1000)
print(b.hex())
PY
)
put kinds kinds_map "$(pattern 16 1)" "$KV1"
put kinds kinds_map "$(pattern 16 2)" "$(pattern 176 3)"
put kinds kinds_map "$(pattern 16 4)" "$(pattern 176 5)"
put kinds kinds_map 00000000000000000000000000000000 "$(python3 -c 'print((b"0123456789ab" + bytes(164)).hex())')"
dump kinds kinds_map
put kinds pcpu 02000000 "$(pattern 16 6)"
put kinds pcpu 07000000 "$(pattern 16 7)"
dump kinds pcpu
put kinds kinds_bss 00000000 "$(pattern 24 8)"
dump kinds kinds_bss
dump kinds kinds_data
dump kinds kinds_rodata

# firewall: packed 37-byte 5-tuple key, .rodata bool, per-CPU counters.
load "$CORPUS/firewall.v3.o" firewall.v3
put firewall.v3 acl "$(pattern 37 10)" 0100000007000000
put firewall.v3 acl 00000000000000000000ffff0a00000100000000000000000000ffff0a000002000001bb06 0000000002000000
dump firewall.v3 acl
put firewall.v3 fw_stats 01000000 2a00000000000000
dump firewall.v3 fw_stats
dump firewall.v3 firewall_rodata

# l4lb: structs with nested byte arrays and padding fields.
load "$CORPUS/l4lb.v3.o" l4lb.v3
put l4lb.v3 vip_map 0a00000a50000600 0100000003000000
put l4lb.v3 vip_map "$(pattern 8 11)" "$(pattern 8 12)"
dump l4lb.v3 vip_map
put l4lb.v3 conn_table "$(pattern 16 13)" "$(pattern 16 14)"
dump l4lb.v3 conn_table
put l4lb.v3 ctl_array 00000000 "$(pattern 12 15)"
dump l4lb.v3 ctl_array
put l4lb.v3 lb_stats 02000000 ffffffffffffffff
dump l4lb.v3 lb_stats

# globals: .bss / .data / .rodata as DATASEC objects.
load "$CORPUS/globals.v3.o" globals.v3
put globals.v3 globals_bss 00000000 "$(pattern 28 16)"
dump globals.v3 globals_bss
dump globals.v3 globals_data
dump globals.v3 globals_rodata

# p4_parser: a named union of anonymous structs.
load "$CORPUS/p4_parser.v3.o" p4_parser.v3
put p4_parser.v3 fwd_table "$(pattern 8 17)" "$(pattern 16 18)"
dump p4_parser.v3 fwd_table

# ddos_filter: LPM key with a byte array, a struct with a u64.
load "$CORPUS/ddos_filter.v3.o" ddos_filter.v3
put ddos_filter.v3 blocklist_v4 180000000a010200 "$(pattern 16 19)"
dump ddos_filter.v3 blocklist_v4

# spin_lock: a value holding struct bpf_spin_lock (bpftool writes it as zero).
load "$CORPUS/spin_lock.v3.o" spin_lock.v3
put spin_lock.v3 buckets 03000000 "00000000$(pattern 44 20)"
python3 - "$(dir spin_lock.v3)/m/buckets" > spin_lock.v3@buckets.json <<'PY'
# A 64-entry array: keep the dump as bpftool prints it but only entries 0..3.
import json, subprocess, sys
out = subprocess.run(["bpftool", "-j", "map", "dump", "pinned", sys.argv[1]],
                     check=True, capture_output=True, text=True).stdout
print(json.dumps(json.loads(out)[:4]))
PY
