#!/usr/bin/env bash
# The house rules (scripts/lint.sh) as part of `make test`: no session/call history in tracked text,
# no OCTET_* environment read in src/, src/ lines <= 120 columns and files <= 800 lines, and every
# bench record the code and docs cite exists. Prints lint's own "N passed, N failed" line.
set -u
exec bash "$(dirname "$0")/../../scripts/lint.sh"
