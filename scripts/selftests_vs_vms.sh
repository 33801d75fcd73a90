#!/usr/bin/env bash
# Each kernel's own verifier selftests, judged by that kernel and by `bpfemu --kernel VERSION`
# (issue 23). CI runs it (scripts/test.sh) on a sample; the full tables are the same command
# with --pattern 'verifier_*.c'.
#
#   scripts/selftests_vs_vms.sh [--kernels 5.10,6.1,6.12,6.18,7.2] [--pattern GLOB]
#                               [--cache DIR] [--out DIR] [--bpfemu PATH]
#
# For each kernel, from Debian's linux-source-VERSION (`apt-get download` through the suites
# of scripts/kernel_apt_sources.sh; only tools/ is unpacked, into the cache, once):
#   5.10, 6.1   every test of the raw instruction tables (tools/testing/selftests/bpf/verifier/
#               *.c) that makes sense as XDP, through scripts/rawtable_vs_vms.sh;
#   6.12, 7.2   progs/GLOB (default verifier_s*.c: spills and fills, scalar ids, search
#               pruning, stack pointers, subprogram precision, sub-registers, signed division,
#               sockets; about 330 and 400 programs) built as XDP by
#               ../shared/kernel-selftests/build.sh and judged by scripts/kernel_matrix.sh;
#   6.18        the running kernel, when it is a 6.18 (linux-source-7.2 holds its tests), with
#               libbpf 1.7's judge on the host, no VM.
# A kernel's VM boots once for all its programs. The comparison (scripts/kernel_matrix.py)
# marks each difference of verdict, final error line or processed count known when
# verifier/probes/KNOWN_DIFFERENCES explains it.
#
# --cache   sources and builds [default ~/.cache/bpfemu/selftests]; never the repository
# --out     results: OUT/VERSION.summary.txt, OUT/VERSION.differences.txt [default OUT=CACHE/results]
# --bpfemu  the binary judged [default target/debug/bpfemu]
# Needs qemu-system-x86, clang-19, llvm-objcopy-19, bpftool, python3, root for 6.18.
#
# Exit: 0 when every difference is explained, 1 when one is not or a step failed, 2 on usage,
# 3 when apt could not fetch a source package or bpftool (scripts/test.sh then skips, unless
# BPFEMU_REQUIRE_KERNEL=1).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KERNELS=5.10,6.1,6.12,6.18,7.2
PATTERN='verifier_s*.c'
CACHE=${BPFEMU_SELFTESTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bpfemu/selftests}
OUT=""
BPFEMU=$ROOT/target/debug/bpfemu
SHARED=${SHARED:-$ROOT/../shared}
usage() { awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 2; }
die() { echo "selftests_vs_vms.sh: $*" >&2; exit 1; }
unavailable() { echo "selftests_vs_vms.sh: $*" >&2; exit 3; }
while [ $# -gt 0 ]; do
	case $1 in
	--kernels) [ $# -ge 2 ] || usage; KERNELS=$2; shift 2 ;;
	--pattern) [ $# -ge 2 ] || usage; PATTERN=$2; shift 2 ;;
	--cache) [ $# -ge 2 ] || usage; CACHE=$2; shift 2 ;;
	--out) [ $# -ge 2 ] || usage; OUT=$2; shift 2 ;;
	--bpfemu) [ $# -ge 2 ] || usage; BPFEMU=$2; shift 2 ;;
	-h | --help) usage ;;
	*) echo "selftests_vs_vms.sh: unknown argument $1" >&2; usage ;;
	esac
done
OUT=${OUT:-$CACHE/results}
for version in ${KERNELS//,/ }; do
	case $version in
	5.10 | 6.1 | 6.12 | 6.18 | 7.2) ;;
	*) echo "selftests_vs_vms.sh: no selftests for kernel '$version' (5.10, 6.1, 6.12, 6.18, 7.2)" >&2; exit 2 ;;
	esac
