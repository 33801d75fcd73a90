#!/usr/bin/env bash
# The kernel's verifier selftests as XDP programs, judged by the running kernel and by bpfemu
# (issue 27; not run by CI). Needs root and bpf() for the kernel's side.
#
#   scripts/verifier_selftests.sh [--cache DIR] [--out DIR] [--jobs N] [--timeout SEC]
#                                 [--bpfemu PATH] [--src DIR] [--rebuild]
#
# 1. Downloads Debian's linux-source-7.2 (forky) and, unless a bpftool >= 7.4 is at hand,
#    bpftool 7.5 from bookworm-backports, with `apt-get download` through a private apt
#    state in the cache (the system's apt configuration is neither read for sources nor
#    changed; nothing is installed). Unpacks only tools/, scripts/bpf_doc.py and Makefile.
# 2. Builds progs/verifier_*.c as XDP programs with ../shared/kernel-selftests/build.sh
#    (clang-19, llvm-objcopy-19, python3, bpftool >= 7.4).
# 3. For every object, JOBS objects at a time:
#    - the kernel's verdict, last log line and processed count with each program loaded by
#      real libbpf 1.7 (conformance/examples/libbpf_verdicts.rs, libbpf-sys 1.7 vendored;
#      the system's libbpf-dev is 1.1 on bookworm and is not used);
#    - `bpfemu diff --verifier --json`: the kernel's verdict again, with the programs loaded by
#      bpfemu's own loader (a difference from libbpf's is a loader bug, listed apart), and
#      bpfemu's error line taken as diff compares it with the kernel's;
#    - `bpfemu verify --json`: bpfemu's verdict (accepted, rejected or undecided) and count.
# 4. Writes OUT/results.tsv (file, program, kernel verdict, bpfemu verdict, kernel last line,
#    bpfemu last line, kernel processed, bpfemu processed, then the kernel's verdict, line
#    and count through bpfemu's loader), OUT/summary.txt and the lists OUT/false_accepts.txt,
#    false_rejects.txt, undecided.txt, not_loadable.txt, loader_differs.txt,
#    error_line_differs.txt, and unexplained.txt: the differences (verdict, error line,
#    processed count) not explained by a `selftest/OBJECT/PROGRAM  reason` entry of
#    verifier/probes/KNOWN_DIFFERENCES, and the entries that now agree; prints the summary
#    and the lists.
#
# Options (environment in brackets):
#   --cache DIR    downloads, sources and the build [BPFEMU_SELFTESTS_CACHE; default
#                  $XDG_CACHE_HOME/bpfemu-selftests, or /tmp/bpfemu-selftests]; never the repo
#   --out DIR      results [BPFEMU_SELFTESTS_OUT; default CACHE/results]
#   --jobs N       objects judged in parallel [JOBS; default 2]
#   --timeout SEC  limit of one bpfemu command on one object [default 900]
#   --bpfemu PATH  the binary [BPFEMU; default target/release/bpfemu: cargo build --release]
#   --libbpf PATH  the libbpf 1.7 judge [LIBBPF_JUDGE; default target/debug/examples/
#                  libbpf_verdicts: cargo build -p bpfemu-conformance --example libbpf_verdicts];
#                  "none" takes the kernel's verdict through bpfemu's loader instead
#   --src DIR      a Linux source tree to use instead of downloading linux-source-7.2
#   --rebuild      build the selftests again even if the cache holds a build
# BPFTOOL, CLANG, OBJCOPY are passed to build.sh. SHARED (default ../shared beside the repo)
# is where kernel-selftests/build.sh is.
#
# Exit: 0 when the run completed (whatever the findings), 1 when a step failed, 2 on usage.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HELPER=$ROOT/scripts/verifier_selftests.py
die() { echo "verifier_selftests.sh: $*" >&2; exit 1; }
usage() { awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 2; }

if [ -n "${XDG_CACHE_HOME:-}" ]; then
	CACHE=${BPFEMU_SELFTESTS_CACHE:-$XDG_CACHE_HOME/bpfemu-selftests}
