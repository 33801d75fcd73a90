#!/usr/bin/env bash
# Rebuilds the loader's own test objects (committed, so the tests need no clang).
set -euo pipefail
cd "$(dirname "$0")"
for c in features.c ksym_types.c; do
	clang-19 -O2 -g -target bpf -mcpu=v3 -I/usr/include/x86_64-linux-gnu -c "$c" -o "${c%.c}.o"
done
