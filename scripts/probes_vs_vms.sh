#!/usr/bin/env bash
# bpfemu's own probe corpus (verifier/probes/*.probes, about 1,000 programs written for 6.18)
# judged by the other kernels booted under QEMU and by `probe_verdicts --bpfemu VERSION`: the
# check that found 6.1's false greens of 2026-11-29 (linked scalars, tnum multiplication,
# fills over var-offset writes, sk lookups' sizes, dynptrs). Not run by CI (8 minutes of TCG a
# kernel); each kernel's differences are listed, not yet held to KNOWN_DIFFERENCES.
#
#   scripts/probes_vs_vms.sh [--kernels 5.10,6.1,6.12,7.2] [--out DIR] [--vm-results DIR]
#
# Writes OUT/vm/VERSION.jsonl (the kernel's verdicts; --vm-results reuses an earlier run's),
# OUT/bpfemu-VERSION.jsonl, OUT/VERSION.summary.txt and OUT/VERSION.differences.txt, and prints
# the summaries. Exit: 0 when every comparison ran, 1 when a step failed, 2 on usage.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KERNELS=5.10,6.1,6.12,7.2
OUT=probes-matrix
VM_RESULTS=""
usage() { awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 2; }
die() { echo "probes_vs_vms.sh: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
	case $1 in
	--kernels) [ $# -ge 2 ] || usage; KERNELS=$2; shift 2 ;;
	--out) [ $# -ge 2 ] || usage; OUT=$2; shift 2 ;;
	--vm-results) [ $# -ge 2 ] || usage; VM_RESULTS=$2; shift 2 ;;
	-h | --help) usage ;;
	*) echo "probes_vs_vms.sh: unknown argument $1" >&2; usage ;;
	esac
done
cd "$ROOT" || exit 1
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-1}
cargo build -q -p bpfemu-verifier --example probe_verdicts || die "building probe_verdicts failed"
JUDGE=$ROOT/target/debug/examples/probe_verdicts
mkdir -p "$OUT" || exit 1
if [ -z "$VM_RESULTS" ]; then
	cargo build -q -p bpfemu-vmkernel --bin bpfemu-kernel-vms || die "building bpfemu-kernel-vms failed"
	VM_RESULTS=$OUT/vm
	"$ROOT/target/debug/bpfemu-kernel-vms" --kernels "$KERNELS" --judge "$JUDGE" --timeout 1800 \
		--out "$VM_RESULTS" verifier/probes/*.probes || exit 1
fi
for version in ${KERNELS//,/ }; do
	[ -f "$VM_RESULTS/$version.jsonl" ] || die "$VM_RESULTS/$version.jsonl is missing"
	# Exit 2 with verdicts written: files naming a kfunc this kernel lacks were skipped, as
	# the judge in its VM skips them.
	status=0
	"$JUDGE" --bpfemu "$version" verifier/probes/*.probes >"$OUT/bpfemu-$version.jsonl" ||
		status=$?
	if [ "$status" != 0 ] && { [ "$status" != 2 ] || [ ! -s "$OUT/bpfemu-$version.jsonl" ]; }; then
		die "bpfemu's judge failed"
	fi
	python3 "$ROOT/scripts/kernel_matrix.py" compare-probes "$version" \
		"$VM_RESULTS/$version.jsonl" "$OUT/bpfemu-$version.jsonl" "$OUT" || exit 1
done
