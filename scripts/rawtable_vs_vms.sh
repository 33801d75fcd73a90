#!/usr/bin/env bash
# 5.10's and 6.1's own verifier selftests, the raw instruction tables of
# tools/testing/selftests/bpf/verifier/*.c, as the spec of `--kernel 5.10/6.1` (issue 23; not
# run by CI): each table test that makes sense as XDP becomes a probe
# (scripts/rawtable_probes.py), the kernel judges the probes booted in a VM
# (examples/probe_verdicts in the guest of bpfemu-kernel-vms), bpfemu judges them as that kernel
# (probe_verdicts --bpfemu VERSION), and scripts/kernel_matrix.py compares.
#
#   scripts/rawtable_vs_vms.sh [--kernels 5.10,6.1] [--out DIR] [--ksrc DIR]
#                              [--tools-include DIR] [--vm-results DIR] [--timeout SEC]
#
# --ksrc          where linux-source-VERSION trees are unpacked [default /tmp/ksrc]
# --tools-include a tools/include for the instruction macros when a tree has none (Debian's
#                 linux-source-5.10 and -6.1 as unpacked here lack tools/include) [default: the
#                 tree's own, else the first KSRC/linux-source-*/tools/include found]
# --vm-results    a directory holding VERSION.jsonl from an earlier run: no VM is booted
# --timeout       limit of one kernel's VM [default 3600]
#
# Writes OUT/VERSION/probes/*.probes (and dropped.tsv: each test left out and why),
# OUT/vm/VERSION.jsonl (the kernel's verdicts), OUT/bpfemu-VERSION.jsonl, and
# OUT/VERSION.summary.txt and OUT/VERSION.differences.txt, each difference marked known when
# verifier/probes/KNOWN_DIFFERENCES has `kernel/VERSION/rawtable/FILE/PROBE  reason`; prints
# the kept and dropped counts and the summaries.
#
# Exit: 0 when every comparison ran (whatever the findings), 1 when a step failed, 2 on usage.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KERNELS=5.10,6.1
OUT=rawtable-matrix
KSRC=/tmp/ksrc
TOOLS_INCLUDE=""
VM_RESULTS=""
TIMEOUT=3600
usage() { awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 2; }
die() { echo "rawtable_vs_vms.sh: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
	case $1 in
	--kernels) [ $# -ge 2 ] || usage; KERNELS=$2; shift 2 ;;
	--out) [ $# -ge 2 ] || usage; OUT=$2; shift 2 ;;
	--ksrc) [ $# -ge 2 ] || usage; KSRC=$2; shift 2 ;;
	--tools-include) [ $# -ge 2 ] || usage; TOOLS_INCLUDE=$2; shift 2 ;;
	--vm-results) [ $# -ge 2 ] || usage; VM_RESULTS=$2; shift 2 ;;
	--timeout) [ $# -ge 2 ] || usage; TIMEOUT=$2; shift 2 ;;
	-h | --help) usage ;;
	*) echo "rawtable_vs_vms.sh: unknown argument $1" >&2; usage ;;
	esac
done

tools_include_for() {
	local tree=$1
	if [ -n "$TOOLS_INCLUDE" ]; then echo "$TOOLS_INCLUDE"; return; fi
	if [ -f "$tree/tools/include/linux/filter.h" ]; then echo "$tree/tools/include"; return; fi
	for other in "$KSRC"/linux-source-*/tools/include; do
		[ -f "$other/linux/filter.h" ] && { echo "$other"; return; }
	done
	die "no tools/include with linux/filter.h under $KSRC (give --tools-include)"
}

cd "$ROOT" || exit 1
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-1}
cargo build -q -p bpfemu-verifier --example probe_verdicts || die "building probe_verdicts failed"
JUDGE=$ROOT/target/debug/examples/probe_verdicts
mkdir -p "$OUT" || exit 1
if [ -z "$VM_RESULTS" ]; then
	cargo build -q -p bpfemu-vmkernel --bin bpfemu-kernel-vms || die "building bpfemu-kernel-vms failed"
	VM_RESULTS=$OUT/vm
fi
for version in ${KERNELS//,/ }; do
	tree=$KSRC/linux-source-$version
	[ -d "$tree" ] || die "$tree is missing (unpack Debian's linux-source-$version there)"
	include=$(tools_include_for "$tree") || exit 1
	probes=$OUT/$version/probes
	python3 "$ROOT/scripts/rawtable_probes.py" "$tree" "$probes" "$include" || exit 1
	if [ "$VM_RESULTS" = "$OUT/vm" ]; then
		"$ROOT/target/debug/bpfemu-kernel-vms" --kernels "$version" --judge "$JUDGE" \
			--out "$VM_RESULTS" --timeout "$TIMEOUT" "$probes"/*.probes || exit 1
	fi
	[ -f "$VM_RESULTS/$version.jsonl" ] || die "$VM_RESULTS/$version.jsonl is missing"
	"$JUDGE" --bpfemu "$version" "$probes"/*.probes >"$OUT/bpfemu-$version.jsonl" ||
		die "bpfemu's judge failed on $probes"
	python3 "$ROOT/scripts/kernel_matrix.py" compare-probes "$version" \
		"$VM_RESULTS/$version.jsonl" "$OUT/bpfemu-$version.jsonl" "$OUT" || exit 1
done
