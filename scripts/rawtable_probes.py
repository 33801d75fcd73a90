#!/usr/bin/env python3
"""The raw instruction tables of a kernel tree's verifier selftests
(tools/testing/selftests/bpf/verifier/*.c, run by test_verifier.c in 5.10 and 6.1) as probe
files, one per table file, that the kernel (examples/probe_verdicts in a VM) and bpfemu
(examples/probe_verdicts --bpfemu VERSION) both judge as XDP programs (issue 23).

  rawtable_probes.py SRC OUTDIR [TOOLS_INCLUDE]

SRC is a Linux source tree. The tables are C initialisers of test_verifier.c's `struct
bpf_test`, so a small C program is generated in OUTDIR/build, compiled with the tree's own
test_verifier.c prologue (its struct, macros and fill helpers) and headers, and run: it
prints every test (name, instructions as raw slots, prog_type, flags, map fixups, expected
result). This script keeps the tests that make sense as XDP and writes OUTDIR/FILE.probes,
each test a probe named after its description. OUTDIR/dropped.tsv lists every test left out
with the reason; the counts are printed. Nothing of the tree is copied into the output but
the instructions themselves.

A kept test: prog_type unset (a socket filter), socket filter or XDP; its instructions in
the table (no fill helper); no load flags but the alignment ones x86 ignores; no BTF, func
info, kfunc or attach type; every map it uses one the probe format declares; and, when it is
a socket filter, neither LD_ABS/LD_IND nor a load or store through the context pointer (the
layout of `struct __sk_buff` is not `struct xdp_md`'s).

Exit 0 on success, 1 when the tree cannot be compiled or read, 2 on usage.
"""

import os
import re
import subprocess
import sys

SELFTESTS = "tools/testing/selftests/bpf"

# fixup array -> the probe map declaration test_verifier.c creates for it.
MAPS = {
    "fixup_map_hash_8b": "hash key 8 value 8 entries 1",
    "fixup_map_hash_48b": "hash key 8 value 48 entries 1",
    "fixup_map_hash_16b": "hash key 8 value 16 entries 1",
    "fixup_map_array_48b": "array key 4 value 48 entries 1",
    "fixup_prog1": "prog_array key 4 value 4 entries 4",
    "fixup_prog2": "prog_array key 4 value 4 entries 8",
    "fixup_map_sockmap": "sockmap key 4 value 4 entries 1",
    "fixup_map_sockhash": "sockhash key 4 value 4 entries 1",
    "fixup_map_xskmap": "xskmap key 4 value 4 entries 1",
    "fixup_map_spin_lock": "array key 4 value 8 entries 1 lock 4",
    "fixup_map_array_ro": "array key 4 value 48 entries 1 flags 0x80",
    "fixup_map_array_wo": "array key 4 value 48 entries 1 flags 0x100",
    "fixup_map_array_small": "array key 4 value 1 entries 1",
    "fixup_map_ringbuf": "ringbuf key 0 value 0 entries 4096",
    "fixup_map_timer": "array key 4 value 16 entries 1 timer 0",
}
# Fixups whose maps the probe format cannot declare.
UNDECLARABLE = [
    "fixup_map_stacktrace", "fixup_map_in_map", "fixup_cgroup_storage",
    "fixup_percpu_cgroup_storage", "fixup_sk_storage_map", "fixup_map_event_output",
    "fixup_map_reuseport_array", "fixup_map_kptr",
]
# test_verifier's F_NEEDS_EFFICIENT_UNALIGNED_ACCESS: BPF_F_ANY_ALIGNMENT, which changes
# nothing on x86 (efficient unaligned access); every other flag changes the load.
ALIGNMENT_FLAG_X86_IGNORES = 1
PROG_TYPES = {0: "unset", 1: "socket_filter", 6: "xdp"}
STUB_HEADERS = ["sys/capability.h", "bpf/bpf.h", "bpf/libbpf.h", "autoconf.h", "bpf_rlimit.h",
                "cgroup_helpers.h", "testing_helpers.h"]
