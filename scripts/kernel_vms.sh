#!/usr/bin/env bash
# BPF objects judged by other kernels booted for real (issue 23's ground truth): for each
# kernel named, one QEMU VM (TCG: no KVM, no root needed for the VM itself) boots Debian's
# image with an initramfs carrying libbpf 1.7's judge (conformance/examples/libbpf_verdicts.rs)
# and every object, loads each program on its own, and writes
#
#   OUT/VERSION.jsonl   one line per program: object, program, accepted, error (the log's last
#                       meaningful line), processed_insns
#   OUT/times.tsv       per kernel: release, objects, programs, the VM's wall seconds, boots
#   OUT/VERSION.btf     with --btf: the kernel's /sys/kernel/btf/vmlinux (adds ~25 s a kernel)
#
#   scripts/kernel_vms.sh [--kernels 5.10,6.1,6.12,7.2] [--out DIR] [--timeout SEC] [--btf]
#                         [--map-size NAME=N]...
#                         OBJECT_OR_DIR...      (default: examples/xdp/build, 60 objects)
#
# The images come from apt (scripts/kernel_apt_sources.sh adds the suites) into the cache
# $BPFEMU_KERNELS (default ~/.cache/bpfemu/kernels), vmlinuz only, fetched once. Needs
# qemu-system-x86, clang-19 only if the default objects need building, and the
# bpfemu-vmkernel crate's bpfemu-kernel-vms (built here). BPFEMU_VM_CONSOLE_DIR=DIR keeps
# each VM's whole console for debugging. The host's own 6.18 is not booted: the host judges
# it directly (target/debug/examples/libbpf_verdicts OBJ).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

args=()
objects=()
while [ $# -gt 0 ]; do
    case "$1" in
        --kernels|--out|--timeout) args+=("$1" "$2"); shift 2 ;;
        --btf) args+=("$1"); shift ;;
        # Sizes a map declared with max_entries 0 (the judge's --map-size), as a loader does.
        --map-size) args+=(--judge-arg --map-size --judge-arg "$2"); shift 2 ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        -*) echo "kernel_vms.sh: unknown option $1" >&2; exit 2 ;;
        *) objects+=("$1"); shift ;;
    esac
done
if [ ${#objects[@]} -eq 0 ]; then
    [ -d examples/xdp/build ] || ./examples/xdp/build.sh >/dev/null
    objects=(examples/xdp/build)
fi
command -v qemu-system-x86_64 >/dev/null || { echo "kernel_vms.sh: qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)" >&2; exit 2; }

CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-1} cargo build -q -p bpfemu-conformance --example libbpf_verdicts
CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-1} cargo build -q -p bpfemu-vmkernel --bin bpfemu-kernel-vms
exec target/debug/bpfemu-kernel-vms --judge target/debug/examples/libbpf_verdicts \
    "${args[@]}" "${objects[@]}"
