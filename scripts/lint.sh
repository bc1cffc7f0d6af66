#!/usr/bin/env bash
# lint.sh — the repository's house rules, checked on the tracked files (run by `make lint`, which
# `make test` runs first). Fails, naming file and line, on:
#   - a reference to a development session or device call in tracked text (history lives in git:
#     code, docs and records say what is and why, in the present tense);
#   - an OCTET_* environment variable read in src/ (tuning lives in struct cuda_tuning, user
#     choices are flags; a string literal naming one is how such a read starts);
#   - a source line in src/ over 120 columns;
#   - a file in src/ over 800 lines;
#   - a bench/ record named in src/, docs/ or the README that does not exist.
set -u
shopt -s lastpipe  # (report runs at the end of pipelines and must set fail here)
cd "$(dirname "$0")/.."
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  files() { git ls-files -- "$@"; }
else  # an unpacked tarball: every file under the given paths
  files() { find "$@" -type f 2>/dev/null | sed 's|^\./||'; }
fi
fail=0
report() {  # report TITLE < lines
  local out; out=$(cat)
  [ -z "$out" ] && return
  echo "lint: $1"; printf '%s\n' "$out" | head -n 40 | sed 's/^/  /'
  local n; n=$(printf '%s\n' "$out" | wc -l); [ "$n" -gt 40 ] && echo "  ... and $((n - 40)) more"
  fail=1
}

# 1. session / call references (the words are assembled so this file does not match itself)
S='[Ss]ession'; C='[Cc]all'
hist="\\b($S|$C)s? ?#?[0-9]+|\\b($S|$C)s [0-9]+ *(–|-|and|to) *[0-9]+"
files . | grep -v -E '^(tests/data|tests/fuzz/corpus|models)/' | while IFS= read -r f; do
  [ -f "$f" ] && grep -IHnE "$hist" "$f" 2>/dev/null
done | report "names a development session or device call (git keeps history; say what is and why)"
files . | grep -E '(^|[/_.-])(s[0-9]+c[0-9]+|s[0-9]+|call[0-9]+|session[0-9]+)([/_.-]|$)' \
  | report "a file named by session or call (name records by topic)"

# 2. OCTET_* environment reads in src/
files src | grep -E '\.(c|h|cu|cuh)$' | while IFS= read -r f; do
  grep -HnE '"OCTET_[A-Z0-9_]+"|getenv *\( *[a-z_]+ *\)|cuda_env_int' "$f"
done | report "reads an OCTET_* environment variable in src/ (use struct cuda_tuning or a flag)"

# 3. long lines, 4. long files
files src | grep -E '\.(c|h|cu|cuh)$' | while IFS= read -r f; do
  awk -v f="$f" 'length($0) > 120 { printf "%s:%d: %d columns\n", f, FNR, length($0) }' "$f"
done | report "a source line over 120 columns"
files src | grep -E '\.(c|h|cu|cuh)$' | while IFS= read -r f; do
  n=$(wc -l < "$f"); [ "$n" -gt 800 ] && echo "$f: $n lines"
done | report "a file in src/ over 800 lines (split it by what it owns)"

# 5. records cited by the code and docs exist
files src docs README.md | grep -vE '\.(png|gguf|bin)$' | while IFS= read -r f; do
  grep -oHnE 'bench/[A-Za-z0-9_./-]*[A-Za-z0-9_]\.(md|json|jsonl|tsv|txt|png|csv)' "$f" 2>/dev/null | while IFS= read -r hit; do
    path=${hit#*:*:}; [ -e "$path" ] || echo "$hit (missing)"
  done
done | report "cites a bench record that does not exist"

if [ $fail -eq 0 ]; then echo "lint: 1 passed, 0 failed"; else echo "lint: 0 passed, 1 failed"; fi
exit $fail
