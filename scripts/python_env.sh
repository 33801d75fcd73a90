#!/usr/bin/env bash
# Makes (once) the Python environment bpfemu's tests use, at target/pyenv, and prints its
# interpreter's path. Idempotent and quick when the environment is already there: tests call
# it before they need Python (`BPFEMU_PYTHON` names another interpreter instead).
set -euo pipefail
cd "$(dirname "$0")/.."
env_dir="${BPFEMU_PYENV:-$PWD/target/pyenv}"
requirements=scripts/python-requirements.txt
stamp="$env_dir/.requirements"
# Tests run in parallel: one of them builds the environment, the others wait for it.
mkdir -p "$(dirname "$env_dir")"
exec 9>"$env_dir.lock"
flock 9
if [ -x "$env_dir/bin/python" ] && cmp -s "$requirements" "$stamp"; then
    echo "$env_dir/bin/python"
    exit 0
fi
{
    python3 -m venv "$env_dir"
    "$env_dir/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
    cp "$requirements" "$stamp"
} >&2
echo "$env_dir/bin/python"
