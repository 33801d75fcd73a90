#!/bin/bash
# The real-world figures of issue 10 (not run by CI): fetches xdp-tools, xdp-tutorial and
# katran at pinned commits, builds their BPF programs with clang-19 and prints, per project:
#   objects bpfemu loads / objects libbpf loads (bpftool prog loadall),
#   replays equal to the kernel (every packet's verdict and bytes) / kernel-accepted XDP programs,
#   diffs with 0 mismatches (packets and maps) / diffs run,
# then the time and peak memory of the largest diff (/usr/bin/time -v).
#
# Needs root, bpftool, clang-19, git, python3 and a built bpfemu (BPFEMU, default
# target/debug/bpfemu). WORK (default /tmp/bpfemu-realworld) holds the sources and objects;
# MIRROR=DIR clones DIR/<owner>+<name>/repo instead of GitHub. CAPTURE is the pcap replayed.
# Maps the objects leave sized at run time get --map-size NAME=64, as a user gives them.
# Every line of detail goes to WORK/log.txt.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BPFEMU=${BPFEMU:-$ROOT/target/debug/bpfemu}
WORK=${WORK:-/tmp/bpfemu-realworld}
CAPTURE=${CAPTURE:-$ROOT/examples/pcap/normal.pcap}
CLANG=${CLANG:-clang-19}
PROJECTS="xdp-project/xdp-tools@f0b4ac21d71d84b8b5e78a03d999db09c86d0f25
xdp-project/xdp-tutorial@cc5e32b0e285c3d17203e879f56981b574e85f53
facebookincubator/katran@19f08fec82fb7b5fb14d935a80057bdc0897c8de"

XDP_TOOLS_LIBBPF=$(printf -- '-DHAVE_LIBBPF_%s ' PERF_BUFFER__CONSUME \
	BTF__LOAD_FROM_KERNEL_BY_ID BTF__TYPE_CNT BPF_OBJECT__NEXT_MAP BPF_OBJECT__NEXT_PROGRAM \
	BPF_PROGRAM__INSN_CNT BPF_PROGRAM__TYPE BPF_PROGRAM__FLAGS BPF_PROGRAM__EXPECTED_ATTACH_TYPE \
	BPF_MAP_CREATE PERF_BUFFER__NEW_RAW BPF_XDP_ATTACH BPF_MAP__SET_AUTOCREATE \
	BPF_PROG_TEST_RUN_OPTS BPF_XDP_QUERY)

mkdir -p "$WORK/src" "$WORK/obj" "$WORK/stub/gnu" "$WORK/stub/bpf/vmlinux"
LOG=$WORK/log.txt
: >"$LOG"
log() { echo "$*" >>"$LOG"; }

fetch() { # owner/name commit -> WORK/src/name
	local repo=$1 commit=$2 dir=$WORK/src/${1#*/}
	if [ ! -d "$dir/.git" ]; then
		local url=https://github.com/$repo
		[ -n "${MIRROR:-}" ] && url=$MIRROR/${repo/\//+}/repo
		git clone -q "$url" "$dir" || return 1
	fi
	git -C "$dir" -c advice.detachedHead=false checkout -q "$commit"
}

# Headers the sources expect from a full build: the running kernel's vmlinux.h, and glibc's
# 32-bit stubs header (BPF is a 64-bit target without them).
bpftool btf dump file /sys/kernel/btf/vmlinux format c >"$WORK/stub/vmlinux.h"
cp "$WORK/stub/vmlinux.h" "$WORK/stub/bpf/vmlinux/vmlinux.h"
: >"$WORK/stub/gnu/stubs-32.h"

build() { # project source -> WORK/obj/project/<dir>_<name>.o
	local project=$1 src=$2 dir out
	dir=$(dirname "$src")
	out=$WORK/obj/$project/$(echo "${src#"$WORK/src/$project/"}" | sed 's|/|_|g; s|\.c$|.o|')
	mkdir -p "$WORK/obj/$project"
	local base=$WORK/src/$project extra=()
	# xdp-tools' configure: C23 (bool) and the libbpf features a libbpf 1.x has.
	[ "$project" = xdp-tools ] && extra=(-std=gnu2x $XDP_TOOLS_LIBBPF)
	if "$CLANG" -O2 -g -target bpf -mcpu=v3 -D__TARGET_ARCH_x86 -w "${extra[@]}" \
		-I"$dir" -I"$base/headers" -I"$base/lib/util" -I"$base/common" -I"$base" \
		-I"$base/katran/lib/bpf" -I"$base/katran/lib/linux_includes" -I"$base/katran" \
		-I"$WORK/stub" -I/usr/include/x86_64-linux-gnu -c "$src" -o "$out" 2>>"$LOG"; then
		echo "$out"
	else
		log "BUILD FAILED $src"
	fi
}

sources() {
	case $1 in
	xdp-tools) find "$WORK/src/xdp-tools" -name '*.bpf.c' -not -path '*/tests/*' -not -path '*/libbpf/*' ;;
	xdp-tutorial) find "$WORK/src/xdp-tutorial" -name '*_kern.c' -not -path '*/libbpf/*' ;;
	katran) find "$WORK/src/katran/katran" -path '*bpf*' -name '*.c' ;;
	esac | sort
}

