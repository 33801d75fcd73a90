#!/usr/bin/env bash
# One engine beside the kernel over every corpus program, at the scale users run: each program
# `bpfemu bench`ed RUNS times (one pinned CPU, the kernel's BPF_PROG_TEST_RUN in the same run),
# then per program the median ns a run of both and the median of the engine's time as a
# multiple of the kernel's, and the geometric mean of those medians. Medians, because a shared
# machine's noise moves single runs by a third.
#
#   scripts/bench_trusted.sh [PACKETS] [RUNS] [ENGINE]   # defaults: 1000000, 3, jit-trusted
#
# Same captures and maps as scripts/bench_corpus.sh; needs root, bpf(), jq and the release
# binary (BPFEMU=path picks another). CPU 1 by default (BPFEMU_CPU=N).
set -euo pipefail
cd "$(dirname "$0")/.."

packets=${1:-1000000}
runs=${2:-3}
engine=${3:-jit-trusted}
cpu=${BPFEMU_CPU:-1}
command -v jq >/dev/null || { echo "bench_trusted.sh: needs jq (apt-get install jq)" >&2; exit 2; }
bpfemu=${BPFEMU:-target/release/bpfemu}
[ -x "$bpfemu" ] || cargo build --release --bin bpfemu

# shellcheck source=scripts/corpus_bench_inputs.sh
source scripts/corpus_bench_inputs.sh

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

printf '%-16s %12s %12s %10s\n' program "$engine" kernel ratio
for obj in examples/xdp/build/*.v3.o; do
    name=$(basename "$obj" .v3.o)
    corpus_bench_args "$name" "$obj"
    args+=(--packets "$packets" --json --engine "$engine" --cpu "$cpu")
    samples=""
    for _ in $(seq "$runs"); do
        if ! doc=$(taskset -c "$cpu" "$bpfemu" bench "${args[@]}" 2>/tmp/bench_trusted.err); then
            samples=""
            break
        fi
        samples+=$(jq -r '[.engines[0].ns_per_packet, .kernel.ns_per_packet,
            .engines[0].time_vs_kernel] | @tsv' <<<"$doc")$'\n'
    done
    if [ -z "$samples" ]; then
        printf '%-16s failed: %s\n' "$name" "$(head -1 /tmp/bench_trusted.err)"
        continue
    fi
    printf '%-16s %12.1f %12.1f %9.3fx\n' "$name" \
        "$(cut -f1 <<<"$samples" | grep . | median)" \
        "$(cut -f2 <<<"$samples" | grep . | median)" \
        "$(cut -f3 <<<"$samples" | grep . | median)"
done | tee /tmp/bench_trusted.table
awk '$4 ~ /x$/ { sub(/x$/, "", $4); s += log($4); n++ } END {
    if (n) printf "geometric mean of the medians: %.3fx the kernel over %d programs\n", exp(s / n), n }' \
    /tmp/bench_trusted.table