RESULTS = {0: "UNDEF", 1: "ACCEPT", 2: "REJECT", 3: "VERBOSE_ACCEPT"}

DUMPER_MAIN = r"""
static void text(const char *s)
{
	for (; s && *s; s++)
		if (*s == '\t' || *s == '\n' || *s == '\\')
			printf("\\x%02x", *s);
		else
			putchar(*s);
	putchar('\t');
}

static void fixups(const char *name, const int *at)
{
	if (!*at)
		return;
	printf("F\t%s", name);
	for (; *at; at++)
		printf("\t%d", *at);
	putchar('\n');
}

static void dump(const char *file, struct bpf_test *t)
{
	int len = MAX_INSNS, i;

	while (len > 0 && !memcmp(&t->insns[len - 1], &(struct bpf_insn){}, sizeof(t->insns[0])))
		len--;
	printf("T\t%s\t", file);
	text(t->descr);
	printf("%d\t%u\t%d\t", t->prog_type, t->flags, t->result);
	text(t->errstr);
	printf("%d\t%d\t%d\n", t->fill_helper != NULL, (int)t->expected_attach_type, EXTRA(t));
	for (i = 0; i < len; i++)
		printf("I\t%u\t%u\t%u\t%d\t%d\n", t->insns[i].code, t->insns[i].dst_reg,
		       t->insns[i].src_reg, t->insns[i].off, t->insns[i].imm);
FIXUPS
}

int main(void)
{
	unsigned i;
DUMPS
	return 0;
}
"""


def die(message, code=1):
    print("rawtable_probes.py: %s" % message, file=sys.stderr)
    sys.exit(code)


def dumper_source(src):
    """test_verifier.c up to its table, then one array per table file and the printer."""
    path = os.path.join(src, SELFTESTS, "test_verifier.c")
    with open(path) as f:
        whole = f.read()
    head, sep, _ = whole.partition("static struct bpf_test tests[] = {")
    if not sep:
        die("%s: no `static struct bpf_test tests[]`" % path)
    struct = re.search(r"struct bpf_test \{(.*?)\n\};", head, re.S).group(1)
    fixups = re.findall(r"\b(fixup_\w+)\[MAX_FIXUPS\]", struct)
    int_fixups = [f for f in fixups if re.search(r"int\s+%s\[" % f, struct)]
    # Whatever else 6.1's struct can carry that the probe format cannot: BTF, kfuncs.
    extra = []
    if "func_info_cnt" in struct:
        extra.append("t->func_info_cnt")
    if "btf_types[" in struct:
        extra.append("t->btf_types[0]")
    if "fixup_kfunc_btf_id" in struct:
        extra.append("(t->fixup_kfunc_btf_id[0].kfunc != NULL)")
    if re.search(r"\bkfunc;", struct):
        extra.append("(t->kfunc != NULL)")
    table_dir = os.path.join(src, SELFTESTS, "verifier")
    files = sorted(f[:-2] for f in os.listdir(table_dir)
                   if f.endswith(".c") and f != "tests.h")
    arrays = "".join(
        "static struct bpf_test tests_%s[] = {\n#include \"verifier/%s.c\"\n};\n"
        % (ident(f), f) for f in files)
    dumps = "".join(
        "\tfor (i = 0; i < sizeof(tests_%s) / sizeof(tests_%s[0]); i++)\n"
        "\t\tdump(\"%s\", &tests_%s[i]);\n" % (ident(f), ident(f), f, ident(f)) for f in files)
    fixup_lines = "".join("\tfixups(\"%s\", t->%s);\n" % (f, f) for f in int_fixups)
    main = (DUMPER_MAIN.replace("FIXUPS", fixup_lines).replace("DUMPS", dumps)
            .replace("EXTRA(t)", "(int)(%s)" % (" || ".join(extra) or "0")))
    # The prologue reaches tools/include/linux/filter.h by a path relative to its own place.
    head = head.replace('#include "../../../include/linux/filter.h"', "#include <linux/filter.h>")
    # A newer tools/include spells 5.10's BPF_XADD as BPF_ATOMIC (the same mode, 0xc0).
    return "#define BPF_ATOMIC 0xc0\n" + head + arrays + main


