#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# What one contended critical section costs, beyond the peers' table: the
# S3 scenario (4 processes, one key, 2000 critical sections, hold ~0) run
# with dlock's worker against a fresh redis-server, for the default mode and
# for fair mode, measuring
#   - Redis commands the clients sent per critical section, and
#     notifications (PUBLISH, issued inside the release scripts) per
#     critical section, from the server's INFO commandstats (which also
#     counts the commands scripts run; only client-issued ones are summed);
#   - the workers' CPU time per critical section (user+sys of the W workers,
#     from bash's `times` of the child processes), and the redis-server's
#     (srv_us/cs, from INFO cpu);
#   - critical sections per second, the longest wait and the per-process
#     shares (from the workers' own out files).
# W, the number of contending processes, is 4 (S3) unless the third
# argument lists others: `bench/s3-cost.sh build 1 "4 16 64"` shows how the
# cost of a critical section grows with the number of waiters (issue 20).
# With more than 8 processes the shares column gives min..max.
# usage: bench/s3-cost.sh BUILD_DIR [ROUNDS] [W...]
set -euo pipefail
BUILD=$(cd "${1:?usage: bench/s3-cost.sh BUILD_DIR [ROUNDS] [W...]}" && pwd)
ROUNDS=${2:-1}
read -r -a WS <<<"${3:-4}"
WORKER=$BUILD/bench/dlock-bench-worker
[ -x "$WORKER" ] || { echo "s3-cost: build the worker first ($WORKER)" >&2; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/dlock-s3cost.XXXXXX")
PORT=$(python3 "$(dirname "$0")/../scripts/free-port")
redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP" \
  --logfile "$TMP/redis.log" >/dev/null &
RPID=$!
cleanup() { kill "$RPID" 2>/dev/null || true; wait "$RPID" 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT
for _ in $(seq 100); do
  [ "$(redis-cli -p "$PORT" ping 2>/dev/null)" = PONG ] && break; sleep 0.05
done

srvcpu() { # the redis-server's CPU seconds so far (user + sys), from INFO cpu
  redis-cli -p "$PORT" info cpu | tr -d '\r' |
    awk -F: '$1 == "used_cpu_sys" || $1 == "used_cpu_user" { t += $2 } END { printf "%.6f", t }'
}

calls() { # "cmd=calls ..." from INFO commandstats
  redis-cli -p "$PORT" info commandstats | tr -d '\r' |
    sed -n 's/^cmdstat_\([^:]*\):calls=\([0-9]*\),.*/\1=\2/p' | tr '\n' ' '
}

printf '%-8s %-6s %4s %8s %8s %8s %10s %10s %12s %10s  %s\n' mode round W "cs/s" "cmds/cs" "pub/cs" "cpu_us/cs" "srv_us/cs" "max_wait_ms" "p99_ms" "per-process"
for round in $(seq "$ROUNDS"); do
 for W in "${WS[@]}"; do
  for mode in default fair; do
    extra=(); [ "$mode" = fair ] && extra=(fair=1)
    key="s3cost:$mode:$round:$W"
    : > "$TMP/ctr"; rm -f "$TMP/holder"
    start=$(python3 -c "import time; print(\"%.6f\" % (time.time() + 1.0 + $W / 16.0))")
    before=$(calls)
    srv0=$(srvcpu)
    # Each worker's own CPU time, measured by its own subshell.
    for i in $(seq "$W"); do
      ( TIMEFORMAT='%U %S'; { time "$WORKER" mode=contend ports="$PORT" key="$key" start="$start" \
          ttl_ms=10000 target=2000 max_time=30 ctr="$TMP/ctr" holder="$TMP/holder" \
          retry=default lat="$TMP/lat.$i" out="$TMP/out.$i" "${extra[@]}" >/dev/null; } 2> "$TMP/time.$i" ) &
    done
    wait $(jobs -p | grep -v "^$RPID\$") 2>/dev/null || true
    after=$(calls)
    srv1=$(srvcpu)
    python3 - "$TMP" "$mode" "$round" "$before" "$after" "$start" "$W" "$srv0" "$srv1" <<'PY'
import json, sys
tmp, mode, rnd, before, after, start, w, srv0, srv1 = sys.argv[1:10]
w = int(w)
def parse(text):
    return {k: int(v) for k, v in (kv.split("=") for kv in text.split())}
b, a = parse(before), parse(after)
delta = {k: a[k] - b.get(k, 0) for k in a}
# Commands a client sends; the rest of commandstats are run by scripts.
CLIENT = ("evalsha", "eval", "subscribe", "unsubscribe", "ping", "info", "auth",
          "select") + tuple(k for k in delta if k.startswith("script|"))
sent = sum(delta.get(k, 0) for k in CLIENT)
outs = [json.load(open("%s/out.%d" % (tmp, i))) for i in range(1, w + 1)]
cpu = 0.0
for i in range(1, w + 1):
    u, s = open("%s/time.%d" % (tmp, i)).read().split()[-2:]
    cpu += float(u) + float(s)
n = sum(o["n"] for o in outs)
t_reach = min((o["t_target"] for o in outs if o.get("t_target")), default=None)
elapsed = (t_reach - float(start)) if t_reach else max(o["t_end"] for o in outs) - float(start)
waits = []
for i in range(1, w + 1):
    waits += [int(x) for x in open("%s/lat.%d" % (tmp, i)) if x.strip()]
waits.sort()
p99 = waits[max(0, int(len(waits) * 0.99) - 1)] / 1e6 if waits else 0
viol = sum(o["viol"] for o in outs)
cmds = sent / max(n, 1)
pubs = delta.get("publish", 0) / max(n, 1)
ns = sorted(o["n"] for o in outs)
shares = "/".join(map(str, ns)) if w <= 8 else "%d..%d" % (ns[0], ns[-1])
srv = (float(srv1) - float(srv0)) / max(n, 1) * 1e6
print("%-8s %-6s %4d %8.0f %8.2f %8.2f %10.1f %10.1f %12.2f %10.2f  %s%s" % (
    mode, rnd, w, 2000 / elapsed, cmds, pubs, cpu / max(n, 1) * 1e6, srv, max(waits) / 1e6, p99,
    shares,
    "  VIOLATIONS=%d" % viol if viol else ""))
PY
  done
 done
done
