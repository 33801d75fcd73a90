#!/bin/sh
# Rebuilds the two objects vmkernel/tests/kernels.rs boots every kernel with; they are
# committed so that the tests need no clang. Deterministic, as examples/xdp/build.sh.
#
#   accepted_everywhere.o  -mcpu=v3: every kernel accepts it
#   cpu_v4_sdiv.o          -mcpu=v4: a BPF_SDIV, rejected before 6.6
set -eu
cd "$(dirname "$0")"
CLANG=${CLANG:-clang-19}
build() {
	"$CLANG" -O2 -g -target bpf -mcpu="$2" -I/usr/include/x86_64-linux-gnu -Wall \
		-fdebug-prefix-map="$(pwd)"=. -fdebug-compilation-dir=. -c "$1.c" -o "$1.o"
}
build accepted_everywhere v3
build cpu_v4_sdiv v4
