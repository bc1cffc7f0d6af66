#!/usr/bin/env bash
# Runs the command lines in README.md's code blocks as a reader would, from a folder laid out
# like the repository (build/, tests/, models/, and ../shared beside it), so the README's
# examples cannot rot. Installation and build steps (scripts/deps.sh, make) are left to the
# harness; commands that take minutes on 2 CPU cores get smaller sizes appended (later flags
# override earlier ones): bench sweep a short grid, eval needle one short cell. Each must exit 0.
set -u
BUILD=${BUILD:-build}
. tests/lib.sh
repo=$(pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/main"
ln -s "$repo/$BUILD" "$tmp/main/build"
for d in tests models scripts docs; do ln -s "$repo/$d" "$tmp/main/$d"; done
ln -s "$(cd "$repo/.." && pwd)/shared" "$tmp/shared"

# the README's indented code lines, continuation lines joined
python3 - README.md >"$tmp/cmds" <<'PY'
import re, sys
lines = open(sys.argv[1]).read().split("\n")
cmds, cur = [], None
for ln in lines:
    if cur is not None:
        cur += " " + ln.strip()
    elif re.match(r"^    \S", ln) and not ln.lstrip().startswith("|"):
        cur = ln.strip()
    else:
        continue
    if cur.endswith("\\"):
        cur = cur[:-1].rstrip()
        continue
    cmds.append(cur)
    cur = None
for c in cmds:
    print(c)
PY

n_run=0
while IFS= read -r line; do
  # installation and build steps are the harness's
  cmd=$(sed -E 's/^(bash scripts\/deps\.sh|make( -j[0-9]+)?( test)?)( && (bash scripts\/deps\.sh|make( -j[0-9]+)?( test)?))*( && |$)//' <<<"$line")
  [ -z "$cmd" ] && continue
  case "$cmd" in
    *"bench sweep"*) cmd="$cmd --input-lens 32,64 --output-len 4 --serve-args '--threads 2' --quiet" ;;
    *"eval needle --level model"*) cmd="$cmd --lengths 512 --depths 50 --trials 1" ;;
  esac
  (cd "$tmp/main" && timeout 300 bash -c "$cmd") >"$tmp/out" 2>"$tmp/err" </dev/null; rc=$?
  n_run=$((n_run + 1))
  if [ $rc -eq 0 ]; then ok; else bad "README command exits $rc: $cmd
$(tail -n 5 "$tmp/err")"; fi
done <"$tmp/cmds"
# the README shows at least the sweep, needle, generate, perplexity and calibration examples
if [ "$n_run" -ge 7 ]; then ok; else bad "only $n_run README commands found"; fi
echo "readme: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
