#!/usr/bin/env python3
"""Helper of scripts/kernel_matrix.sh (stdlib only): one kernel's verdicts, as that kernel gave
them booted in a VM, against `bpfemu verify --kernel VERSION`.

  kernel_matrix.py compare VERSION VM.jsonl BPFEMU.json OUTDIR
  kernel_matrix.py compare-probes VERSION VM.jsonl BPFEMU.jsonl OUTDIR

VM.jsonl: one line per program (object, program, accepted, error, processed_insns), as
`bpfemu-kernel-vms` writes it. BPFEMU.json: `bpfemu verify --kernel VERSION --json` over the
same objects. With compare-probes, both sides are probe verdicts (name FILE/PROBE, accepted,
error, processed_insns), as `examples/probe_verdicts` prints them: in the VM (the lines
`bpfemu-kernel-vms --judge probe_verdicts` writes) and with `--bpfemu VERSION`; a probe's
KNOWN_DIFFERENCES entry is `kernel/VERSION/LABEL/FILE/PROBE`. Writes OUTDIR/VERSION.summary.txt and OUTDIR/VERSION.differences.txt (every
verdict, error line and processed count that differs, each marked `known` when
verifier/probes/KNOWN_DIFFERENCES has a `kernel/VERSION/LABEL/OBJECT/PROGRAM  reason` entry
for it, LABEL naming the set: corpus, verify, kernels, selftest);
prints the summary. Exit 0 when the comparison ran, 2 on bad input.
"""

import json
import os
import sys

KNOWN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "verifier", "probes",
                     "KNOWN_DIFFERENCES")


def known_differences(version):
    """The `kernel/VERSION/LABEL/OBJECT/PROGRAM  reason` entries for this kernel, by
    OBJECT/PROGRAM."""
    prefix = "kernel/%s/" % version
    known = {}
    try:
        with open(KNOWN) as f:
            for line in f:
                line = line.strip()
                if line.startswith(prefix):
                    name, _, reason = line.partition(" ")
                    # kernel/VERSION/LABEL/OBJECT/PROGRAM: the label says which set.
                    _, _, key = name[len(prefix):].partition("/")
                    known[key] = reason.strip()
    except OSError:
        pass
    return known


def key(obj, prog):
    base = os.path.basename(obj or "")
    return "%s/%s" % (base[:-2] if base.endswith(".o") else base, prog)


def load_vm(path):
    rows = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            if r.get("program"):
                rows[key(r["object"], r["program"])] = r
    return rows


def load_bpfemu(path):
    with open(path) as f:
        doc = json.load(f)
    return {key(p["object"], p["name"]): p for p in doc.get("programs", [])}


def pct(a, b):
    return "%d / %d (%.1f%%)" % (a, b, 100.0 * a / b) if b else "0 / 0"


def load_probe_lines(path):
    """probe_verdicts lines by probe name; a line without one (the judge failed on a whole
    file in the VM) is kept under `FILE/(judge)`."""
    rows = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                name = r.get("name") or "%s/(judge)" % key(r.get("object"), "")[:-1]
                rows[name] = dict(r, message=r.get("error"))
    return rows


def compare(version, vm_path, bpfemu_path, outdir):
    return compare_rows(version, load_vm(vm_path), load_bpfemu(bpfemu_path), outdir)


def compare_probes(version, vm_path, bpfemu_path, outdir):
    return compare_rows(version, load_probe_lines(vm_path), load_probe_lines(bpfemu_path),
                        outdir)


def compare_rows(version, vm, ours, outdir):
    """vm: by key, the kernel's accepted, error, processed_insns; ours: bpfemu's verdict,
    accepted, message, processed_insns."""
    known = known_differences(version)
    both = sorted(set(vm) & set(ours))
    verdict_equal = error_equal = count_equal = 0
    both_rejected = both_accepted = 0
    false_accepts, false_rejects, undecided = [], [], []
    differences = []
    for k in both:
        kv, bv = vm[k], ours[k]
        if bv.get("verdict") == "undecided":
            undecided.append(k)
            differences.append((k, "undecided", kv.get("error") or "accepted", ""))
            continue
        if kv["accepted"] != bv["accepted"]:
            (false_accepts if bv["accepted"] else false_rejects).append(k)
            differences.append((k, "verdict",
                                "accepted" if kv["accepted"] else kv.get("error") or "",
                                "accepted" if bv["accepted"] else bv.get("message") or ""))
            continue
        verdict_equal += 1
        if not kv["accepted"]:
            both_rejected += 1
            if (kv.get("error") or "") == (bv.get("message") or ""):
                error_equal += 1
            else:
                differences.append((k, "error line", kv.get("error") or "",
                                    bv.get("message") or ""))
        else:
            both_accepted += 1
            if kv.get("processed_insns") == bv.get("processed_insns"):
                count_equal += 1
            else:
                differences.append((k, "processed", str(kv.get("processed_insns")),
                                    str(bv.get("processed_insns"))))
    judged = len(both) - len(undecided)
    explained = sum(1 for d in differences if d[0] in known)
    summary = [
        "kernel %s: %d programs judged by both (%d only in the VM, %d only by bpfemu)"
        % (version, len(both), len(set(vm) - set(ours)), len(set(ours) - set(vm))),
        "verdict equal: %s" % pct(verdict_equal, judged),
        "false accepts (bpfemu accepts, the kernel refuses): %d" % len(false_accepts),
        "false rejects: %d" % len(false_rejects),
        "undecided: %d" % len(undecided),
        "final error line equal, where both reject: %s" % pct(error_equal, both_rejected),
        "processed count equal, where both accept: %s" % pct(count_equal, both_accepted),
        "differences explained in KNOWN_DIFFERENCES: %d of %d" % (explained, len(differences)),
    ]
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "%s.summary.txt" % version), "w") as f:
        f.write("\n".join(summary) + "\n")
    with open(os.path.join(outdir, "%s.differences.txt" % version), "w") as f:
        for k, what, kernel, bpfemu in differences:
            mark = "known" if k in known else "UNEXPLAINED"
            f.write("%s\t%s\t%s\tkernel: %s\tbpfemu: %s\n" % (mark, what, k, kernel, bpfemu))
    print("\n".join(summary))
    return 0


def main(argv):
    commands = {"compare": compare, "compare-probes": compare_probes}
    if len(argv) != 6 or argv[1] not in commands:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        return commands[argv[1]](*argv[2:])
    except (OSError, ValueError, KeyError) as e:
        print("kernel_matrix.py: %s" % e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
