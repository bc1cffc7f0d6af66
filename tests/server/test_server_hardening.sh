#!/usr/bin/env bash
# What a hostile or careless client meets at `octet serve` (stories260K, loopback): a client
# that half-closes after its request still gets its whole answer (whole and streamed); a
# request sent one byte at a time, a body shorter than its Content-Length and an idle
# connection get a 408 JSON answer and are closed (--http-timeout); one address is held to
# --max-connections-per-ip while another still gets in; POST needs Content-Type
# application/json (415); only known Host values are answered (403); /v1/models shows no
# file path; libmicrohttpd's own errors (431, 414, 400 bad chunking, 505) and conflicting
# Content-Length headers (400) get the JSON error shape; a 64 MB body gets its 413; an empty
# --api-key is refused and a non-loopback --host without a key warns; a second SIGTERM during
# shutdown exits at once. Waits are blocking reads with a bound, never sleep-polls.
# Prints "N passed, N failed" last.
set -u
BUILD=${BUILD:-build}
OCTET="$BUILD/octet"
MODEL=../shared/models/stories260K.gguf
. tests/lib.sh
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
[ -x "$OCTET" ] || { echo "no $OCTET"; echo "0 passed, 1 failed"; exit 1; }

# start_server NAME ARGS... → PORT and SPID once it prints "serving ... on http://HOST:PORT"
# (read from a FIFO, so this blocks until then or until it exits); log in $tmp/NAME.log
start_server() {
  local name=$1; shift
  local fifo="$tmp/$name.fifo" line fd
  PORT=""
  mkfifo "$fifo"
  "$OCTET" serve --model "$MODEL" --port 0 "$@" >"$fifo" 2>"$tmp/$name.log" &
  SPID=$!; pids+=("$SPID")
  exec {fd}<"$fifo"
  while IFS= read -r -t 60 -u "$fd" line; do
    if [[ $line =~ serving\ .*\ on\ http://[^:]+:([0-9]+)$ ]]; then PORT=${BASH_REMATCH[1]}; break; fi
  done
  cat <&"$fd" >/dev/null &
  exec {fd}<&-
  [ -n "$PORT" ] || { bad "server $name did not start: $(tail -3 "$tmp/$name.log")"; return 1; }
}
# wait_log FILE PATTERN: blocks (tail -f, woken by inotify) until a line of FILE matches; 60 s bound
wait_log() {
  local fd pid rc
  exec {fd}< <(exec timeout 60 tail -n +1 -f "$1")
  pid=$!
  grep -q -m1 -E -- "$2" <&"$fd"; rc=$?
  kill "$pid" 2>/dev/null; exec {fd}<&-
  return $rc
}

# raw.py PORT CASE → prints what the case observed (one JSON line); the cases are below
cat >"$tmp/raw.py" <<'PY'
import json, socket, sys, time
port, case = int(sys.argv[1]), sys.argv[2]
def conn(src="127.0.0.1"):
    s = socket.socket(); s.bind((src, 0)); s.connect(("127.0.0.1", port)); s.settimeout(60); return s
def read_all(s):
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b: break
            out += b
    except (ConnectionResetError, socket.timeout) as e:
        out += b"<%s>" % type(e).__name__.encode()
    return out
def parse(raw):  # → (status, headers dict, body) with chunked bodies decoded
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1]) if lines[0].startswith("HTTP/") else 0
    h = {l.split(":", 1)[0].lower(): l.split(":", 1)[1].strip() for l in lines[1:] if ":" in l}
    if h.get("transfer-encoding") == "chunked":
        out = b""
        while body:
            size, _, rest = body.partition(b"\r\n")
            n = int(size, 16)
            if n == 0: break
            out += rest[:n]; body = rest[n + 2:]
        body = out
    return status, h, body