else
	CACHE=${BPFEMU_SELFTESTS_CACHE:-/tmp/bpfemu-selftests}
fi
OUT=${BPFEMU_SELFTESTS_OUT:-}
JOBS=${JOBS:-2}
TIMEOUT=900
BPFEMU=${BPFEMU:-$ROOT/target/release/bpfemu}
LIBBPF_JUDGE=${LIBBPF_JUDGE:-$ROOT/target/debug/examples/libbpf_verdicts}
SRC=""
REBUILD=0
SHARED=${SHARED:-$ROOT/../shared}
while [ $# -gt 0 ]; do
	case $1 in
	--cache) [ $# -ge 2 ] || usage; CACHE=$2; shift 2 ;;
	--out) [ $# -ge 2 ] || usage; OUT=$2; shift 2 ;;
	--jobs) [ $# -ge 2 ] || usage; JOBS=$2; shift 2 ;;
	--timeout) [ $# -ge 2 ] || usage; TIMEOUT=$2; shift 2 ;;
	--bpfemu) [ $# -ge 2 ] || usage; BPFEMU=$2; shift 2 ;;
	--libbpf) [ $# -ge 2 ] || usage; LIBBPF_JUDGE=$2; shift 2 ;;
	--src) [ $# -ge 2 ] || usage; SRC=$2; shift 2 ;;
	--rebuild) REBUILD=1; shift ;;
	-h | --help) usage ;;
	*) echo "verifier_selftests.sh: unknown argument $1" >&2; usage ;;
	esac
done
[[ $JOBS =~ ^[1-9][0-9]*$ ]] || die "--jobs needs a positive number, not '$JOBS'"
[[ $TIMEOUT =~ ^[1-9][0-9]*$ ]] || die "--timeout needs a positive number of seconds, not '$TIMEOUT'"
OUT=${OUT:-$CACHE/results}

# ------------------------------------------------------------------ preconditions
for t in python3 tar xz dpkg-deb xargs; do
	command -v "$t" >/dev/null || die "$t not found"
done
for t in "${CLANG:-clang-19}" "${OBJCOPY:-llvm-objcopy-19}"; do
	command -v "$t" >/dev/null || die "$t not found (apt-get install clang-19 llvm-19)"
done
BUILD_SH=$SHARED/kernel-selftests/build.sh
[ -f "$BUILD_SH" ] || die "$BUILD_SH not found (set SHARED to the directory holding kernel-selftests/)"
[ -x "$BPFEMU" ] || die "$BPFEMU not found (cargo build --release, or --bpfemu PATH)"
[ -f "$HELPER" ] || die "$HELPER not found"
if [ "$LIBBPF_JUDGE" = none ]; then
	LIBBPF_JUDGE=-
else
	[ -x "$LIBBPF_JUDGE" ] || die "$LIBBPF_JUDGE not found (cargo build -p bpfemu-conformance --example libbpf_verdicts, or --libbpf none)"
