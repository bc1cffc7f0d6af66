# tests/lib.sh — the counters every tests/*/test_*.sh script shares (sourced, not run).
# ok / bad record one check; each script prints "NAME: $pass passed, $fail failed" last,
# which tests/run_all.sh adds up.
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
