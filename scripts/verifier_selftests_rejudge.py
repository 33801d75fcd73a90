#!/usr/bin/env python3
"""Re-judges bpfemu's side of an earlier scripts/verifier_selftests.sh run, without the kernel.

The kernel's verdicts of the selftests move only with the kernel; bpfemu's move with every
verifier change. This keeps the kernel columns of OUT/results.tsv and runs `bpfemu verify
--json` again on the built objects, then prints the same summary: verdicts equal, false
accepts, false rejects, undecided, not loadable, equal error lines and processed counts, and
the lists of false accepts and false rejects.

    scripts/verifier_selftests_rejudge.py RESULTS_TSV OBJ_DIR [BPFEMU]

RESULTS_TSV: results.tsv of a full run; OBJ_DIR: its build/obj directory (CACHE/build/obj);
BPFEMU: the binary to judge with (default target/release/bpfemu).
"""
import collections
import csv
import json
import os
import subprocess
import sys


def bpfemu_verdicts(bpfemu, obj_dir, objects):
    """(object, program) -> (verdict, message, processed) from `bpfemu verify --json`."""
    out = {}
    for obj in objects:
        run = subprocess.run([bpfemu, "verify", "--json", os.path.join(obj_dir, obj)],
                             capture_output=True, text=True)
        try:
            doc = json.loads(run.stdout)
        except json.JSONDecodeError:
            continue  # the object does not load: its programs count as not loadable
        for prog in doc["programs"]:
            out[(obj, prog["name"])] = (prog["verdict"], prog.get("message") or "",
                                        str(prog["processed_insns"]))
    return out


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: verifier_selftests_rejudge.py RESULTS_TSV OBJ_DIR [BPFEMU]")
    tsv, obj_dir = sys.argv[1], sys.argv[2]
    bpfemu = sys.argv[3] if len(sys.argv) == 4 else "target/release/bpfemu"
    for path, what in ((tsv, "results file"), (obj_dir, "object directory"), (bpfemu, "bpfemu")):
        if not os.path.exists(path):
            sys.exit(f"verifier_selftests_rejudge: no {what} at {path}")
    rows = list(csv.DictReader(open(tsv), delimiter="\t"))
    ours = bpfemu_verdicts(bpfemu, obj_dir, sorted({r["file"] for r in rows}))
    count = collections.Counter()
    false_accepts, false_rejects, undecided = [], [], collections.Counter()
    lines, counts = [0, 0], [0, 0]
    for r in rows:
        kernel = r["kernel_verdict"]
        verdict, message, processed = ours.get((r["file"], r["program"]), ("not loadable", "", ""))
        count["programs"] += 1
        if verdict in ("not loadable", "undecided"):
            count[verdict] += 1
            if verdict == "undecided":
                undecided[message] += 1
            continue
        name = f'{r["file"]} {r["program"]}'
        if verdict == kernel:
            count["equal"] += 1
        elif verdict == "accepted":
            false_accepts.append(f'{name}: kernel: {r["kernel_last_line"]}')
        else:
            false_rejects.append(f"{name}: bpfemu: {message}")
        if verdict == kernel == "rejected":
            kernel_lines = {r["kernel_last_line"], r.get("kernel_via_bpfemu_loader_last_line", "")}
            lines[0] += message in kernel_lines
            lines[1] += 1
        if verdict == kernel == "accepted":
            counts[0] += processed == r["kernel_processed"]
            counts[1] += 1
    decided = count["programs"] - count["not loadable"] - count["undecided"]
    print(f'programs {count["programs"]}: verdict equal {count["equal"]} of {decided} decided, '
          f"false accepts {len(false_accepts)}, false rejects {len(false_rejects)}, "
          f'undecided {count["undecided"]}, not loadable {count["not loadable"]}')
    print(f"final error line equal {lines[0]}/{lines[1]}, processed count equal {counts[0]}/{counts[1]}")
    for line in false_accepts:
        print(f"false accept: {line}")
    for line in false_rejects:
        print(f"false reject: {line}")
    for message, n in undecided.most_common():
        print(f"undecided ({n}): {message}")
    return 1 if false_accepts else 0


if __name__ == "__main__":
    sys.exit(main())