# The --map-size options an object needs (maps sized at run time), from bpfemu's message.
map_sizes() {
	"$BPFEMU" inspect "$1" 2>&1 >/dev/null | grep -o -- '--map-size [^ ]*=N' | sed 's/=N$/=64/' | tr '\n' ' '
}

mkdir -p /sys/fs/bpf 2>/dev/null
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
largest_obj="" largest_prog="" largest_sizes="" largest_insns=0
printf '%-13s %8s %15s %22s %18s\n' project built "bpfemu/libbpf" "replay=kernel/accepted" "diff clean/run"
for entry in $PROJECTS; do
	repo=${entry%@*} commit=${entry#*@} project=${repo#*/}
	fetch "$repo" "$commit" || { echo "$project: cannot fetch"; continue; }
	built=0 ours=0 libbpf=0 accepted=0 replay_equal=0 diffs=0 clean=0
	total=$(sources "$project" | wc -l)
	for src in $(sources "$project"); do
		obj=$(build "$project" "$src") || continue
		[ -n "$obj" ] || continue
		built=$((built + 1))
		pin=/sys/fs/bpf/bpfemu-realworld-$$
		if bpftool prog loadall "$obj" "$pin" >>"$LOG" 2>&1; then
			libbpf=$((libbpf + 1))
		else
			log "LIBBPF REFUSES $obj"
		fi
		rm -rf "$pin"
		sizes=$(map_sizes "$obj")
		# shellcheck disable=SC2086
		if ! info=$("$BPFEMU" inspect "$obj" $sizes 2>&1); then
			log "BPFEMU REFUSES $obj: $(echo "$info" | head -1)"
			continue
		fi
		ours=$((ours + 1))
		for prog in $(echo "$info" | awk '/^programs:/{f=1;next} /^maps:/{f=0} f && /BPF_PROG_TYPE_XDP/{print $1}'); do
			insns=$(echo "$info" | awk -v p="$prog" '$1==p {for (i=1;i<=NF;i++) if ($i == "insns") print $(i+1)}' | head -1)
			# shellcheck disable=SC2086
			json=$(timeout 600 "$BPFEMU" diff "$obj" "$CAPTURE" --prog "$prog" $sizes --json 2>"$WORK/diff.err")
			rc=$?
			if grep -q "the kernel rejects\|kernel refuses\|the verifier rejects" "$WORK/diff.err"; then
				log "REJECTED (kernel, or bpfemu's verifier first) $obj $prog"
				continue
			fi
			accepted=$((accepted + 1))
			diffs=$((diffs + 1))
			packets=$(echo "$json" | python3 -c 'import json,sys
try: print(json.load(sys.stdin)["summary"]["packet_mismatches"])
except Exception: print("error")')
			[ "$packets" = 0 ] && replay_equal=$((replay_equal + 1))
			if [ $rc = 0 ]; then
				clean=$((clean + 1))
			else
				log "DIFF rc=$rc $obj $prog: packet mismatches $packets: $(head -c 300 "$WORK/diff.err")"
			fi
			if [ "${insns:-0}" -gt "$largest_insns" ] 2>/dev/null; then
				largest_insns=$insns largest_obj=$obj largest_prog=$prog largest_sizes=$sizes
			fi
		done
	done
	printf '%-13s %8s %15s %22s %18s\n' "$project" "$built/$total" "$ours/$libbpf" \
		"$replay_equal/$accepted" "$clean/$diffs"
done
if [ -n "$largest_obj" ]; then
	# shellcheck disable=SC2086
	/usr/bin/time -v "$BPFEMU" diff "$largest_obj" "$CAPTURE" --prog "$largest_prog" \
		$largest_sizes >/dev/null 2>"$WORK/time.txt"
	wall=$(grep 'Elapsed (wall clock)' "$WORK/time.txt" | awk '{print $NF}')
	peak=$(grep 'Maximum resident' "$WORK/time.txt" | awk '{print $NF}')
	echo "largest diff: $(basename "$largest_obj") $largest_prog ($largest_insns insns): $wall wall, $((peak / 1024)) MB peak"
fi
echo "details: $LOG"
