#!/usr/bin/env bash
# test_bundle.sh — scripts/bundle.sh on this machine's build: the bundle holds the binary and the
# Debian libraries it loads (jansson, libmicrohttpd, libcurl and theirs), not glibc, the C++ runtime
# or CUDA's, and the binary runs from the unpacked bundle with those libraries. (`make CUDA=1 bundle`
# adds the $ORIGIN rpath; scripts/gpu_check.sh runs the bundle on the GPU machine, given the folder or the
# archive.)
set -u
. tests/lib.sh
BUILD=${BUILD:-build}
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
mkdir -p "$T/b" && cp "$BUILD/octet" "$T/b/octet"
out=$(bash scripts/bundle.sh "$T/b" 2>&1); rc=$?
[ $rc = 0 ] && grep -q '^bundle: .*octet-bundle.tar.xz (1 binaries, [0-9]* libraries' <<<"$out" && ok || bad "bundle.sh: rc $rc: $out"
for l in libjansson.so.4 libmicrohttpd.so.12 libcurl.so.4 libpcre2-8.so.0; do
  [ -f "$T/b/lib/$l" ] && ok || bad "bundle: lib/$l missing"
done
for l in libc.so.6 libm.so.6 libstdc++.so.6 libgcc_s.so.1 ld-linux-x86-64.so.2; do
  [ ! -e "$T/b/lib/$l" ] && ok || bad "bundle: lib/$l is the system's own and must not be bundled"
done
mkdir -p "$T/u" && tar -C "$T/u" -xJf "$T/b/octet-bundle.tar.xz"
[ "$(ls "$T/u" | tr '\n' ' ')" = "lib octet " ] && ok || bad "bundle contents: $(ls "$T/u")"
v=$(LD_LIBRARY_PATH="$T/u/lib" "$T/u/octet" --version 2>&1) && grep -q '^octet ' <<<"$v" && ok || bad "bundled octet: $v"
# scripts/gpu_check.sh takes the archive itself as OCTET_BIN: unpacked, the bundled binary names its commit
# in the summary (the probe stage finds no GPU here and fails nothing); a file that is no bundle: exit 2
out=$(OCTET_BIN="$T/b/octet-bundle.tar.xz" bash scripts/gpu_check.sh "$T/gc" probe 2>&1); rc=$?
[ $rc = 0 ] && grep -q "binary: $(LD_LIBRARY_PATH="$T/u/lib" "$T/u/octet" --version)  date:" "$T/gc/summary.txt" && ok ||
  bad "gpu_check with a bundle archive: rc $rc: $out $(cat "$T/gc/summary.txt" 2>/dev/null)"
echo junk > "$T/junk.tar.xz"
out=$(OCTET_BIN="$T/junk.tar.xz" bash scripts/gpu_check.sh "$T/gc2" probe 2>&1); rc=$?
[ $rc = 2 ] && grep -q "OCTET_BIN=$T/junk.tar.xz: not a bundle archive" <<<"$out" && ok || bad "gpu_check, junk archive: rc $rc: $out"
# a build folder without the binary: a one-line error, exit 2
out=$(bash scripts/bundle.sh "$T/none" 2>&1); rc=$?
[ $rc = 2 ] && grep -q "bundle: $T/none/octet not found" <<<"$out" && ok || bad "missing binary: rc $rc: $out"
echo "bundle: $pass passed, $fail failed"
