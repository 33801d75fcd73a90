#!/usr/bin/env bash
# The action's verify step, run as a workflow step runs it: inputs as INPUT_* variables,
# outputs appended to $GITHUB_OUTPUT, a summary to $GITHUB_STEP_SUMMARY. Exits with bpfemu
# verify's code; a glob that matches nothing fails (exit 2): a check of nothing is no pass.
set -uo pipefail
shopt -s globstar nullglob

objects=()
read -r -d '' -a patterns <<< "${INPUT_OBJECTS:-}" || true
for pattern in "${patterns[@]}"; do
    matched=($pattern)
    if [ ${#matched[@]} -eq 0 ]; then
        echo "::error title=bpfemu verify::'$pattern' matches no file"
        exit 2
    fi
    objects+=("${matched[@]}")
done
if [ ${#objects[@]} -eq 0 ]; then
    echo "::error title=bpfemu verify::no objects given (the 'objects' input is empty)"
    exit 2
fi

args=(verify "${objects[@]}")
sarif="${INPUT_SARIF:-}"
[ -n "$sarif" ] && args+=(--sarif "$sarif")
[ -n "${INPUT_JUNIT:-}" ] && args+=(--junit "$INPUT_JUNIT")
[ -n "${INPUT_BASELINE:-}" ] && args+=(--baseline "$INPUT_BASELINE")
[ -n "${INPUT_FAIL_ON:-}" ] && args+=(--fail-on "$INPUT_FAIL_ON")
read -r -d '' -a extra <<< "${INPUT_ARGS:-}" || true
args+=("${extra[@]}")

report="$(mktemp)"
# GITHUB_ACTIONS=true makes bpfemu print the annotations with its report.
bpfemu "${args[@]}" | tee "$report"
code=${PIPESTATUS[0]}
if [ -n "${INPUT_CSV:-}" ]; then
    bpfemu verify "${objects[@]}" --csv "${extra[@]}" > "$INPUT_CSV" || true
fi

if [ -n "${GITHUB_OUTPUT:-}" ]; then
    {
        [ -n "$sarif" ] && [ -f "$sarif" ] && echo "sarif=$sarif"
        echo "exit-code=$code"
    } >> "$GITHUB_OUTPUT"
fi
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
    {
        echo "### bpfemu verify"
        echo
        echo '```'
        grep -v '^::' "$report"
        echo '```'
    } >> "$GITHUB_STEP_SUMMARY"
fi
rm -f "$report"
exit "$code"