def ident(name):
    return re.sub(r"\W", "_", name)


def compile_and_run(src, tools_include, build):
    """Compiles the dumper against the tree's uapi headers and `tools_include` (the tree's
    tools/include, or another tree's when the source package left it out: only the
    instruction macros of its linux/filter.h are used), and returns what it prints."""
    os.makedirs(build, exist_ok=True)
    c = os.path.join(build, "rawtable_dump.c")
    with open(c, "w") as f:
        f.write(dumper_source(src))
    # The prologue's libbpf, libcap and generated headers declare functions the tables never
    # call: empty stand-ins.
    stubs = os.path.join(build, "include")
    for header in STUB_HEADERS:
        os.makedirs(os.path.dirname(os.path.join(stubs, header)), exist_ok=True)
        open(os.path.join(stubs, header), "w").close()
    includes = [stubs, os.path.join(src, SELFTESTS), os.path.join(src, "include/uapi"),
                tools_include]
    exe = os.path.join(build, "rawtable_dump")
    cmd = [os.environ.get("CC", "cc"), "-O0", "-w", "-o", exe, c]
    cmd += ["-I" + i for i in includes]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        die("compiling %s failed:\n%s" % (c, done.stderr[:3000]))
    ran = subprocess.run([exe], capture_output=True, text=True)
    if ran.returncode != 0:
        die("%s failed: %s" % (exe, ran.stderr[-2000:]))
    return ran.stdout


def unescape(text):
    return re.sub(r"\\x([0-9a-f]{2})", lambda m: chr(int(m.group(1), 16)), text)


def parse_dump(out):
    tests = []
    for line in out.splitlines():
        fields = line.split("\t")
        if fields[0] == "T":
            tests.append({
                "file": fields[1], "descr": unescape(fields[2]), "prog_type": int(fields[3]),
                "flags": int(fields[4]), "result": RESULTS.get(int(fields[5]), fields[5]),
                "errstr": unescape(fields[6]), "fill": fields[7] == "1",
                "attach": int(fields[8]), "extra": fields[9] == "1",
                "insns": [], "fixups": {},
            })
        elif fields[0] == "I":
            tests[-1]["insns"].append(tuple(int(x) for x in fields[1:]))
        elif fields[0] == "F":
            tests[-1]["fixups"][fields[1]] = [int(x) for x in fields[2:]]
    return tests


def ctx_access(insns):
    """Whether a load or store goes through the context pointer: r1 at entry, followed
    through register copies in program order (a sketch of the data flow that ignores
    branches; a spilled and refilled context is not followed)."""
    ctx = {1}
    pc = 0
    while pc < len(insns):
        code, dst, src, _off, _imm = insns[pc]
        cls, mode = code & 7, code & 0xe0
        if cls == 1 and src in ctx:  # LDX
            return True
        if cls in (2, 3) and dst in ctx:  # ST, STX
            return True
        if code == 0xbf:  # r_dst = r_src
            ctx.discard(dst)
            if src in ctx:
                ctx.add(dst)
        elif code == 0x85:  # a call clobbers r0-r5
            ctx -= {0, 1, 2, 3, 4, 5}
        elif cls in (4, 7) or cls == 1 or (cls == 0 and mode == 0):
            ctx.discard(dst)
        pc += 2 if code == 0x18 else 1
    return False