def post(body, extra=b"", ctype=b"application/json", host=b"127.0.0.1", path=b"/v1/completions"):
    return (b"POST " + path + b" HTTP/1.1\r\nHost: " + host + b"\r\nContent-Type: " + ctype +
            b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n" + extra + b"\r\n" + body)
def result(raw):
    st, h, b = parse(raw)
    try: j = json.loads(b)
    except Exception: j = None
    print(json.dumps({"status": st, "json": j, "body": b.decode("utf-8", "replace"), "headers": h}))
req = json.dumps({"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0}).encode()
if case == "half":          # request, then shutdown(SHUT_WR), then read everything
    s = conn(); s.sendall(post(req)); s.shutdown(socket.SHUT_WR); result(read_all(s))
elif case == "half_stream":
    r = json.dumps({"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0, "stream": True}).encode()
    s = conn(); s.sendall(post(r)); s.shutdown(socket.SHUT_WR); result(read_all(s))
elif case == "slow":        # one byte every 0.2 s, for up to 100 s: the server must answer first
    s = conn(); s.settimeout(0.2); msg = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 500
    out, sent = b"", 0
    for i in range(len(msg)):
        try: s.send(msg[i:i + 1]); sent += 1
        except OSError: break
        try:
            b = s.recv(4096)
            if not b: break
            out += b
        except socket.timeout: pass
        except ConnectionResetError: break
    s.settimeout(60); out += read_all(s); result(out)
elif case == "short_body":  # Content-Length 100, 10 bytes sent, then nothing
    s = conn(); s.sendall(post(b"x" * 100)[:-90]); result(read_all(s))
elif case == "idle":        # connects and sends nothing
    s = conn(); result(read_all(s))
elif case == "per_ip":      # LIMIT idle connections from 127.0.0.1; one more from there; one from 127.0.0.2
    limit = int(sys.argv[3]); held = [conn() for _ in range(limit)]
    x = conn(); x.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    refused = read_all(x)
    y = conn("127.0.0.2"); y.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    other = parse(read_all(y))[0]
    print(json.dumps({"refused": refused.decode("latin-1")[:100], "other": other}))
elif case == "ctype":
    s = conn(); s.sendall(post(req, ctype=sys.argv[3].encode(), extra=b"Connection: close\r\n")); result(read_all(s))
elif case == "host":
    s = conn(); s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: " + sys.argv[3].encode() + b"\r\nConnection: close\r\n\r\n")
    result(read_all(s))
elif case == "431":
    s = conn(); s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 70000 + b"\r\n\r\n")
    result(read_all(s))
elif case == "414":
    s = conn(); s.sendall(b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); result(read_all(s))
elif case == "chunked":
    s = conn(); s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          b"Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n"); result(read_all(s))
elif case == "505":
    s = conn(); s.sendall(b"GET /health HTTP/2.0\r\nHost: 127.0.0.1\r\n\r\n"); result(read_all(s))
elif case == "dup_length":
    s = conn(); s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          b"Content-Length: 5\r\nContent-Length: " + str(len(req)).encode() + b"\r\n\r\n" + req)
    result(read_all(s))
PY
raw() { python3 "$tmp/raw.py" "$PORT" "$@" >"$tmp/out" 2>"$tmp/raw.err" || echo "raw.py $*: $(tail -2 "$tmp/raw.err")" >&2; }
# chk EXPR...: Python expressions over r (raw.py's JSON line)
chk() { python3 - "$tmp/out" "$@" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read() or "{}")
for e in sys.argv[2:]:
    if not eval(e): sys.exit("assert failed: " + e + "\n  got: " + json.dumps(r)[:600])
PY
}
ERR='r["json"] and set(r["json"]["error"])=={"message","type","param","code"} and r["json"]["error"]["message"]'

gen=$("$OCTET" generate --model "$MODEL" --prompt "Once upon a time" --max-tokens 24 --json 2>/dev/null)
gtext=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["text"], end="")' "$gen")

if start_server main --served-model-name stories --num-kv-blocks 64 --max-model-len 256 --http-timeout 2 \
                     --allowed-hosts api.example; then
  # ---- half-close: the whole answer still comes ----
  raw half
  A="$gtext" chk 'r["status"]==200' 'r["json"]["choices"][0]["text"]==__import__("os").environ["A"]' && ok || bad "half-closed client: $(cat "$tmp/out")"
  raw half_stream
  A="$gtext" chk 'r["status"]==200' 'r["body"].endswith("data: [DONE]\n\n")' \
     '"".join(json.loads(e[6:])["choices"][0]["text"] for e in r["body"].split("\n\n") if e.startswith("data: {"))==__import__("os").environ["A"]' \
     && ok || bad "half-closed streaming client: $(cat "$tmp/out")"
  # ---- request deadline (--http-timeout 2): slow headers, a short body, an idle connection ----
  raw slow; chk 'r["status"]==408' "$ERR" 'r["json"]["error"]["code"]=="request_timeout"' && ok || bad "1 byte/s client: $(cat "$tmp/out")"
  raw short_body; chk 'r["status"]==408' "$ERR" && ok || bad "short body: $(cat "$tmp/out")"
  raw idle; chk 'r["status"]==408' "$ERR" && ok || bad "idle connection: $(cat "$tmp/out")"
  # ---- Content-Type ----
  raw ctype text/plain; chk 'r["status"]==415' "$ERR" 'r["json"]["error"]["code"]=="unsupported_media_type"' && ok || bad "text/plain POST: $(cat "$tmp/out")"
  raw ctype 'application/x-www-form-urlencoded'; chk 'r["status"]==415' "$ERR" && ok || bad "form POST: $(cat "$tmp/out")"
  raw ctype 'application/json; charset=utf-8'; chk 'r["status"]==200' && ok || bad "json with charset: $(cat "$tmp/out")"
  # ---- Host ----
  raw host evil.example:8000; chk 'r["status"]==403' "$ERR" 'r["json"]["error"]["code"]=="host_not_allowed"' && ok || bad "foreign Host: $(cat "$tmp/out")"
  for h in "localhost:$PORT" "127.0.0.1:$PORT" "[::1]:$PORT" "api.example:$PORT" "API.example"; do
    raw host "$h"; chk 'r["status"]==200' && ok || bad "Host $h: $(cat "$tmp/out")"
  done
  raw host "127.0.0.1"
  chk 'r["json"]["data"][0]["id"]=="stories"' '"shared" not in r["body"] and ".gguf" not in r["body"]' && ok || bad "/v1/models shows a path: $(cat "$tmp/out")"
  # ---- libmicrohttpd's own errors and conflicting lengths: the JSON error shape ----
  for c in 431:431 414:414 chunked:400 505:505 dup_length:400; do
    raw "${c%%:*}"; chk "r['status']==${c##*:}" "$ERR" 'r["headers"].get("content-type")=="application/json"' && ok || bad "${c%%:*}: $(cat "$tmp/out")"
  done
  # ---- a 64 MB body: 413, with and without Expect: 100-continue ----
  head -c 67108864 /dev/zero >"$tmp/big"
  for expect in "Expect: 100-continue" "Expect:"; do
    CODE=$(curl -s -m 60 -o "$tmp/body" -w '%{http_code}' -H 'Content-Type: application/json' -H "$expect" \
                "http://127.0.0.1:$PORT/v1/completions" --data-binary @"$tmp/big")
    [ "$CODE" = 413 ] && grep -q request_too_large "$tmp/body" && ok || bad "64 MB body ($expect) → $CODE"
  done
  rm -f "$tmp/big"
  kill -TERM "$SPID"; wait "$SPID"; [ $? = 0 ] && ok || bad "main server exit"