done
[[ $CACHE/ == "$ROOT"/* ]] && die "the cache $CACHE is inside the repository; choose another (--cache)"
[ -x "$BPFEMU" ] || die "$BPFEMU is not built (cargo build, or --bpfemu PATH)"
mkdir -p "$CACHE/src" "$CACHE/debs" "$OUT" || die "cannot create $CACHE or $OUT"
OUT=$(cd "$OUT" && pwd)
BPFEMU=$(cd "$(dirname "$BPFEMU")" && pwd)/$(basename "$BPFEMU")

# The Debian suite of each kernel's linux-source package (as vmkernel/src/images.rs).
suite_of() {
	case $1 in
	5.10) echo bullseye ;;
	6.1) echo bookworm ;;
	6.12) echo bookworm-backports ;;
	7.2) echo forky ;;
	esac
}

# linux-source-VERSION's tools/ under CACHE/src, downloaded and unpacked once; prints the tree.
source_tree() {
	local version=$1 tree=$CACHE/src/linux-source-$1
	if [ ! -f "$tree/.unpacked" ]; then
		local deb
		deb=$(ls "$CACHE"/debs/linux-source-"${version}"_*.deb 2>/dev/null | head -1)
		if [ -z "$deb" ]; then
			(cd "$CACHE/debs" && apt-get download -q "linux-source-$version/$(suite_of "$version")") >&2 ||
				unavailable "apt-get download linux-source-$version failed (scripts/kernel_apt_sources.sh adds its suite)"
			deb=$(ls "$CACHE"/debs/linux-source-"${version}"_*.deb | head -1)
		fi
		rm -rf "$tree"
		dpkg-deb --fsys-tarfile "$deb" | tar -xO "./usr/src/linux-source-$version.tar.xz" |
			tar -xJ -C "$CACHE/src" --wildcards "linux-source-$version/tools/*" \
				"linux-source-$version/Makefile" ||
			die "unpacking $deb failed"
		# build.sh generates bpf_helper_defs.h with the tree's own scripts/bpf_doc.py when
		# there is one (5.10 has none); a second pass, since a missing name fails the first.
		dpkg-deb --fsys-tarfile "$deb" | tar -xO "./usr/src/linux-source-$version.tar.xz" |
			tar -xJ -C "$CACHE/src" "linux-source-$version/scripts/bpf_doc.py" 2>/dev/null
		touch "$tree/.unpacked"
	fi
	echo "$tree"
}

# A bpftool of 7.4 or later (its vmlinux.h declares the kfuncs 7.2's tests call): the one on
# PATH, else bookworm-backports' package unpacked into the cache; prints its path.
kfunc_bpftool() {
	local tool
	for tool in "${BPFTOOL:-}" "$(command -v bpftool)" "$CACHE/bpftool/usr/sbin/bpftool"; do
		[ -n "$tool" ] && [ -x "$tool" ] || continue
		"$tool" version 2>/dev/null | awk 'NR == 1 { sub(/^v/, "", $2); split($2, v, ".");
			exit !(v[1] > 7 || (v[1] == 7 && v[2] >= 4)) }' && { echo "$tool"; return; }
	done
	rm -rf "$CACHE/bpftool" "$CACHE"/debs/bpftool_*.deb
	(cd "$CACHE/debs" && apt-get download -q bpftool/bookworm-backports) >&2 &&
		dpkg-deb -x "$CACHE"/debs/bpftool_*.deb "$CACHE/bpftool" ||
		unavailable "no bpftool 7.4 or later, and bookworm-backports' could not be fetched"
	echo "$CACHE/bpftool/usr/sbin/bpftool"
}

# progs/PATTERN of a tree built as XDP into CACHE/build-VERSION-KEY (KEY: the pattern), once;
# a file that does not build fails the run (the sample would shrink unseen).
built_selftests() {
	local version=$1 tree=$2 key
	key=$(printf '%s' "$PATTERN" | tr -c 'A-Za-z0-9_' '_')
	local build=$CACHE/build-$version-$key
	if [ ! -f "$build/build.tsv" ]; then
		rm -rf "$build"
		local bpftool
		bpftool=$(kfunc_bpftool) || exit $?
		BPFTOOL=$bpftool PATTERN=$PATTERN JOBS=$(nproc) bash "$SHARED/kernel-selftests/build.sh" \
			"$tree" "$build" >&2 || die "building $tree's selftests failed (see $build/work)"
	fi
	local failed
	failed=$(awk -F'\t' 'NR > 1 && $2 != "ok" { print $1 }' "$build/build.tsv")
	[ -z "$failed" ] || die "$version: these selftests did not build (see $build/work/log): $failed"
	echo "$build"
}

# The running kernel's verdicts in the VM results' shape (libbpf_verdicts on the host).
host_verdicts() {
	local objects=$1 out=$2 judge=$ROOT/target/debug/examples/libbpf_verdicts
	[ -x "$judge" ] || die "$judge is not built (cargo build -p bpfemu-conformance --example libbpf_verdicts)"
	: >"$out"
	for obj in "$objects"/*.o; do
		"$judge" "$obj" | python3 -c '
import json, sys
for line in sys.stdin:
    row = json.loads(line)
    row["object"] = sys.argv[1]
    print(json.dumps(row))' "$obj" >>"$out" || die "the host judge failed on $obj"
	done
}

failed=0
for version in ${KERNELS//,/ }; do
	echo "== kernel $version" >&2
	case $version in
	5.10 | 6.1)
		tree=$(source_tree "$version") || exit $?
		"$ROOT/scripts/rawtable_vs_vms.sh" --kernels "$version" --ksrc "$CACHE/src" \
			--out "$OUT/rawtable" || die "the raw tables of $version were not compared"
		differences=$OUT/rawtable/$version.differences.txt
		;;
	6.12 | 7.2)
		tree=$(source_tree "$version") || exit $?
		build=$(built_selftests "$version" "$tree") || exit $?
		"$ROOT/scripts/kernel_matrix.sh" --kernels "$version" --out "$OUT/selftests-$version" \
			--bpfemu "$BPFEMU" "$build/obj" || die "the selftests of $version were not compared"
		differences=$OUT/selftests-$version/$version.differences.txt
		;;
	6.18)
		case $(uname -r) in
		6.18.*) ;;
		*) echo "selftests_vs_vms.sh: the running kernel is $(uname -r), not a 6.18: 6.18 skipped" >&2; continue ;;
		esac
		tree=$(source_tree 7.2) || exit $?
		build=$(built_selftests 7.2 "$tree") || exit $?
		mkdir -p "$OUT/selftests-6.18/vm"
		host_verdicts "$build/obj" "$OUT/selftests-6.18/vm/6.18.jsonl"
		"$ROOT/scripts/kernel_matrix.sh" --kernels 6.18 --out "$OUT/selftests-6.18" \
			--vm-results "$OUT/selftests-6.18/vm" --bpfemu "$BPFEMU" "$build/obj" ||
			die "the selftests of 6.18 were not compared"
		differences=$OUT/selftests-6.18/6.18.differences.txt
		;;
	esac
	if grep -q '^UNEXPLAINED' "$differences"; then
		echo "selftests_vs_vms.sh: kernel $version: differences KNOWN_DIFFERENCES does not explain:" >&2
		grep '^UNEXPLAINED' "$differences" >&2
		failed=1
	fi
done
exit $failed
