#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# libFuzzer targets for the parsers and the reply handling, built with clang
# straight from src/*/*.c (the CMake build uses gcc) into build-fuzz/.
#
#   scripts/fuzz.sh short    each fuzzer ~20 s (make check runs this)
#   scripts/fuzz.sh long     each fuzzer 10 min (before a release)
#   scripts/fuzz.sh build    build only (ctest fuzz_build runs this)
#   FUZZ_OUT=DIR scripts/fuzz.sh ...             build into DIR, not build-fuzz/
#   FUZZ_SECONDS=N scripts/fuzz.sh short|long    override the time per fuzzer
#   scripts/fuzz.sh run NAME [libFuzzer args]    one fuzzer, your arguments
#                                                (e.g. a crash file to replay)
#
# Seeds are in tests/fuzz/corpus/NAME/ (read only here); what a run learns
# goes to build-fuzz/corpus/NAME/, crashes to build-fuzz/artifacts/NAME/.
# Sanitizers: address and undefined, any report is fatal.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-short}
OUT=${FUZZ_OUT:-build-fuzz}
case "$OUT" in /*) ;; *) OUT="$PWD/$OUT" ;; esac
FUZZERS="url duration reply"
case "$MODE" in
  short) SECS=${FUZZ_SECONDS:-20} ;;
  long)  SECS=${FUZZ_SECONDS:-600} ;;
  build|run) SECS=0 ;;
  *) echo "usage: $0 short|long|build|run NAME [args]" >&2; exit 2 ;;
esac

CC=${FUZZ_CC:-}
if [ -z "$CC" ]; then
  for c in clang clang-14; do command -v "$c" >/dev/null && CC=$c && break; done
fi
[ -n "$CC" ] || { echo "fuzz.sh: clang not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 1; }

mkdir -p "$OUT"
# The embedded Lua scripts, generated the way the CMake build does it.
cmake -DOUT="$OUT/scripts_gen.c" -DDIR="$PWD/src/redis/scripts" -P cmake/embed_scripts.cmake

CFLAGS="-g -O1 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc/util -Isrc/engine -Isrc/redis -Isrc/etcd $(pkg-config --cflags hiredis)
        -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
        -Wall -Wextra"
LIBS="$(pkg-config --libs hiredis libssl libcrypto) -lpthread"
srcs_url="src/redis/url.c src/util/alloc.c src/util/error.c"
srcs_duration="src/util/duration.c"
srcs_reply="src/redis/conn.c src/redis/resp.c src/redis/tls.c src/util/clock.c src/util/error.c src/util/alloc.c $OUT/scripts_gen.c"

for f in $FUZZERS; do
  srcs_var="srcs_$f"
  # shellcheck disable=SC2086
  $CC $CFLAGS -o "$OUT/fuzz_$f" "tests/fuzz/fuzz_$f.c" ${!srcs_var} $LIBS
done
echo "fuzz.sh: built $(for f in $FUZZERS; do printf '%s ' "$OUT/fuzz_$f"; done)"
[ "$MODE" = build ] && exit 0

if [ "$MODE" = run ]; then
  name=${2:?fuzzer name}; shift 2
  exec "$OUT/fuzz_$name" "$@"
fi

status=0
summary=()
for f in $FUZZERS; do
  mkdir -p "$OUT/corpus/$f" "$OUT/artifacts/$f"
  log="$OUT/fuzz_$f.log"
  echo "== fuzz_$f: $SECS s"
  if "$OUT/fuzz_$f" -max_total_time="$SECS" -print_final_stats=1 -max_len=4096 \
       -timeout=20 -rss_limit_mb=2048 \
       -artifact_prefix="$OUT/artifacts/$f/" \
       "$OUT/corpus/$f" "tests/fuzz/corpus/$f" >"$log" 2>&1; then
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
    summary+=("fuzz_$f: ok, $execs executions, $cov, corpus $(ls "$OUT/corpus/$f" | wc -l)")
  else
    status=1
    summary+=("fuzz_$f: FAILED (see $log; crash inputs in $OUT/artifacts/$f/)")
    tail -40 "$log"
  fi
done
printf '%s\n' "${summary[@]}"
exit $status
