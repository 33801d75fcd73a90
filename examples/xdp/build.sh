#!/bin/sh
# Rebuild every XDP object in this directory at -mcpu=v2, v3 and v4.
#
#   build/NAME.vN.o   from NAME.c compiled with -mcpu=vN
#
# The objects are committed so that bpfemu's tests run without clang.  The
# build is deterministic: it runs from this directory with relative paths and
# maps the compilation directory to "." in DWARF/BTF, so the bytes do not
# depend on where the repository is checked out.
set -eu

cd "$(dirname "$0")"
CLANG=${CLANG:-clang-19}
MCPUS=${MCPUS:-"v2 v3 v4"}

if ! command -v "$CLANG" >/dev/null 2>&1; then
	echo "build.sh: $CLANG not found (apt-get install clang-19)" >&2
	exit 1
fi

mkdir -p build
for src in *.c; do
	name=${src%.c}
	for cpu in $MCPUS; do
		out=build/$name.$cpu.o
		"$CLANG" -O2 -g -target bpf -mcpu="$cpu" \
			-I/usr/include/x86_64-linux-gnu \
			-Wall -Wno-unused-variable -Wno-unused-function \
			-fdebug-prefix-map="$(pwd)"=. \
			-fdebug-compilation-dir=. \
			-c "$src" -o "$out"
		echo "  CC  $out"
	done
done
