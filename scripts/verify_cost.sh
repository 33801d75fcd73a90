#!/usr/bin/env bash
# bpfemu's verifier time beside the kernel's, program by program, over BPF objects (files or
# directories searched for *.o): `bpfemu diff --verifier --json` loads each program in the
# running kernel (statistics only, as veristat does: its `verification time`) and verifies it
# in bpfemu (its `duration`, measured the same way: the verification alone). Prints each
# program's two times and their ratio, then the totals, the ratio of the totals and the worst
# program. Objects bpfemu or the kernel cannot load are listed and left out.
#
#   scripts/verify_cost.sh OBJ_OR_DIR...
#
# Needs root, bpf(), jq and the release binary (BPFEMU=path picks another).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || { echo "usage: scripts/verify_cost.sh OBJ_OR_DIR..." >&2; exit 2; }
command -v jq >/dev/null || { echo "verify_cost.sh: needs jq (apt-get install jq)" >&2; exit 2; }
bpfemu=${BPFEMU:-target/release/bpfemu}
[ -x "$bpfemu" ] || cargo build --release --bin bpfemu

table=$(mktemp)
trap 'rm -f "$table"' EXIT
find -L "$@" -name '*.o' -type f | sort | while read -r obj; do
    if ! doc=$("$bpfemu" diff --verifier --json "$obj" 2>/tmp/verify_cost.err); then
        printf '# %s: not compared: %s\n' "$obj" "$(head -1 /tmp/verify_cost.err)" >&2
        continue
    fi
    jq -r --arg obj "$(basename "$obj")" '.programs[]
        | select(.bpfemu.verified and .kernel.verification_time_usec != null)
        | [$obj, .program, .kernel.verification_time_usec, .bpfemu.verification_time_usec]
        | @tsv' <<<"$doc"
done >"$table"
awk -F'\t' '
    { printf "%-48s %-32s kernel %8d us  bpfemu %8d us  %6.2fx\n", $1, $2, $3, $4, $4 / ($3 ? $3 : 1)
      k += $3; b += $4; n++
      r = $4 / ($3 ? $3 : 1); if (r > worst) { worst = r; which = $1 " " $2 } }
    END { if (n) printf "%d programs: kernel %.1f ms, bpfemu %.1f ms, %.2fx in total; the worst %.2fx (%s)\n",
                  n, k / 1000, b / 1000, b / k, worst, which }' "$table"
