#!/usr/bin/env bash
# Builds every libFuzzer target in fuzz/ with nightly and runs each for a bounded time.
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
# CI runs it with 30 s a target; a long local campaign: `scripts/fuzz.sh 3600 elf_object`.
# Seeds: fuzz/corpus/TARGET (committed: minimised findings and coverage) plus the project's own
# examples; new coverage goes to fuzz/corpus-local/TARGET (not committed), crashes to
# fuzz/artifacts/TARGET. Exits 1 when a target finds a crash.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-30}
shift || true
if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cargo +nightly fuzz list --fuzz-dir fuzz)
fi

# Extra seed directories per target: the examples that the target's input format covers.
seeds_for() {
    case "$1" in
        elf_object) echo examples/xdp/build ;;
        pcap) echo examples/pcap ;;
        map_json) echo examples/maps ;;
    esac
}

cargo +nightly fuzz build --fuzz-dir fuzz -O
status=0
for target in "${targets[@]}"; do
    rm -rf "fuzz/artifacts/$target"
    mkdir -p "fuzz/corpus/$target" "fuzz/corpus-local/$target" "fuzz/artifacts/$target"
    echo "== fuzz $target for ${seconds}s"
    # shellcheck disable=SC2046
    if ! cargo +nightly fuzz run --fuzz-dir fuzz -O "$target" \
        "fuzz/corpus-local/$target" "fuzz/corpus/$target" $(seeds_for "$target") -- \
        -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=262144 \
        -artifact_prefix="fuzz/artifacts/$target/" -print_final_stats=1 2>&1 |
        grep -E '^(#[0-9]+.*DONE|stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)|==[0-9]+==|SUMMARY|.*panicked)' ; then
        :
    fi
    # Crashes, timeouts, out-of-memory and leaks are findings; libFuzzer's slow-unit-* files
    # (an input over 10 s, such as a kernel verifying a million instructions) are not.
    found=$(find "fuzz/artifacts/$target" -type f \( -name 'crash-*' -o -name 'timeout-*' \
        -o -name 'oom-*' -o -name 'leak-*' \) | wc -l)
    if [ "$found" -gt 0 ] && [[ " ${BPFEMU_FUZZ_REPORT_ONLY:-verifier_vs_kernel} " == *" $target "* ]]; then
        # Disagreements with the kernel are findings to minimise into probes, not CI failures,
        # while the verifier's known differences (verifier/probes/KNOWN_DIFFERENCES) remain.
        echo "fuzz $target: $found disagreement(s) with the kernel in fuzz/artifacts/$target (reported, not failed)"
    elif [ "$found" -gt 0 ]; then
        echo "fuzz $target: found $found crashing input(s) in fuzz/artifacts/$target" >&2
        status=1
    fi
done
exit $status
