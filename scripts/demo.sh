#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The demo behind `make demo`: start a throwaway redis-server on a free
# loopback port, run examples/stock_demo against it, and (when the CLI is
# built) show two overlapping `dlock run` invocations, the second waiting
# for the first: B's "got the lock" always comes after A's "releasing". The server is stopped by its pid and its directory removed
# on every exit path.
#
#   usage: scripts/demo.sh BUILD_DIR
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
BUILD=$1
STOCK_DEMO=$BUILD/examples/stock_demo
CLI=$BUILD/cli/dlock
if [ ! -x "$STOCK_DEMO" ]; then
  echo "demo: $STOCK_DEMO not found; build first (make build)" >&2
  exit 2
fi
for tool in redis-server redis-cli; do
  command -v "$tool" >/dev/null || { echo "demo: $tool not found (run scripts/install-deps.sh)" >&2; exit 2; }
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/dlock-demo.XXXXXX")
SERVER_PID=
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
  local f
  for f in "$TMP"/pid.*; do # `dlock run` jobs still running
    if [ -f "$f" ]; then kill "$(cat "$f")" 2>/dev/null || true; fi
  done
  if [ -n "$SERVER_PID" ]; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A free port below the ephemeral range (10000-22767, as the tests'
# servers: scripts/free-port). Between the probe and redis-server binding
# it another program could take it; the start is retried with a fresh
# port if so.
free_port() {
  if command -v python3 >/dev/null; then
    python3 "$(dirname "$0")/free-port"
    return
  fi
  local p
  for _ in $(seq 200); do
    p=$((10000 + RANDOM % 12768))
    # Without ss, a taken port shows when redis-server fails to start.
    if ! command -v ss >/dev/null || ! ss -Htln "sport = :$p" | grep -q .; then
      echo "$p"
      return
    fi
  done
  return 1
}

start_server() {
  local port=$1
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$TMP" --daemonize no --logfile "$TMP/redis.log" &
  SERVER_PID=$!
  for _ in $(seq 100); do # up to 5 s
    if redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG; then
      return 0
    fi
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then break; fi # exited: port taken?
    sleep 0.05
  done
  kill "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=
  return 1
}

PORT=
for _ in 1 2 3 4 5; do
  PORT=$(free_port) || { echo "demo: no free port found" >&2; exit 1; }
  if start_server "$PORT"; then break; fi
  PORT=
done
if [ -z "$PORT" ]; then
  echo "demo: redis-server did not start; its log:" >&2
  cat "$TMP/redis.log" >&2 || true
  exit 1
fi
URL=redis://127.0.0.1:$PORT
echo "== throwaway redis-server $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p') on $URL (pid $SERVER_PID)"
echo

echo "== 1. the stock counter: a non-atomic read-modify-write, without and with dlock"
status=0
"$STOCK_DEMO" -r "$URL" || status=$?

if [ -x "$CLI" ]; then
  echo
  echo "== 2. dlock run: job A takes the lock for 2 s; job B starts 0.5 s later and waits"
  now_us() {
    if [ -n "${EPOCHREALTIME:-}" ]; then echo "${EPOCHREALTIME//[!0-9]/}"; else echo $(($(date +%s%N) / 1000)); fi
  }
  T0=$(now_us)
  # Every line of both jobs goes through ONE pipe to ONE reader that adds
  # the time. A's program prints "releasing" before it exits, that is
  # before dlock releases the lock, and B is granted the lock only after
  # that release: so in a single pipe A's line always comes first. (Two
  # pipes with a reader each could show them in either order.)
  stamp() {
    local line d
    while IFS= read -r line; do
      d=$(($(now_us) - T0))
      printf '  +%d.%ds  %s\n' $((d / 1000000)) $((d / 100000 % 10)) "$line"
    done
  }
  job() { # letter, dlock options...
    local who=$1 rc=0
    shift
    # dlock's own messages (-v on B: the waiting) get the job's letter.
    "$CLI" -r "$URL" "$@" run --fence -w 20s demo-job -- sh -c \
      "echo '$who | got the lock (fencing token '\$DLOCK_FENCE'); working 2 s'; sleep 2; echo '$who | done; releasing the lock'" \
      2> >(sed -u "s/^dlock: /$who | dlock: /") &
    echo $! >"$TMP/pid.$who" # for cleanup, should the demo be interrupted
    wait $! || rc=$?
    rm -f "$TMP/pid.$who"
    echo "$rc" >"$TMP/rc.$who"
  }
  {
    job A &
    sleep 0.5
    echo "B | starting: the lock is held by A, so B waits (dlock -v reports each second)"
    job B -v &
    wait
  } 2>&1 | stamp
  for j in A B; do
    rc=$(cat "$TMP/rc.$j" 2>/dev/null || echo "?")
    echo "  job $j: dlock exited with status $rc"
    [ "$rc" = 0 ] || status=1
  done
fi

echo
if [ "$status" -eq 0 ]; then
  echo "== demo finished: ok"
else
  echo "== demo finished with status $status"
fi
exit "$status"
