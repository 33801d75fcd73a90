#!/bin/sh
# Load every program of every committed object into the running kernel with
# bpftool, one object at a time, and print an acceptance matrix.
#
#   sudo ./verify.sh            # all objects in build/
#   sudo ./verify.sh reflector  # just build/reflector.v*.o
#
# Needs root, bpftool and a kernel with bpf().  A private bpffs is mounted at
# a temporary directory and removed again on exit, so nothing stays pinned.
# Objects listed in EXPECT_FAIL are expected to be rejected (legacy ELF
# layouts that libbpf 1.x refuses); they are reported but do not fail the run.
set -u

cd "$(dirname "$0")"
EXPECT_FAIL=${EXPECT_FAIL:-"legacy_maps"}
BPFFS=$(mktemp -d /tmp/bpfemu-bpffs.XXXXXX)
LOGDIR=${LOGDIR:-/tmp/bpfemu-verify-logs}	# verifier logs of failures only
mkdir -p "$LOGDIR"

cleanup() {
	rm -rf "$BPFFS"/* 2>/dev/null
	umount "$BPFFS" 2>/dev/null
	rmdir "$BPFFS" 2>/dev/null
}
trap cleanup EXIT INT TERM
mount -t bpf bpf "$BPFFS" || exit 1

status=0
names=$(ls build/*.o | sed 's#build/##; s#\.v[0-9]\.o$##' | sort -u)
[ $# -gt 0 ] && names="$*"
printf '%-16s %-6s %-6s %-6s\n' program v2 v3 v4
for name in $names; do
	line=$(printf '%-16s' "$name")
	for cpu in v2 v3 v4; do
		obj=build/$name.$cpu.o
		pin=$BPFFS/${name}_$cpu  # bpffs refuses names containing dots
		log=$LOGDIR/$name.$cpu.log
		if bpftool -d prog loadall "$obj" "$pin" type xdp >"$log" 2>&1; then
			n=$(ls "$pin" | wc -l)
			res="ok($n)"
			rm -f "$log"
		else
			res=FAIL
			case " $EXPECT_FAIL " in
			*" $name "*) res=xfail ;;
			*) status=1 ;;
			esac
		fi
		rm -rf "$pin"
		line="$line $(printf '%-6s' "$res")"
	done
	echo "$line"
done
[ $status -ne 0 ] && echo "verifier logs of failures: $LOGDIR" >&2
exit $status
