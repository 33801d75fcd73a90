#!/usr/bin/env bash
# `bpfemu verify --kernel VERSION` against each kernel booted for real, on any set of objects
# (issue 23; not run by CI, which runs tests/kernels_vs_vms.rs on the corpus instead).
#
#   scripts/kernel_matrix.sh [--kernels 5.10,6.1,6.12,7.2] [--out DIR] [--bpfemu PATH]
#                            [--vm-results DIR] [--map-size NAME=N]... OBJECT_OR_DIR...
#
# 1. Each kernel judges the objects in its VM (scripts/kernel_vms.sh: libbpf 1.7 loading each
#    program on its own, and the kernel's BTF saved), unless --vm-results names a directory
#    that already holds VERSION.jsonl (and VERSION.btf) from an earlier run.
# 2. bpfemu judges them as that kernel, with that kernel's BTF (BPFEMU_KERNELS pointed at a
#    cache made from the saved BTF): `bpfemu verify --kernel VERSION --json`.
# 3. scripts/kernel_matrix.py compares: verdicts, false accepts and rejects, the final error
#    line where both reject, the processed count where both accept, and the differences not
#    explained by a `kernel/VERSION/...` entry of verifier/probes/KNOWN_DIFFERENCES. Writes
#    OUT/VERSION.summary.txt and OUT/VERSION.differences.txt and prints the summaries.
# --map-size NAME=N sizes a map declared with max_entries 0 (xdp-tools size theirs at run
# time) on both sides, in the VM's loader and in bpfemu.
#
# Exit: 0 when every comparison ran (whatever the findings), 1 when a step failed, 2 on usage.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KERNELS=5.10,6.1,6.12,7.2
OUT=kernel-matrix
BPFEMU=${BPFEMU:-$ROOT/target/release/bpfemu}
VM_RESULTS=""
usage() { awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 2; }
objects=()
map_sizes=()
while [ $# -gt 0 ]; do
	case $1 in
	--kernels) [ $# -ge 2 ] || usage; KERNELS=$2; shift 2 ;;
	--out) [ $# -ge 2 ] || usage; OUT=$2; shift 2 ;;
	--bpfemu) [ $# -ge 2 ] || usage; BPFEMU=$2; shift 2 ;;
	--vm-results) [ $# -ge 2 ] || usage; VM_RESULTS=$2; shift 2 ;;
	--map-size) [ $# -ge 2 ] || usage; map_sizes+=(--map-size "$2"); shift 2 ;;
	-h | --help) usage ;;
	-*) echo "kernel_matrix.sh: unknown option $1" >&2; usage ;;
	*) objects+=("$1"); shift ;;
	esac
done
[ ${#objects[@]} -gt 0 ] || usage
[ -x "$BPFEMU" ] || { echo "kernel_matrix.sh: $BPFEMU is not built (cargo build --release)" >&2; exit 1; }
mkdir -p "$OUT" || exit 1
if [ -z "$VM_RESULTS" ]; then
	VM_RESULTS=$OUT/vm
	"$ROOT/scripts/kernel_vms.sh" --kernels "$KERNELS" --out "$VM_RESULTS" --btf \
		${map_sizes[@]+"${map_sizes[@]}"} "${objects[@]}" || exit 1
fi
cache=$(mktemp -d) || exit 1
trap 'rm -rf "$cache"' EXIT
for version in ${KERNELS//,/ }; do
	vm=$VM_RESULTS/$version.jsonl
	[ -f "$vm" ] || { echo "kernel_matrix.sh: $vm is missing" >&2; exit 1; }
	if [ -f "$VM_RESULTS/$version.btf" ]; then
		mkdir -p "$cache/$version" && cp "$VM_RESULTS/$version.btf" "$cache/$version/vmlinux.btf"
	fi
	BPFEMU_KERNELS=$cache "$BPFEMU" verify --kernel "$version" --json \
		${map_sizes[@]+"${map_sizes[@]}"} "${objects[@]}" \
		>"$OUT/bpfemu-$version.json" 2>"$OUT/bpfemu-$version.stderr"
	[ -s "$OUT/bpfemu-$version.json" ] || { echo "kernel_matrix.sh: bpfemu gave no report for $version (see $OUT/bpfemu-$version.stderr)" >&2; exit 1; }
	python3 "$ROOT/scripts/kernel_matrix.py" compare "$version" "$vm" "$OUT/bpfemu-$version.json" "$OUT" || exit 1
done
