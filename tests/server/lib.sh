# tests/server/lib.sh — what the `octet serve` test scripts share (sourced, not run; the caller sets
# BUILD, OCTET and MODEL first): the counters of tests/lib.sh, a scratch folder $tmp, the servers'
# pids (killed on exit, even on failure), starting a server on --port 0 and stopping it, requests
# (post, get) and assertions over a JSON body (py).
. tests/lib.sh  # pass/fail counters, ok, bad
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT

# start_server NAME ARGS... → sets URL (http://127.0.0.1:PORT) and SPID; log in $tmp/NAME.log, stdout
# in $tmp/NAME.out. The server's stdout comes through a FIFO, read line by line until it says
# "serving ... on URL" (printed once it listens); a server that exits first closes the FIFO and ends the read.
start_server() {
  local name=$1; shift
  local fifo="$tmp/$name.fifo" line port="" fd
  rm -f "$fifo"; mkfifo "$fifo"
  "$OCTET" serve --model "$MODEL" --port 0 --served-model-name stories "$@" >"$fifo" 2>"$tmp/$name.log" &
  SPID=$!; pids+=("$SPID")
  exec {fd}<"$fifo"
  while IFS= read -r -t 60 -u "$fd" line; do
    printf '%s\n' "$line" >>"$tmp/$name.out"
    if [[ $line =~ serving\ .*\ on\ http://127\.0\.0\.1:([0-9]+)$ ]]; then port=${BASH_REMATCH[1]}; break; fi
  done
  cat <&"$fd" >>"$tmp/$name.out" &  # the rest of its stdout, until it exits
  exec {fd}<&-
  if [ -z "$port" ]; then bad "server $name did not start: $(tail -5 "$tmp/$name.log")"; URL=""; return 1; fi
  URL="http://127.0.0.1:$port"
}
# stop_server PID: SIGTERM must end it with exit 0 (under SAN=1 this also means no leaks)
stop_server() { kill -TERM "$1" 2>/dev/null; wait "$1" 2>/dev/null; local rc=$?; [ $rc = 0 ] && ok || bad "server $1 exited $rc on SIGTERM"; }

# post PATH JSON → body in $tmp/body, status in $CODE; get PATH likewise
post() { CODE=$(curl -s -m 30 -o "$tmp/body" -w '%{http_code}' -H 'Content-Type: application/json' "$URL$1" --data-binary "$2"); }
get() { CODE=$(curl -s -m 30 -o "$tmp/body" -w '%{http_code}' "$URL$1"); }
# [A=VALUE] py EXPR... : asserts Python expressions over d = the JSON body, s = the raw
# body and a = $A (a value passed in from the shell)
py() { python3 - "$tmp/body" "$@" <<'PY'
import json, os, sys
a = os.environ.get("A", "")
s = open(sys.argv[1], encoding="utf-8", errors="replace").read()
try: d = json.loads(s)
except Exception: d = None
for e in sys.argv[2:]:
    if not eval(e): sys.exit("assert failed: " + e + "\n  body: " + s[:400])
PY
}
