#!/usr/bin/env bash
# Gives apt the Debian suites that hold the kernels bpfemu is judged against (issue 23):
# bullseye (5.10), bookworm-backports (6.12) and forky (7.2); bookworm (6.1) is the base
# system's. Each is pinned at priority 100, so that nothing installed is upgraded from them:
# they are only read by `apt-get download` (vmkernel/src/images.rs). Idempotent: writes the
# two files only when they differ, and runs `apt-get update` only then. Needs root.
set -euo pipefail

sources=/etc/apt/sources.list.d/bpfemu-kernels.sources
preferences=/etc/apt/preferences.d/bpfemu-kernels
want_sources='Types: deb
URIs: http://deb.debian.org/debian
Suites: bullseye bookworm-backports forky
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg'
want_preferences='Package: *
Pin: release n=bullseye
Pin-Priority: 100

Package: *
Pin: release n=bookworm-backports
Pin-Priority: 100

Package: *
Pin: release n=forky
Pin-Priority: 100'

changed=0
if [ "$(cat "$sources" 2>/dev/null)" != "$want_sources" ]; then
    printf '%s\n' "$want_sources" >"$sources"
    changed=1
fi
if [ "$(cat "$preferences" 2>/dev/null)" != "$want_preferences" ]; then
    printf '%s\n' "$want_preferences" >"$preferences"
    changed=1
fi
if [ "$changed" = 1 ]; then
    echo "kernel_apt_sources: added bullseye, bookworm-backports and forky (pin 100); apt-get update"
    apt-get update -qq
fi
