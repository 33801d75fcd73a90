#!/bin/sh
# Rebuild the test objects of this directory (NAME.o from NAME.c), as tests/objects/build.sh
# does; the objects are committed so that the tests run without clang.
set -eu
cd "$(dirname "$0")"
CLANG=${CLANG:-clang-19}
for src in *.c; do
	"$CLANG" -O2 -g -target bpf -mcpu=v3 -I/usr/include/x86_64-linux-gnu \
		-fdebug-prefix-map="$(pwd)"=. -fdebug-compilation-dir=. \
		-c "$src" -o "${src%.c}.o"
done
