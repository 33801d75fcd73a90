#!/bin/sh
# Rebuild test objects (NAME.o from NAME.c) in this directory, or in each DIR given
# (`tests/objects/build.sh tests/data/iter`), as examples/xdp/build.sh builds the corpus; the
# objects are committed so that the tests run without clang.
set -eu
CLANG=${CLANG:-clang-19}
[ $# -gt 0 ] || set -- "$(dirname "$0")"
for dir in "$@"; do
	(
		cd "$dir"
		for src in *.c; do
			"$CLANG" -O2 -g -target bpf -mcpu=v3 -I/usr/include/x86_64-linux-gnu \
				-fdebug-prefix-map="$(pwd)"=. -fdebug-compilation-dir=. \
				-c "$src" -o "${src%.c}.o"
		done
	)
done
