#!/usr/bin/env bash
# The action's install step: bpfemu built from the action's own checkout (the revision the
# workflow pinned) into ~/.bpfemu, unless the cache restored it already; then on PATH.
set -euo pipefail
root="${BPFEMU_INSTALL_ROOT:-$HOME/.bpfemu}"
if [ ! -x "$root/bin/bpfemu" ]; then
    if ! command -v cargo >/dev/null; then
        echo "::error title=bpfemu::cargo is not installed on this runner (use a Rust toolchain action first)"
        exit 2
    fi
    cargo install --locked --root "$root" --path "$GITHUB_ACTION_PATH" bpfemu
fi
echo "$root/bin" >> "$GITHUB_PATH"
