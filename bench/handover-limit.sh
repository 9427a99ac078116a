#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Fair mode against the hand-over limit (issue 20), in one run on one
# redis-server: rounds interleave
#   - dlock-bench-handover: W processes pass a turn round a ring through
#     pub/sub with no lock (a release, a publish, and the next holder
#     already knows), four ways: one shared channel or one per process, the
#     subscription read by the main thread or by a second thread that wakes
#     it (as dlock's wake-up thread does);
#   - S3 with dlock's worker (W processes, one key, 2000 critical sections,
#     hold ~0), fair mode and default mode.
# Prints each figure's median over the rounds and fair mode's ratio to
# each limit.
# usage: bench/handover-limit.sh BUILD_DIR [ROUNDS] [W]
set -euo pipefail
BUILD=$(cd "${1:?usage: bench/handover-limit.sh BUILD_DIR [ROUNDS] [W]}" && pwd)
ROUNDS=${2:-3}
W=${3:-4}
WORKER=$BUILD/bench/dlock-bench-worker
RING=$BUILD/bench/dlock-bench-handover
for b in "$WORKER" "$RING"; do
  [ -x "$b" ] || { echo "handover-limit: build $b first" >&2; exit 1; }
done
TMP=$(mktemp -d "${TMPDIR:-/tmp}/dlock-handover.XXXXXX")
# The section's files, where the peers keep theirs (SCENARIOS.md: /dev/shm).
SHM=/dev/shm; [ -d "$SHM" ] && [ -w "$SHM" ] || SHM=$TMP
SEC=$SHM/dlock-handover.$$
PORT=$(python3 "$(dirname "$0")/../scripts/free-port")
redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP" \
  --logfile "$TMP/redis.log" >/dev/null &
RPID=$!
cleanup() {
  kill "$RPID" 2>/dev/null || true; wait "$RPID" 2>/dev/null || true
  rm -rf "$TMP" "$SEC.ctr" "$SEC.holder"
}
trap cleanup EXIT
for _ in $(seq 100); do
  [ "$(redis-cli -p "$PORT" ping 2>/dev/null)" = PONG ] && break; sleep 0.05
done

s3() { # S3 cs/s of dlock's worker: s3 ROUND MODE [worker args]
  local key="handover:$1:$2" start pids=()
  shift 2
  : > "$SEC.ctr"; rm -f "$SEC.holder" "$TMP"/out.*
  start=$(python3 -c "import time; print('%.6f' % (time.time() + 1.0))")
  for i in $(seq "$W"); do
    "$WORKER" mode=contend ports="$PORT" key="$key" start="$start" ttl_ms=10000 target=2000 \
      max_time=30 ctr="$SEC.ctr" holder="$SEC.holder" retry=default lat="$TMP/lat.$i" \
      out="$TMP/out.$i" "$@" >/dev/null &
    pids+=($!)
  done
  wait "${pids[@]}"
  python3 - "$TMP" "$W" "$start" <<'PY'
import json, sys
tmp, w, start = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
outs = [json.load(open("%s/out.%d" % (tmp, i))) for i in range(1, w + 1)]
n = sum(o["n"] for o in outs)
reach = [o["t_target"] for o in outs if o.get("t_target")]
end = min(reach) if reach else max(o["t_end"] for o in outs)
print("%.0f" % (n / (end - start)))
PY
}

LABELS=("ring, own channel, no thread hop" "ring, own channel, thread hop"
        "ring, one channel, no thread hop" "ring, one channel, thread hop"
        "dlock fair S3" "dlock default S3")
for round in $(seq "$ROUNDS"); do
  {
    "$RING" "$PORT" "$W" 3 own 0
    "$RING" "$PORT" "$W" 3 own 1
    "$RING" "$PORT" "$W" 3 one 0
    "$RING" "$PORT" "$W" 3 one 1
    s3 "$round" fair fair=1
    s3 "$round" default
  } > "$TMP/round.$round"
  echo "round $round: $(tr '\n' ' ' < "$TMP/round.$round")" >&2
done

python3 - "$TMP" "$ROUNDS" "$W" "${LABELS[@]}" <<'PY'
import statistics, sys
tmp, rounds, w, labels = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
rows = [[float(x) for x in open("%s/round.%d" % (tmp, r)).read().split()]
        for r in range(1, rounds + 1)]
med = [statistics.median(r[i] for r in rows) for i in range(len(labels))]
print("W = %s processes, medians of %d rounds (turns or critical sections per second)" % (w, rounds))
for i, label in enumerate(labels):
    print("  %-34s %8.0f   (rounds: %s)" % (label, med[i], " ".join("%.0f" % r[i] for r in rows)))
fair = med[4]
print("dlock fair S3 / each hand-over limit:")
for i in range(4):
    print("  %-34s %5.2f" % (labels[i], fair / med[i]))
PY
