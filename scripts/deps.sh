#!/usr/bin/env bash
# Installs the Debian packages octet's build and tests need. Idempotent and
# non-interactive; run as root (or with sudo available).
set -euo pipefail
PKGS=(
  build-essential pkg-config clang libclang-rt-14-dev   # compilers, libFuzzer + sanitizers
  libjansson-dev libpcre2-dev                           # JSON, tokenizer regexes
  libmicrohttpd-dev libcurl4-openssl-dev                # HTTP server, benchmark client
  python3 python3-numpy                                 # fixture generators (tools/ref)
  gnuplot-nox                                           # charts
  prometheus                                            # promtool (metrics format check)
)
# Node.js + npm run the official OpenAI client in the server tests; use the machine's own
# when it has one (Debian's npm conflicts with an externally installed node).
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || PKGS+=(nodejs npm)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#PKGS[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
