#!/usr/bin/env bash
# Runs every unit-test binary and every tests/*/test_*.sh script, then prints the
# combined "N passed, N failed" line. Exits non-zero if anything failed.
set -u
BUILD=${BUILD:-build}
pass=0; fail=0; bad=()
run_one() {  # $1 = label, rest = command
  local label=$1; shift
  local out; out=$("$@" 2>"$BUILD/tests/$label.err"); local rc=$?
  printf '%s\n' "$out"
  local line; line=$(printf '%s\n' "$out" | grep -E '[0-9]+ passed, [0-9]+ failed' | tail -n 1)
  if [ -n "$line" ]; then
    local p f; p=$(grep -oE '[0-9]+ passed' <<<"$line" | grep -oE '[0-9]+'); f=$(grep -oE '[0-9]+ failed' <<<"$line" | grep -oE '[0-9]+')
    pass=$((pass + p)); fail=$((fail + f))
  fi
  if [ $rc -ne 0 ] || [ -z "$line" ]; then
    [ -z "$line" ] && fail=$((fail + 1))
    bad+=("$label"); echo "---- $label (exit $rc) stderr:"; tail -n 40 "$BUILD/tests/$label.err"
  fi
}
mkdir -p "$BUILD/tests"
for t in "$BUILD"/tests/test_*; do
  case "$t" in *.err|*.d) continue;; esac
  [ -f "tests/unit/$(basename "$t").c" ] || continue  # (a binary left from a test since renamed or removed)
  [ -x "$t" ] && run_one "$(basename "$t")" "$t"
done
for s in tests/*/test_*.sh; do
  [ -f "$s" ] && run_one "$(basename "$s" .sh)" env BUILD="$BUILD" bash "$s"
done
[ ${#bad[@]} -gt 0 ] && echo "failing: ${bad[*]}"
echo "total: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ ${#bad[@]} -eq 0 ]
