#!/usr/bin/env python3
"""Helper of scripts/verifier_selftests.sh (stdlib only).

  verifier_selftests.py judge BPFEMU LIBBPF_JUDGE OBJ RAWDIR TIMEOUT
      Runs LIBBPF_JUDGE OBJ (conformance/examples/libbpf_verdicts.rs: the running kernel's
      verdicts with each program loaded by libbpf 1.7; "-" to skip it),
      `BPFEMU diff --verifier --json OBJ` (the kernel's verdicts through bpfemu's own loader,
      and bpfemu's error line as diff compares it) and `BPFEMU verify --json OBJ` (bpfemu's
      verdicts), and writes the answers to RAWDIR/NAME.json. Never fails for a finding;
      exit 2 only when RAWDIR cannot be written.

  verifier_selftests.py report PROGRAMS_TSV RAWDIR OUTDIR
      Joins the raw answers with the build's programs.tsv, writes OUTDIR/results.tsv,
      OUTDIR/summary.txt, OUTDIR/false_accepts.txt, OUTDIR/false_rejects.txt,
      OUTDIR/undecided.txt and OUTDIR/not_loadable.txt, and prints the summary and the lists.
"""

import json
import os
import re
import subprocess
import sys
from collections import Counter, defaultdict


def run(cmd, timeout):
    """(exit code or None on timeout, stdout, stderr)."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout, text=True, errors="replace")
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return None, "", "timed out after %ss" % timeout


def parse_json(text):
    try:
        return json.loads(text)
    except ValueError:
        return None


def one_line(text):
    lines = [l.strip() for l in (text or "").splitlines() if l.strip()]
    return lines[-1] if lines else ""


def judge(bpfemu, libbpf_judge, obj, rawdir, timeout):
    name = os.path.basename(obj)
    out = {"object": name, "libbpf": None}
    if libbpf_judge != "-":
        # One JSON line per program; exit 2 when libbpf cannot open the object.
        rc, so, se = run([libbpf_judge, obj], timeout)
        progs = [p for p in (parse_json(l) for l in so.splitlines()) if isinstance(p, dict)]
        out["libbpf"] = {"rc": rc, "programs": progs if rc == 0 else None,
                         "error": None if rc == 0 else (one_line(se) or "exit %s" % rc)}
    # The kernel: exit 0 all accepted and agreeing, 1 a rejection or a disagreement;
    # anything else (2: the object cannot be loaded by bpfemu's loader) is an error.
    rc, so, se = run([bpfemu, "diff", "--verifier", "--json", obj], timeout)
    doc = parse_json(so) if rc in (0, 1) else None
    out["diff"] = {"rc": rc, "programs": doc["programs"] if doc else None,
                   "error": None if doc else (one_line(se) or "exit %s" % rc)}
    # bpfemu: exit 0 all accepted, 1 a rejection, 2 bad input or an undecided program
    # (then the JSON is still printed).
    rc, so, se = run([bpfemu, "verify", "--json", obj], timeout)
    doc = parse_json(so)
    out["verify"] = {"rc": rc, "doc": doc,
                     "error": None if doc else (one_line(se) or "exit %s" % rc)}
    path = os.path.join(rawdir, name + ".json")
    try:
        with open(path + ".tmp", "w") as f:
            json.dump(out, f)
        os.replace(path + ".tmp", path)
    except OSError as e:
        print("verifier_selftests.py: cannot write %s: %s" % (path, e), file=sys.stderr)
        return 2
    return 0


def clean(s):
    return (s or "").replace("\t", " ").replace("\n", " ").strip()


# What an undecided program or a disagreement is about: the helper or kfunc its message
# names, else the message with registers and numbers made general.
NAME_PATTERNS = [
    re.compile(r"kfunc\s+'?([A-Za-z_][A-Za-z0-9_]*)"),
    re.compile(r"helper\s+'?([A-Za-z_][A-Za-z0-9_]*)"),
    re.compile(r"\b(bpf_[A-Za-z0-9_]+)"),
]


def cause(msg):
    for pat in NAME_PATTERNS:
        m = pat.search(msg or "")
        if m:
            return m.group(1)
    general = re.sub(r"\bR\d+\b", "Rn", msg or "?")
    general = re.sub(r"'[^']*'", "'...'", general)
    return re.sub(r"\d+", "N", general)[:80]


KNOWN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "verifier", "probes",
                     "KNOWN_DIFFERENCES")


def known_differences():
    """The `selftest/OBJECT/PROGRAM  reason` entries of verifier/probes/KNOWN_DIFFERENCES."""
    known = {}
    try:
        with open(KNOWN) as f:
            for line in f:
                line = line.strip()
                if line.startswith("selftest/"):
                    name, _, reason = line.partition(" ")
                    known[name] = reason.strip()
    except OSError:
        pass
    return known


def selftest_name(r):
    return "selftest/%s/%s" % (r[0][:-2] if r[0].endswith(".o") else r[0], r[1])


def report(programs_tsv, rawdir, outdir):
    expected = []  # (object, program) from the build
    with open(programs_tsv) as f:
        header = f.readline().rstrip("\n").split("\t")
        io, ip = header.index("object"), header.index("program")
        for line in f:
            cols = line.rstrip("\n").split("\t")
            if len(cols) > max(io, ip):
                expected.append((cols[io], cols[ip]))
    objects = sorted({o for o, _ in expected})
    rows = []
    for obj in objects:
        path = os.path.join(rawdir, obj + ".json")
        try:
            with open(path) as f:
                raw = json.load(f)
        except (OSError, ValueError):
            raw = {"diff": {"programs": None, "error": "not judged"},
                   "verify": {"doc": None, "error": "not judged"}}
        kern = {p["program"]: p for p in (raw["diff"]["programs"] or [])}
        lib = raw.get("libbpf")
        libk = {p["program"]: p for p in ((lib or {}).get("programs") or [])}
        vdoc = raw["verify"]["doc"] or {}
        ours = {p["name"]: p for p in vdoc.get("programs", [])}
        not_verified = {p["name"]: p for p in vdoc.get("not_verified", [])}
        names = [p for o, p in expected if o == obj]
        for prog in names + sorted((set(kern) | set(ours) | set(libk)) - set(names)):
            k = kern.get(prog)
            if k is not None:
                dv = "accepted" if k["kernel"]["accepted"] else "rejected"
                dl = k["kernel"].get("error") or ""
                dp = k["kernel"].get("processed_insns")
            else:
                dv, dl, dp = "unknown", raw["diff"]["error"] or "program not in the kernel's answer", None
            if lib is None:
                # No libbpf judge: the kernel's verdict through bpfemu's loader.
                kv, kl, kp = dv, dl, dp
            elif prog in libk:
                lk = libk[prog]
                kv = "accepted" if lk["accepted"] else "rejected"
                kl = lk.get("error") or ""
                kp = lk.get("processed_insns")
            else:
                kv, kl, kp = "unknown", lib["error"] or "program not in libbpf's answer", None
            b = ours.get(prog)
            if b is not None:
                bv = b["verdict"]
                bp = b.get("processed_insns")
                if bv == "accepted":
                    bl = ""
                elif k is not None and k["bpfemu"].get("error"):
                    # The line the kernel's last line is compared with, as diff --verifier
                    # takes it (the message, or the log's last line where the kernel logs none).
                    bl = k["bpfemu"]["error"]
                else:
                    bl = b.get("message") or ""
            elif prog in not_verified:
                bv, bl, bp = "not_verified", not_verified[prog].get("reason", ""), None
            else:
                bv, bl, bp = "not_loadable", raw["verify"]["error"] or "program not in bpfemu's answer", None
            rows.append([obj, prog, kv, bv, clean(kl), clean(bl),
                         "" if kp is None else str(kp), "" if bp is None else str(bp),
                         dv, clean(dl), "" if dp is None else str(dp)])

    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "results.tsv"), "w") as f:
        f.write("file\tprogram\tkernel_verdict\tbpfemu_verdict\tkernel_last_line\t"
                "bpfemu_last_line\tkernel_processed\tbpfemu_processed\t"
                "kernel_via_bpfemu_loader_verdict\tkernel_via_bpfemu_loader_last_line\t"
                "kernel_via_bpfemu_loader_processed\n")
        for r in rows:
            f.write("\t".join(r) + "\n")

    n = len(rows)
    known = [r for r in rows if r[2] in ("accepted", "rejected")]
    judged = [r for r in known if r[3] in ("accepted", "rejected")]
    equal = [r for r in judged if r[2] == r[3]]
    fa = [r for r in judged if r[3] == "accepted" and r[2] == "rejected"]
    fr = [r for r in judged if r[3] == "rejected" and r[2] == "accepted"]
    und = [r for r in rows if r[3] == "undecided"]
    unl = [r for r in rows if r[3] in ("not_loadable", "not_verified")]
    unk = [r for r in rows if r[2] == "unknown"]
    both_rej = [r for r in equal if r[2] == "rejected"]
    line_eq = [r for r in both_rej if r[4] == r[5]]
    # libbpf 1.7 rewrites some lines of the kernel's log (an unresolved kfunc's or a failed
    # CO-RE relocation's poisoned call, a missing map): the kernel's own line is the one it
    # gave the load through bpfemu's loader.
    raw_rej = [r for r in both_rej if r[8] == "rejected"]
    raw_eq = [r for r in raw_rej if r[9] == r[5]]
    both_acc = [r for r in equal if r[2] == "accepted"]
    proc_eq = [r for r in both_acc if r[6] and r[6] == r[7]]

    # Where the kernel's verdict through bpfemu's loader (diff --verifier) is not the one
    # through libbpf 1.7: a loader difference, not a verifier one.
    loader = [r for r in rows if r[2] != r[8]]

    def pct(a, b):
        return "%d / %d (%.1f%%)" % (a, b, 100.0 * a / b) if b else "%d / 0" % a

    kacc = sum(1 for r in known if r[2] == "accepted")
    table = [
        ("programs", str(n)),
        ("  kernel accepted / rejected / unknown", "%d / %d / %d" % (kacc, len(known) - kacc, len(unk))),
        ("verdict equal (of programs bpfemu decided)", pct(len(equal), len(judged))),
        ("false accepts (bpfemu accepted, kernel rejected)", str(len(fa))),
        ("false rejects (bpfemu rejected, kernel accepted)", str(len(fr))),
        ("undecided (bpfemu)", str(len(und))),
        ("not loadable by bpfemu", str(len(unl))),
        ("final error line equal (of rejections both agree on)", pct(len(line_eq), len(both_rej))),
        ("  ... equal to the kernel's raw line (through bpfemu's loader)", pct(len(raw_eq), len(raw_rej))),
        ("processed count equal (of acceptances both agree on)", pct(len(proc_eq), len(both_acc))),
        ("kernel verdict via bpfemu's loader differs from libbpf 1.7's", str(len(loader))),
    ]
    # Every difference (verdict, loadability, error line, processed count) against the
    # explained ones in KNOWN_DIFFERENCES; listed programs that now agree are stale.
    count_differs = [r for r in both_acc if not (r[6] and r[6] == r[7])]
    differing = {}
    for kind, rs in (("false accept", fa), ("false reject", fr), ("undecided", und),
                     ("not loadable", unl), ("error line", [r for r in both_rej if r[4] != r[5]]),
                     ("processed count", count_differs)):
        for r in rs:
            differing.setdefault(selftest_name(r), kind)
    known = known_differences()
    unexplained = sorted(n for n in differing if n not in known)
    judged_names = {selftest_name(r) for r in rows}
    stale = sorted(n for n in known if n in judged_names and n not in differing)
    table += [
        ("differences explained in KNOWN_DIFFERENCES", "%d of %d" % (len(differing) - len(unexplained), len(differing))),
        ("  unexplained (see unexplained.txt)", str(len(unexplained))),
        ("  listed but now equal (stale)", str(len(stale))),
    ]
    w = max(len(a) for a, _ in table)
    summary = "\n".join("%-*s  %s" % (w, a, b) for a, b in table) + "\n"

    def listing(title, items, key=None, labels=("kernel", "bpfemu")):
        out = ["%s: %d" % (title, len(items))]
        if key:
            groups = defaultdict(list)
            for r in items:
                groups[key(r)].append(r)
            for g, rs in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
                out.append("  [%s] %d" % (g, len(rs)))
                for r in rs:
                    out.append("    %s %s" % (r[0], r[1]))
                    out.append("      %s (%s): %s" % (labels[0], r[2], r[4] or "-"))
                    out.append("      %s (%s): %s" % (labels[1], r[3], r[5] or "-"))
        else:
            for r in items:
                out.append("  %s %s" % (r[0], r[1]))
                out.append("    kernel: %s" % (r[4] or "(accepted)"))
                out.append("    bpfemu: %s" % (r[5] or "(accepted)"))
        return "\n".join(out) + "\n"

    lists = {
        "false_accepts.txt": listing("false accepts (bpfemu accepted, kernel rejected)", fa,
                                     key=lambda r: cause(r[4])),
        "false_rejects.txt": listing("false rejects (bpfemu rejected, kernel accepted)", fr,
                                     key=lambda r: cause(r[5])),
        "undecided.txt": listing("undecided (grouped by what bpfemu does not check yet)", und,
                                 key=lambda r: cause(r[5])),
        "not_loadable.txt": listing("not loadable by bpfemu", unl, key=lambda r: r[0]),
    }
    lists["loader_differs.txt"] = listing(
        "the kernel's verdict through libbpf 1.7 and through bpfemu's loader differ",
        [r[:3] + [r[8], r[4], r[9]] + r[6:] for r in loader], key=lambda r: r[0],
        labels=("kernel via libbpf 1.7", "kernel via bpfemu's loader"))
    lists["unexplained.txt"] = "".join(
        ["differences not explained in %s: %d\n" % (KNOWN, len(unexplained))]
        + ["  %s  (%s)\n" % (n, differing[n]) for n in unexplained]
        + ["listed there but now equal to the kernel: %d\n" % len(stale)]
        + ["  %s\n" % n for n in stale])
    mism = [r for r in both_rej if r[4] != r[5]]
    lists["error_line_differs.txt"] = listing(
        "both rejected, final error line differs", mism, key=lambda r: cause(r[4]))
    with open(os.path.join(outdir, "summary.txt"), "w") as f:
        f.write(summary)
    for fname, text in lists.items():
        with open(os.path.join(outdir, fname), "w") as f:
            f.write(text)
    sys.stdout.write(summary + "\n")
    for fname in ("false_accepts.txt", "false_rejects.txt", "undecided.txt", "not_loadable.txt",
                  "loader_differs.txt", "unexplained.txt"):
        sys.stdout.write(lists[fname] + "\n")
    print("(both rejected, error line differs: %d; see %s)"
          % (len(mism), os.path.join(outdir, "error_line_differs.txt")))
    return 0


def main(argv):
    if len(argv) == 6 and argv[0] == "judge":
        return judge(argv[1], argv[2], argv[3], argv[4], float(argv[5]))
    if len(argv) == 4 and argv[0] == "report":
        return report(argv[1], argv[2], argv[3])
    print(__doc__.strip(), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