fi
[ "$(id -u)" = 0 ] || die "the kernel's verdicts need root (bpf())"
case $(cd "$(dirname "$CACHE")" 2>/dev/null && pwd)/ in
"$ROOT"/*) die "the cache $CACHE is inside the repository; choose another (--cache)" ;;
esac
mkdir -p "$CACHE" "$OUT" || die "cannot create $CACHE or $OUT"
CACHE=$(cd "$CACHE" && pwd)
OUT=$(cd "$OUT" && pwd)
[[ $CACHE/ == "$ROOT"/* ]] && die "the cache $CACHE is inside the repository; choose another (--cache)"
LOG=$CACHE/log.txt
: >"$LOG"
echo "verifier_selftests.sh: cache $CACHE, results $OUT, details in $LOG" >&2

# ------------------------------------------------------------------ private apt
APT_DIR=$CACHE/apt
apt_opts() {
	printf '%s\n' -o "Dir::Etc::SourceList=$APT_DIR/sources.list" \
		-o "Dir::Etc::SourceParts=$APT_DIR/sources.list.d" \
		-o "Dir::State::Lists=$APT_DIR/lists" -o "Dir::Cache=$APT_DIR/cache" \
		-o "Dir::Etc::Preferences=$APT_DIR/preferences" \
		-o "Dir::Etc::PreferencesParts=$APT_DIR/preferences.d" \
		-o "APT::Sandbox::User=root" \
		-o "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false" \
		-o "Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false" \
		-o "Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false"
}
APT_READY=0
apt_ready() {
	[ $APT_READY = 1 ] && return 0
	command -v apt-get >/dev/null || die "apt-get not found (Debian's packages are needed, or --src DIR and BPFTOOL)"
	local keyring=/usr/share/keyrings/debian-archive-keyring.gpg
	[ -f "$keyring" ] || die "$keyring not found (apt-get install debian-archive-keyring)"
	mkdir -p "$APT_DIR/lists/partial" "$APT_DIR/cache/archives/partial" \
		"$APT_DIR/sources.list.d" "$APT_DIR/preferences.d"
	cat >"$APT_DIR/sources.list" <<-EOF
		deb [signed-by=$keyring] http://deb.debian.org/debian forky main
		deb [signed-by=$keyring] http://deb.debian.org/debian bookworm-backports main
	EOF
	: >"$APT_DIR/preferences"
	local opts
	mapfile -t opts < <(apt_opts)
	echo "== apt-get update (private state in $APT_DIR)" >>"$LOG"
	apt-get "${opts[@]}" update >>"$LOG" 2>&1 || die "apt-get update of forky and bookworm-backports failed (see $LOG)"
	APT_READY=1
}
# download PKG[/SUITE] -> prints the .deb's path (kept in CACHE/debs)
download() {
	local pkg=$1 name=${1%%/*} deb opts
	deb=$(ls "$CACHE"/debs/"${name}"_*.deb 2>/dev/null | head -1)
	if [ -z "$deb" ]; then
		apt_ready
		mapfile -t opts < <(apt_opts)
		mkdir -p "$CACHE/debs"
		echo "== apt-get download $pkg" >>"$LOG"
		(cd "$CACHE/debs" && apt-get "${opts[@]}" download "$pkg") >>"$LOG" 2>&1 ||
			die "apt-get download $pkg failed (see $LOG)"
		deb=$(ls "$CACHE"/debs/"${name}"_*.deb 2>/dev/null | head -1)
		[ -n "$deb" ] || die "apt-get download $pkg left no .deb in $CACHE/debs"
	fi
	echo "$deb"
}

# ------------------------------------------------------------------ bpftool >= 7.4
bpftool_ok() { # PATH -> 0 when its version is at least 7.4
	local v
	v=$("$1" version 2>/dev/null | awk 'NR == 1 { sub(/^v/, "", $2); print $2 }')
	[ -n "$v" ] || return 1
	awk -v v="$v" 'BEGIN { split(v, a, "."); exit !(a[1] > 7 || (a[1] == 7 && a[2] >= 4)) }'
}
if [ -n "${BPFTOOL:-}" ]; then
	bpftool_ok "$BPFTOOL" || die "BPFTOOL=$BPFTOOL is not a bpftool 7.4 or newer"
elif command -v bpftool >/dev/null && bpftool_ok "$(command -v bpftool)"; then
	BPFTOOL=$(command -v bpftool)
else
	BPFTOOL=$CACHE/bpftool/usr/sbin/bpftool
	if ! [ -x "$BPFTOOL" ]; then
		deb=$(download bpftool/bookworm-backports) || exit 1
		rm -rf "$CACHE/bpftool"
		dpkg-deb -x "$deb" "$CACHE/bpftool" || die "dpkg-deb -x $deb failed"
	fi
	bpftool_ok "$BPFTOOL" || die "$BPFTOOL (from bookworm-backports) does not run or is older than 7.4"
fi
echo "bpftool: $BPFTOOL ($("$BPFTOOL" version | head -1))" >>"$LOG"

# ------------------------------------------------------------------ sources
if [ -n "$SRC" ]; then
	[ -d "$SRC/tools/testing/selftests/bpf/progs" ] || die "--src $SRC has no tools/testing/selftests/bpf/progs"
	SRC=$(cd "$SRC" && pwd)
else
	SRC=$CACHE/src/linux-source-7.2
	if ! [ -f "$SRC/.unpacked" ]; then
		deb=$(download linux-source-7.2) || exit 1
		echo "verifier_selftests.sh: unpacking $(basename "$deb")" >&2
		rm -rf "$CACHE/src"
		mkdir -p "$CACHE/src"
		dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$CACHE/src" ./usr/src/linux-source-7.2.tar.xz ||
			die "$deb holds no usr/src/linux-source-7.2.tar.xz"
		tar -xJf "$CACHE/src/usr/src/linux-source-7.2.tar.xz" -C "$CACHE/src" \
			linux-source-7.2/tools linux-source-7.2/scripts/bpf_doc.py linux-source-7.2/Makefile ||
			die "unpacking linux-source-7.2.tar.xz failed"
		rm -rf "$CACHE/src/usr"
		[ -d "$SRC/tools/testing/selftests/bpf/progs" ] || die "$SRC has no tools/testing/selftests/bpf/progs"
		touch "$SRC/.unpacked"
	fi
fi

# ------------------------------------------------------------------ build
BUILD=$CACHE/build
if [ $REBUILD = 1 ] || ! [ -s "$BUILD/programs.tsv" ] || [ "$BUILD/programs.tsv" -ot "$SRC/Makefile" ]; then
	echo "verifier_selftests.sh: building the selftests into $BUILD" >&2
	BPFTOOL=$BPFTOOL JOBS=$JOBS bash "$BUILD_SH" "$SRC" "$BUILD" 2>&1 | tee -a "$LOG" | tail -4 >&2
	[ "${PIPESTATUS[0]}" = 0 ] || die "build.sh failed (see $LOG)"
fi
[ -s "$BUILD/programs.tsv" ] || die "$BUILD/programs.tsv is missing: the build produced nothing (see $LOG)"
nobj=$(ls "$BUILD"/obj/*.o 2>/dev/null | wc -l)
[ "$nobj" -gt 0 ] || die "no objects in $BUILD/obj"

# ------------------------------------------------------------------ judge
RAW=$OUT/raw
rm -rf "$RAW"
mkdir -p "$RAW"
echo "verifier_selftests.sh: judging $nobj objects ($(($(wc -l <"$BUILD/programs.tsv") - 1)) programs), $JOBS at a time, with $BPFEMU" >&2
T0=$(date +%s)
# Largest objects first, so the slow ones do not finish last.
ls -S "$BUILD"/obj/*.o | xargs -P "$JOBS" -I{} python3 "$HELPER" judge "$BPFEMU" "$LIBBPF_JUDGE" {} "$RAW" "$TIMEOUT" ||
	die "judging failed (see the messages above)"
echo "verifier_selftests.sh: judged in $(($(date +%s) - T0)) s" >&2
{
	echo "kernel	$(uname -r)"
	echo "bpfemu	$BPFEMU ($(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null))"
	echo "bpftool	$("$BPFTOOL" version | head -1)"
	if [ "$LIBBPF_JUDGE" = - ]; then
		echo "kernel_judge	bpfemu diff --verifier (bpfemu's loader)"
	else
		echo "kernel_judge	$LIBBPF_JUDGE (libbpf 1.7)"
	fi
	cat "$BUILD/SOURCES"
} >"$OUT/SOURCES"

python3 "$HELPER" report "$BUILD/programs.tsv" "$RAW" "$OUT" || die "the report failed"
echo "verifier_selftests.sh: results in $OUT (results.tsv, summary.txt, *.txt lists)" >&2
