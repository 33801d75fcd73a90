#!/usr/bin/env bash
# bpfemu's interpreter against rbpf's, in one criterion run over the eight helper-free raw
# programs of benches/engines.rs, then one line a program: the median ns a run of each and
# rbpf's time as a multiple of bpfemu's (issue 9's target: at least 3.0x on every program).
#
#   scripts/bench_interp.sh [SECONDS]     # measurement time a benchmark (default 3)
#
# Pin it for steady figures (`taskset -c 1 scripts/bench_interp.sh`); rbpf's own times move
# by tens of percent between processes on a busy machine, so compare ratios of one run.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-3}
log=target/bench_interp.log
mkdir -p target
if ! cargo bench --bench engines -- 'raw/.*/(bpfemu-interp|rbpf-interp)$' \
    --warm-up-time 1 --measurement-time "$seconds" >"$log" 2>&1; then
    tail -20 "$log" >&2
    echo "bench_interp.sh: cargo bench failed (whole output in $log)" >&2
    exit 1
fi

# The median's point estimate in criterion's estimates.json, in ns.
median() {
    sed -n 's/.*"median":{[^}]*}[^}]*"point_estimate":\([0-9.e+-]*\).*/\1/p' "$1"
}

printf '%-16s %12s %12s %8s\n' program bpfemu-ns rbpf-ns rbpf/bpfemu
for dir in target/criterion/raw_*/; do
    name=${dir#target/criterion/raw_}
    name=${name%/}
    ours=$(median "$dir/bpfemu-interp/new/estimates.json")
    theirs=$(median "$dir/rbpf-interp/new/estimates.json")
    awk -v n="$name" -v a="$ours" -v b="$theirs" \
        'BEGIN { printf "%-16s %12.1f %12.1f %7.2fx\n", n, a, b, b / a }'
done
