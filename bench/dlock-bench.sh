#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Run dlock-bench (watchdog at scale, memory per lock, Redlock quorum cost,
# acquire latency histogram) with its defaults, then draw charts.
#
#   usage: bench/dlock-bench.sh BUILD_DIR [OUTDIR]
#
# BUILD_DIR is a configured and built dlock tree; the program is
# BUILD_DIR/bench/dlock-bench. OUTDIR (default BUILD_DIR/bench/out) receives
# watchdog.tsv, memory.tsv, redlock.tsv, hist.tsv, hist_pct.tsv and, when
# gnuplot is installed, hist.png, redlock.png and watchdog.png.
# DLOCK_BENCH_ARGS passes options through, e.g.
#   DLOCK_BENCH_ARGS="--only hist,redlock5 --hist-time 10" bench/dlock-bench.sh build
# The program starts its own redis-servers on free loopback ports and stops
# them by pid; nothing else on the machine is touched.
set -euo pipefail

die() { echo "bench/dlock-bench.sh: $*" >&2; exit 2; }

if [ $# -lt 1 ] || [ $# -gt 2 ]; then die "usage: bench/dlock-bench.sh BUILD_DIR [OUTDIR]"; fi
[ -d "$1" ] || die "build dir '$1' does not exist (run 'make build' first)"
BUILD=$(cd "$1" && pwd)
OUT=${2:-$BUILD/bench/out}
HERE=$(cd "$(dirname "$0")" && pwd)

BIN=$BUILD/bench/dlock-bench
[ -x "$BIN" ] || die "$BIN not built; run: cmake --build '$BUILD' --target dlock_bench"
command -v redis-server >/dev/null || die "redis-server not found in PATH"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# Charts of an earlier run must not pass for this one's.
rm -f "$OUT"/hist.png "$OUT"/redlock.png "$OUT"/watchdog.png

# DLOCK_BENCH_ARGS is a list of options, split on blanks.
read -r -a extra <<<"${DLOCK_BENCH_ARGS:-}"
status=0
"$BIN" --out "$OUT" "${extra[@]}" || status=$?

if command -v gnuplot >/dev/null; then
  term=png
  if gnuplot -e 'set terminal pngcairo' >/dev/null 2>&1; then term=pngcairo; fi
  for chart in hist redlock watchdog; do
    [ -s "$OUT/$chart.tsv" ] || continue
    if gnuplot -e "outdir='$OUT'; chart='$chart'; term='$term'" "$HERE/dlock-bench.gp"; then
      echo "# chart: $OUT/$chart.png"
    else
      echo "bench/dlock-bench.sh: gnuplot failed for $chart.png" >&2
    fi
  done
else
  echo "# gnuplot not installed: no charts (the TSV files are in $OUT)"
fi
exit "$status"
