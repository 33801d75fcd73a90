#!/usr/bin/env bash
# `bpfemu bench` over every corpus program (examples/xdp/build/NAME.vN.o) with the capture and
# map setup that exercises it, then one table: ns a run per engine in test_run's loop and the kernel's,
# the trusted JIT's and the baseline JIT's time as multiples of the kernel's, their compile times, the
# trusted JIT's replay cost a packet, and the geometric means of the multiples (issue 9's target: at
# most 1.0x).
#
#   scripts/bench_corpus.sh [PACKETS] [LEVEL]      # defaults: 1000000 packets, v3 objects
#
# Uses the release binary (built when missing; BPFEMU=path picks another, BPFEMU_PROFILE=release-lto
# the whole-program-optimised one) and jq. Needs root and bpf() for the kernel's
# column; a program whose bench fails is listed with the first line of its error.
set -euo pipefail
cd "$(dirname "$0")/.."

packets=${1:-1000000}
level=${2:-v3}
command -v jq >/dev/null || { echo "bench_corpus.sh: needs jq (apt-get install jq)" >&2; exit 2; }
# BPFEMU_PROFILE=release-lto measures the whole-program-optimised build (Cargo.toml).
profile=${BPFEMU_PROFILE:-release}
bpfemu=${BPFEMU:-target/$profile/bpfemu}
[ -x "$bpfemu" ] || cargo build --profile "$profile" --bin bpfemu

# shellcheck source=scripts/corpus_bench_inputs.sh
source scripts/corpus_bench_inputs.sh

fmt='%-15s %8s %10s %10s %12s %12s %12s %10s %12s %12s %8s %8s %10s\n'
printf "$fmt" program insns/run interp jit jit-trusted jit-baseline base-checked kernel trusted/kern baseline/kern compile base-ms replay
logsum=0
count=0
blogsum=0
bcount=0
for obj in examples/xdp/build/*."$level".o; do
    name=$(basename "$obj" ".$level.o")
    corpus_bench_args "$name" "$obj"
    args+=(--packets "$packets" --json)
    if ! doc=$("$bpfemu" bench "${args[@]}" 2>/tmp/bench_corpus.err); then
        printf '%-15s failed: %s\n' "$name" "$(head -1 /tmp/bench_corpus.err)"
        continue
    fi
    row=$(jq -r '
        def ns(e): if e.ns_per_packet then (e.ns_per_packet * 10 | round / 10 | tostring) else "-" end;
        [ .program, (.insns_per_packet * 10 | round / 10 | tostring),
          ns(.engines[0]), ns(.engines[1]), ns(.engines[2]), ns(.engines[3]), ns(.engines[4]),
          ns(.kernel),
          (.engines[2].time_vs_kernel // "-" | tostring),
          (.engines[3].time_vs_kernel // "-" | tostring),
          ((.engines[2].compile_ms // .engines[1].compile_ms // 0) * 1000 | round / 1000 | tostring),
          ((.engines[3].compile_ms // 0) * 1000 | round / 1000 | tostring),
          ns(.engines[2].replay // {}) ]
        | @tsv' <<<"$doc")
    IFS=$'\t' read -r _prog ipp interp jit trusted base bchecked kernel ratio bratio compile bcompile replay <<<"$row"
    if [ "$ratio" != "-" ]; then
        logsum=$(awk -v s="$logsum" -v r="$ratio" 'BEGIN { print s + log(r) }')
        count=$((count + 1))
        ratio=$(awk -v r="$ratio" 'BEGIN { printf "%.3fx", r }')
    fi
    if [ "$bratio" != "-" ]; then
        blogsum=$(awk -v s="$blogsum" -v r="$bratio" 'BEGIN { print s + log(r) }')
        bcount=$((bcount + 1))
        bratio=$(awk -v r="$bratio" 'BEGIN { printf "%.3fx", r }')
    fi
    printf "$fmt" "$name" "$ipp" "$interp" "$jit" "$trusted" "$base" "$bchecked" "$kernel" "$ratio" "$bratio" "$compile" "$bcompile" "$replay"
done
echo "(ns a run in test_run's loop, the thread's CPU time; base-checked: jit-baseline-checked's;"
echo " kernel: BPF_PROG_TEST_RUN's own duration;"
echo " compile and base-ms: jit-trusted's and jit-baseline's compile in ms;"
echo " replay: jit-trusted's ns a packet loaded afresh and run)"
if [ "$count" -gt 0 ]; then
    awk -v s="$logsum" -v n="$count" \
        'BEGIN { printf "geometric mean of jit-trusted / kernel over %d programs: %.3fx\n", n, exp(s / n) }'
fi
if [ "$bcount" -gt 0 ]; then
    awk -v s="$blogsum" -v n="$bcount" \
        'BEGIN { printf "geometric mean of jit-baseline / kernel over %d programs: %.3fx\n", n, exp(s / n) }'
fi
