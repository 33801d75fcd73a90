#!/usr/bin/env python3
"""Single-byte mutants of the example corpus, as files, for judging by other kernels.

    scripts/corpus_mutants.py [--seed N] [--count N] [--from DIR] OUT

Each mutant is one corpus object (DIR, default examples/xdp/build) with one byte of one
executable section (a program's instructions), or with --maps also of a map or global data
section, XORed with a random non-zero value, the ELF otherwise intact, written as
OUT/NAME_mNNNN.o. The same seed gives the same mutants.
tests/mutants_vs_kernel.rs judges such mutants by the running kernel; this script feeds
scripts/kernel_matrix.sh, which judges them by the kernels booted in VMs:

    scripts/corpus_mutants.py --seed 7 --count 400 /tmp/mutants
    scripts/kernel_matrix.sh --kernels 5.10,6.1,6.12,7.2 --out /tmp/mutants-matrix /tmp/mutants
"""

import argparse
import os
import random
import struct
import sys

SHF_EXECINSTR = 0x4


# Sections whose bytes describe maps: BTF-defined and legacy map definitions, global data.
MAP_SECTIONS = (".maps", "maps", ".data", ".rodata", ".bss")


def mutable_sections(elf, with_maps):
    """(offset, size) of each executable section of a little-endian ELF64 file, and with
    `with_maps` of each section that defines maps or global data (`.bss` has no bytes in the
    file and is left out)."""
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        return []
    (shoff,) = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    headers = []
    for i in range(shnum):
        at = shoff + i * shentsize
        if at + 40 > len(elf):
            return []
        headers.append(struct.unpack_from("<IIQQQQ", elf, at))
    if shstrndx >= len(headers):
        return []
    names_at = headers[shstrndx][4]

    def name(header):
        start = names_at + header[0]
        return elf[start : elf.index(b"\0", start)].decode("latin-1")

    sections = []
    for header in headers:
        _, kind, flags, _, offset, size = header
        if size < 8 or offset + size > len(elf) or kind == 8:  # SHT_NOBITS
            continue
        if flags & SHF_EXECINSTR or (with_maps and name(header).startswith(MAP_SECTIONS)):
            sections.append((offset, size))
    return sections


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=400)
    parser.add_argument("--from", dest="source", default="examples/xdp/build")
    parser.add_argument(
        "--maps",
        action="store_true",
        help="flip bytes of map definitions and global data too",
    )
    args = parser.parse_args(argv)
    if args.count < 1:
        print("corpus_mutants.py: --count needs a positive number", file=sys.stderr)
        return 2
    objects = sorted(
        os.path.join(args.source, f) for f in os.listdir(args.source) if f.endswith(".o")
    )
    originals = [(path, open(path, "rb").read()) for path in objects]
    originals = [(p, d, mutable_sections(d, args.maps)) for p, d in originals]
    originals = [entry for entry in originals if entry[2]]
    if not originals:
        print("corpus_mutants.py: no BPF object with code in %s" % args.source, file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    rng = random.Random(args.seed)
    for n in range(args.count):
        path, data, sections = rng.choice(originals)
        offset, size = rng.choice(sections)
        mutant = bytearray(data)
        mutant[offset + rng.randrange(size)] ^= rng.randrange(1, 256)
        stem = os.path.basename(path)[: -len(".o")].replace(".", "_")
        with open(os.path.join(args.out, "%s_m%04d.o" % (stem, n)), "wb") as f:
            f.write(mutant)
    print("%d mutants of %d objects in %s" % (args.count, len(originals), args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
