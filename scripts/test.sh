#!/usr/bin/env bash
# Runs every check bpfemu has: formatting, clippy, and the whole test suite (unit, property,
# bpf_conformance, and the tests that compare with the running kernel).
#
# On a fresh Debian machine it first installs what the tests need. Kernel tests need root and
# a working bpf() syscall; with BPFEMU_REQUIRE_KERNEL=1 (CI sets it) they fail rather than skip
# when the kernel is out of reach.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v cc >/dev/null || need_apt+=(build-essential)
# The FIB and router comparisons build network namespaces with iproute2.
command -v ip >/dev/null || need_apt+=(iproute2)
# tests/cli_progress runs bpfemu under a pseudo-terminal with script(1).
command -v script >/dev/null || need_apt+=(bsdutils)
# tests/run_cli compares bpfemu's dissection line and checksums with tcpdump's.
command -v tcpdump >/dev/null || need_apt+=(tcpdump)
# tests/verify_html loads the HTML report in headless Chromium.
command -v chromium >/dev/null || need_apt+=(chromium)
# scripts/python_env.sh makes a venv (Debian keeps ensurepip in python3-venv) for the tests that
# read JUnit, SARIF and the Action's YAML with those formats' own readers, and the Python module.
command -v python3 >/dev/null || need_apt+=(python3)
python3 -c 'import ensurepip' 2>/dev/null || need_apt+=(python3-venv)
# vmkernel's tests boot Debian's 5.10, 6.1, 6.12 and 7.2 kernels under QEMU (TCG), strip the
# binaries they carry (binutils) and read the initramfs back with GNU cpio.
command -v qemu-system-x86_64 >/dev/null || need_apt+=(qemu-system-x86)
command -v strip >/dev/null || need_apt+=(binutils)
command -v cpio >/dev/null || need_apt+=(cpio)
# scripts/selftests_vs_vms.sh builds each kernel's verifier selftests with clang-19 and
# llvm-objcopy-19.
command -v clang-19 >/dev/null || need_apt+=(clang-19)
command -v llvm-objcopy-19 >/dev/null || need_apt+=(llvm-19)
# libbpf-sys builds libbpf 1.7 from source (make) and links the system libelf and zlib.
for pkg in libelf-dev zlib1g-dev pkg-config make; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "installing: ${need_apt[*]}"
    apt-get update -qq && apt-get install -y -qq "${need_apt[@]}"
fi
# The suites that hold those kernels (bullseye, bookworm-backports, forky), pinned low so that
# nothing installed comes from them; the tests fetch the images into ~/.cache/bpfemu/kernels
# on first use (vmlinuz only, shared by concurrent tests through atomic renames).
./scripts/kernel_apt_sources.sh
if ! command -v cargo >/dev/null; then
    echo "cargo is not installed: install Rust with rustup (https://rustup.rs)" >&2
    exit 2
fi
for component in rustfmt clippy; do
    rustup component list --installed 2>/dev/null | grep -q "^$component" || rustup component add "$component"
done

if [ ! -d ../shared/conformance/bpf_conformance/tests ] && [ -z "${BPFEMU_CONFORMANCE_DIR:-}" ]; then
    echo "the bpf_conformance suite is expected at ../shared/conformance (or set BPFEMU_CONFORMANCE_DIR)" >&2
    exit 2
fi

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== cargo test"
cargo test --workspace --locked
# A sample of each kernel's own verifier selftests (issue 23): 5.10's and 6.1's raw instruction
# tables, 6.12's and 7.2's progs/verifier_s*.c, each judged by that kernel booted under QEMU, and
# 7.2's tests by the running 6.18; every difference from bpfemu --kernel must be one
# verifier/probes/KNOWN_DIFFERENCES explains. Needs root (6.18's judge) and QEMU.
if [ "$(id -u)" = 0 ] && command -v qemu-system-x86_64 >/dev/null; then
    echo "== each kernel's selftests: scripts/selftests_vs_vms.sh"
    status=0
    ./scripts/selftests_vs_vms.sh || status=$?
    if [ "$status" = 3 ] && [ "${BPFEMU_REQUIRE_KERNEL:-0}" != 1 ]; then
        echo "== each kernel's selftests: skipped (apt could not fetch the sources)"
    elif [ "$status" != 0 ]; then
        exit "$status"
    fi
elif [ "${BPFEMU_REQUIRE_KERNEL:-0}" = 1 ]; then
    echo "scripts/selftests_vs_vms.sh needs root and qemu-system-x86_64 (BPFEMU_REQUIRE_KERNEL=1)" >&2
    exit 1
else
    echo "== each kernel's selftests: skipped (needs root and qemu-system-x86_64)"
fi
# The Python module (pip install ./python, debug profile, reusing the build above) and its
# pytest examples, which compare it with the command line and the kernel.
echo "== Python module: scripts/python_tests.sh"
./scripts/python_tests.sh -q
# The JIT's other level (BPFEMU_JIT_OPT: trusted code without the optimiser, checked code with
# it) against the interpreter.
for level in none speed; do
    echo "== cargo test -p bpfemu-jit, BPFEMU_JIT_OPT=$level"
    BPFEMU_JIT_OPT=$level cargo test -p bpfemu-jit --locked
done
echo "== fuzz targets (nightly, ${BPFEMU_FUZZ_SECONDS:-30} s each)"
./scripts/fuzz.sh "${BPFEMU_FUZZ_SECONDS:-30}"