fi

# ---- one address at its connection limit; another still gets in ----
if start_server perip --num-kv-blocks 64 --max-model-len 1024 --max-connections-per-ip 4 --http-timeout 120 --timeout-keep-alive 120; then
  raw per_ip 4; chk 'r["refused"]=="" or r["refused"].startswith("<")' 'r["other"]==200' && ok || bad "per-IP limit: $(cat "$tmp/out")"
  kill -TERM "$SPID"; wait "$SPID"
fi

# ---- startup checks ----
"$OCTET" serve --model "$MODEL" --port 0 --api-key "" >/dev/null 2>"$tmp/empty.log"; rc=$?
[ $rc = 2 ] && grep -q -- "--api-key is empty" "$tmp/empty.log" && ok || bad "empty --api-key: exit $rc, $(head -2 "$tmp/empty.log")"
if start_server open --host 0.0.0.0 --num-kv-blocks 64 --max-model-len 1024; then
  grep -q "warning: --host 0.0.0.0 is reachable from other machines and there is no --api-key" "$tmp/open.log" && ok || bad "no warning for --host 0.0.0.0 without a key"
  kill -TERM "$SPID"; wait "$SPID"
fi
if start_server openkey --host 0.0.0.0 --api-key k --num-kv-blocks 64 --max-model-len 1024; then
  grep -q "warning: --host" "$tmp/openkey.log" && bad "warning despite --api-key" || ok
  kill -TERM "$SPID"; wait "$SPID"
fi

# ---- a second SIGTERM while shutdown waits for a long generation exits at once ----
if start_server twice --model dummy:tiny --max-model-len 8192 --num-kv-blocks 1100 --shutdown-grace-ms 600000; then
  mkfifo "$tmp/long.fifo"
  curl -sN -m 120 -H 'Content-Type: application/json' "http://127.0.0.1:$PORT/v1/completions" \
       --data-binary '{"prompt":"Once","max_tokens":8000,"ignore_eos":true,"stream":true}' >"$tmp/long.fifo" &
  cpid=$!
  exec {fd}<"$tmp/long.fifo"; IFS= read -r -t 60 -u "$fd" first; cat <&"$fd" >/dev/null & exec {fd}<&-
  kill -TERM "$SPID"
  wait_log "$tmp/twice.log" "SIGTERM received" || bad "no shutdown line"
  kill -TERM "$SPID"; wait "$SPID"; rc=$?
  [ $rc = 1 ] && grep -q "second SIGTERM" "$tmp/twice.log" && ok || bad "second SIGTERM: exit $rc, $(tail -3 "$tmp/twice.log")"
  wait "$cpid" 2>/dev/null
fi

if grep -l -E "AddressSanitizer|LeakSanitizer|runtime error:" "$tmp"/*.log >/dev/null 2>&1; then
  bad "sanitizer reports: $(grep -h -A5 -E "AddressSanitizer|LeakSanitizer|runtime error:" "$tmp"/*.log | head -30)"
else ok; fi
echo "server_hardening: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
