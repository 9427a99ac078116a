#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Run the peers lock benchmark (../shared/peers) with dlock's worker beside
# the other clients, then compare dlock with baseline-c.
#
#   usage: bench/run.sh BUILD_DIR [OUT.tsv]
#
# BUILD_DIR is a configured and built dlock tree (`make build` gives
# `build`); the worker is BUILD_DIR/bench/dlock-bench-worker. OUT.tsv
# defaults to BUILD_DIR/bench/peers.tsv (plus OUT.tsv.versions).
#
# The peers live beside the repository: $(git rev-parse --show-toplevel)/
# ../shared/peers, or, outside a git checkout, ../shared/peers next to the
# directory holding this script's repository. PEERS_DIR overrides that.
# The peers' run.sh starts redis-servers on 127.0.0.1:7101-7105 (they must
# be free) and stops exactly those; it needs Debian packages only, plus
# `npm ci` in its node/ directory, which it runs itself when needed.
# The peers' knobs pass through: PEERS_ONLY=baseline-c,dlock,
# PEERS_SCENARIOS=S1,S2 and so on.
set -euo pipefail

die() { echo "bench/run.sh: $*" >&2; exit 1; }

if [ $# -lt 1 ] || [ $# -gt 2 ]; then die "usage: bench/run.sh BUILD_DIR [OUT.tsv]"; fi
[ -d "$1" ] || die "build dir '$1' does not exist (run 'make build' first)"
BUILD=$(cd "$1" && pwd)
OUT=${2:-$BUILD/bench/peers.tsv}
case $OUT in /*) ;; *) OUT=$PWD/$OUT ;; esac

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(git -C "$HERE" rev-parse --show-toplevel 2>/dev/null || (cd "$HERE/.." && pwd))
PEERS=${PEERS_DIR:-$REPO/../shared/peers}
if [ ! -x "$PEERS/run.sh" ] || [ ! -f "$PEERS/bench.py" ]; then
  die "peers benchmark not found at $PEERS (expected ../shared/peers beside the repository; set PEERS_DIR)"
fi
PEERS=$(cd "$PEERS" && pwd)

WORKER=$BUILD/bench/dlock-bench-worker
[ -x "$WORKER" ] ||
  die "$WORKER not built; run: cmake --build '$BUILD' --target dlock_bench_worker"

# The peers' run.sh checks the ports too; saying so here, before anything
# is started or compiled, is clearer.
for p in 7101 7102 7103 7104 7105; do
  if [ -n "$(ss -ltnH "sport = :$p" 2>/dev/null)" ]; then
    die "port $p is in use (another benchmark run or a redis-server?); the peers need 7101-7105 free on 127.0.0.1"
  fi
done

PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

# dlock joins the run as an extra client (after any the caller listed).
PEERS_EXTRA_CLIENTS=$("$PY" - "$WORKER" <<'EOF'
import json, os, sys
extra = json.loads(os.environ.get("PEERS_EXTRA_CLIENTS") or "[]")
extra = [c for c in extra if c.get("name") not in ("dlock", "dlock-fair", "dlock-nofence")]
extra.append({"name": "dlock", "cmd": [sys.argv[1]],
              "s3": ["default", "tuned"], "s4": True})
# DLOCK_NO_FENCE: no fencing counter, so a first try is SET NX PX (with GET
# and PTTL behind it) and no script; the uncontended scenarios only.
extra.append({"name": "dlock-nofence", "cmd": [sys.argv[1], "nofence=1"],
              "s3": [], "s4": True})
# Fair mode (DLOCK_FAIR: arrival order, direct hand-over); single node only.
extra.append({"name": "dlock-fair", "cmd": [sys.argv[1], "fair=1"],
              "s3": ["default"], "s4": False})
print(json.dumps(extra))
EOF
)
export PEERS_EXTRA_CLIENTS

mkdir -p "$(dirname "$OUT")"
echo "# dlock worker: $WORKER"
echo "# peers:        $PEERS"
"$PEERS/run.sh" "$OUT"

# dlock against baseline-c, scenario by scenario. baseline-c has no
# S3-default (its only retry is a fixed 1 ms sleep), so both S3 variants of
# dlock are set against its S3-tuned; S1 is also set against S1-evalsha,
# the baseline acquiring through a script as dlock does.
echo
echo "dlock / baseline-c (rate: higher is better for dlock; p99: lower is better)"
"$PY" - "$OUT" <<'EOF'
import csv, sys

rows = {}
with open(sys.argv[1], newline="") as f:
    for r in csv.DictReader(f, delimiter="\t"):
        rows[(r["client"], r["scenario"])] = r

def num(r, col):
    try:
        return float(r[col])
    except (KeyError, TypeError, ValueError):
        return None

def ratio(a, b):
    return "%.2f" % (a / b) if a is not None and b else "n/a"

def show(v, fmt):
    return fmt % v if v is not None else "n/a"

pairs = [("dlock", "S1", "S1"), ("dlock", "S1", "S1-evalsha"), ("dlock", "S2", "S2"),
         ("dlock", "S3-default", "S3-tuned"), ("dlock", "S3-tuned", "S3-tuned"),
         ("dlock-fair", "S3-default", "S3-tuned"), ("dlock", "S4", "S4"),
         ("dlock-nofence", "S1", "S1"), ("dlock-nofence", "S2", "S2"),
         ("dlock-nofence", "S4", "S4")]
out = [("client", "scenario", "baseline-c row", "dlock rate", "base rate", "rate x",
        "dlock p99_us", "base p99_us", "p99 x", "note")]
for who, ours, theirs in pairs:
    d, b = rows.get((who, ours)), rows.get(("baseline-c", theirs))
    if d is None:
        continue
    note = ""
    if b is None:
        note = "no baseline-c row"
    dr, br = num(d, "rate"), num(b, "rate") if b else None
    dp, bp = num(d, "p99_us"), num(b, "p99_us") if b else None
    if ours == "S1" and theirs == "S1" and dr and br and dr < 0.97 * br:
        note = "below 0.97 x baseline-c"
    if d.get("viol") not in ("0", None):
        note = (note + "; " if note else "") + "viol=" + d["viol"]
    out.append((who, ours, theirs, show(dr, "%.0f"), show(br, "%.0f"), ratio(dr, br),
                show(dp, "%.1f"), show(bp, "%.1f"), ratio(dp, bp), note))
if len(out) == 1:
    print("(no dlock rows in %s)" % sys.argv[1])
    sys.exit(0)
w = [max(len(r[i]) for r in out) for i in range(len(out[0]))]
for k, r in enumerate(out):
    print("  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip())
    if k == 0:
        print("-" * (sum(w) + 2 * (len(w) - 1)))
EOF

# Issue 20's targets, each with this run's figure and a verdict. The system
# calls per S1 cycle come from strace -c of the worker against a
# redis-server of our own (the peers' servers are gone by now): a 1 s and a
# 2 s run, so that start-up's calls cancel out. Fair mode's hand-over limit
# and the cost as waiters grow need runs of their own: make bench-more.
syscalls_per_cycle() {
  command -v strace >/dev/null 2>&1 || { echo "n/a (no strace)"; return; }
  local tmp port rpid d
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlock-syscalls.XXXXXX")
  port=$("$PY" "$HERE/../scripts/free-port")
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" \
    --logfile "$tmp/redis.log" >/dev/null &
  rpid=$!
  for _ in $(seq 100); do
    [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ] && break
    sleep 0.05
  done
  for d in 1 2; do
    strace -f -c -o "$tmp/strace.$d" "$WORKER" mode=cycle ports="$port" key="syscalls:$d" \
      start="$("$PY" -c 'import time; print(time.time())')" warmup=0 duration="$d" \
      lat="$tmp/lat.$d" out="$tmp/out.$d" >/dev/null 2>&1 || true
  done
  kill "$rpid" 2>/dev/null || true
  wait "$rpid" 2>/dev/null || true
  "$PY" "$HERE/syscalls.py" "$tmp/strace.1" "$tmp/out.1" "$tmp/strace.2" "$tmp/out.2"
  rm -rf "$tmp"
}
echo
echo "issue 20's targets (one run; this VM drifts 10-30 % between rounds: read a miss near the line as noise)"
DLOCK_SYSCALLS=$(syscalls_per_cycle) "$PY" "$HERE/targets.py" "$OUT"
