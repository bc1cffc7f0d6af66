#!/usr/bin/env bash
# bundle.sh BUILD_DIR — packs a build for a machine that lacks the Debian libraries it was linked
# against (the GPU machine's image has CUDA, a C++ runtime and glibc, not jansson, libmicrohttpd,
# libcurl or PCRE2): BUILD_DIR/lib/ receives every shared library `ldd` resolves for the binaries
# except the system's own (glibc, the C++ runtime) and CUDA's (the driver and toolkit the machine
# provides), and BUILD_DIR/octet-bundle.tar.xz holds octet, gpu/ and lib/. `make CUDA=1 bundle` links
# the binaries with an $ORIGIN rpath, so the unpacked bundle runs with no LD_LIBRARY_PATH.
set -eu
B=${1:?usage: scripts/bundle.sh BUILD_DIR}
[ -x "$B/octet" ] || { echo "bundle: $B/octet not found (build it first)" >&2; exit 2; }
bins=("$B/octet")
[ -d "$B/gpu" ] && for f in "$B"/gpu/*; do [ -x "$f" ] && [ ! -d "$f" ] && bins+=("$f"); done
mkdir -p "$B/lib"
# the system's and CUDA's libraries stay the target machine's own
system='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libutil|libresolv|libgcc_s|libstdc\+\+|libcuda|libcudart|libcublas|libcublasLt|libnvidia|libnccl)\.'
n=0
for b in "${bins[@]}"; do
  ldd "$b" | awk '/=> \// {print $1, $3}' | while read -r name path; do
    grep -Eq "$system" <<<"$name" && continue
    [ -f "$B/lib/$name" ] || { cp -L "$path" "$B/lib/$name"; echo "$name"; }
  done
done > "$B/lib/.added"
n=$(ls "$B/lib" | wc -l)
missing=$(for b in "${bins[@]}"; do ldd "$b" | grep 'not found' || true; done)
[ -z "$missing" ] || { echo "bundle: unresolved libraries: $missing" >&2; exit 1; }
rm -f "$B/lib/.added"
tar -C "$B" -cJf "$B/octet-bundle.tar.xz" octet lib $( [ -d "$B/gpu" ] && echo gpu )
echo "bundle: $B/octet-bundle.tar.xz ($((${#bins[@]})) binaries, $n libraries, $(du -h "$B/octet-bundle.tar.xz" | cut -f1))"