def drop_reason(t):
    if t["prog_type"] not in PROG_TYPES:
        return "prog_type %d is neither a socket filter nor XDP" % t["prog_type"]
    if t["fill"]:
        return "instructions made at run time by a fill helper"
    if t["flags"] & ~ALIGNMENT_FLAG_X86_IGNORES:
        return "load flags %#x" % t["flags"]
    if t["extra"] or t["attach"]:
        return "BTF, func info, kfunc or attach type"
    for name in UNDECLARABLE:
        if name in t["fixups"]:
            return "a map the probe format cannot declare (%s)" % name
    unknown = [f for f in t["fixups"] if f not in MAPS]
    if unknown:
        return "unknown fixup %s" % unknown[0]
    if not t["insns"]:
        return "no instructions"
    fixed = {at for ats in t["fixups"].values() for at in ats}
    for pc, (code, _dst, src, _off, _imm) in enumerate(t["insns"]):
        if code == 0x18 and src in (1, 2) and pc not in fixed:
            return "a map reference without a fixup (a made-up fd)"
    if t["prog_type"] != 6:
        if any((i[0] & 7) == 0 and (i[0] & 0xe0) in (0x20, 0x40) for i in t["insns"]):
            return "socket filter LD_ABS/LD_IND (XDP has no skb)"
        if ctx_access(t["insns"]):
            return "socket filter context access (__sk_buff is not xdp_md)"
    return None


def probe_name(descr, taken):
    base = re.sub(r"[^A-Za-z0-9]+", "_", descr).strip("_") or "unnamed"
    name, n = base, 2
    while name in taken:
        name, n = "%s_%d" % (base, n), n + 1
    taken.add(name)
    return name


def probe_text(t, name):
    lines = ["== %s" % name,
             "; %s: %s (table: %s%s)" % (PROG_TYPES[t["prog_type"]], t["descr"], t["result"],
                                         ", " + t["errstr"] if t["errstr"] else "")]
    index = {}
    for fixup in t["fixups"]:
        index[fixup] = len(index)
        lines.append("; map m%d: %s" % (index[fixup], MAPS[fixup]))
    slot_map = {at: index[f] for f, ats in t["fixups"].items() for at in ats}
    for pc, (code, dst, src, off, imm) in enumerate(t["insns"]):
        if pc in slot_map:
            imm = slot_map[pc]
        lines.append(".raw %#x %d %d %d %d" % (code, dst, src, off, imm))
    return "\n".join(lines) + "\n"


def main(argv):
    if len(argv) not in (3, 4):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    src, out = argv[1], argv[2]
    tools_include = argv[3] if len(argv) == 4 else os.path.join(src, "tools/include")
    if not os.path.isfile(os.path.join(tools_include, "linux/filter.h")):
        die("%s has no linux/filter.h (name a tools/include as the third argument)"
            % tools_include, 2)
    if not os.path.isdir(os.path.join(src, SELFTESTS, "verifier")):
        die("%s has no %s/verifier" % (src, SELFTESTS), 2)
    tests = parse_dump(compile_and_run(src, tools_include, os.path.join(out, "build")))
    by_file, dropped, reasons = {}, [], {}
    names = {}
    for t in tests:
        why = drop_reason(t)
        if why:
            dropped.append("%s\t%s\t%s" % (t["file"], t["descr"], why))
            # The summary counts by kind; dropped.tsv has each test's own reason.
            key = re.sub(r" \(.*\)$| %s$" % re.escape(hex(t["flags"])), "", why)
            key = re.sub(r"^prog_type \d+ is", "prog_type is", key)
            reasons[key] = reasons.get(key, 0) + 1
            continue
        name = probe_name(t["descr"], names.setdefault(t["file"], set()))
        by_file.setdefault(t["file"], []).append(probe_text(t, name))
    for f in os.listdir(out):
        if f.endswith(".probes"):
            os.remove(os.path.join(out, f))
    for file, probes in by_file.items():
        with open(os.path.join(out, "%s.probes" % file), "w") as f:
            f.write("; %s/verifier/%s.c as XDP probes, made by scripts/rawtable_probes.py\n\n"
                    % (SELFTESTS, file))
            f.write("\n".join(probes))
    with open(os.path.join(out, "dropped.tsv"), "w") as f:
        f.write("file\ttest\treason\n" + "".join(d + "\n" for d in dropped))
    kept = len(tests) - len(dropped)
    print("%s: %d tests in %d files: %d kept as XDP probes, %d dropped"
          % (src, len(tests), len({t["file"] for t in tests}), kept, len(dropped)))
    for why, n in sorted(reasons.items(), key=lambda kv: -kv[1]):
        print("  dropped %4d: %s" % (n, why))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
