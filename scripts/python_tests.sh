#!/usr/bin/env bash
# Builds the Python module (`python/`) into the environment scripts/python_env.sh makes and
# runs its pytest examples (`python/tests/`); arguments go to pytest (`-k firewall`, `-x`).
#
# The module is installed as a user installs it, `pip install ./python`, built by maturin with
# the debug profile into the workspace's target dir, so that CI reuses what `cargo build` and
# `cargo test` compiled there (a release build of the workspace would take minutes more).
set -euo pipefail
cd "$(dirname "$0")/.."
python=$(scripts/python_env.sh)
target_dir="${CARGO_TARGET_DIR:-$PWD/target}"

# The command line, whose messages and results the examples compare with the module's.
cargo build --quiet --bin bpfemu
export BPFEMU_BIN="$target_dir/debug/bpfemu"

# maturin is in the environment already: no isolated build environment to download (its
# pip hook runs `maturin` from the PATH).
PATH="$(dirname "$python"):$PATH" MATURIN_PEP517_ARGS="--profile dev" "$python" -m pip install --quiet \
    --disable-pip-version-check --no-build-isolation --no-deps --force-reinstall ./python

exec "$python" -m pytest python/tests "$@"
