#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A few integration tests under valgrind (memcheck): invalid accesses,
# uninitialised reads and leaks in code ASan does not see the same way
# (hiredis, libc). The tests start real redis-server processes; valgrind
# does not follow them (no --trace-children).
#
#   scripts/valgrind.sh BUILD_DIR [TEST...]
#
# BUILD_DIR should be a build without sanitizers (e.g. `build`). Default
# tests: test_lock_basic test_redlock test_alloc_failure.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
shift || true
TESTS=("$@")
[ ${#TESTS[@]} -gt 0 ] || TESTS=(test_lock_basic test_redlock test_alloc_failure)
command -v valgrind >/dev/null || { echo "valgrind.sh: valgrind not installed" >&2; exit 1; }
cmake --build "$BUILD" --target "${TESTS[@]}" >/dev/null
status=0
for t in "${TESTS[@]}"; do
  log="$BUILD/valgrind-$t.log"
  echo "== valgrind $t"
  if CMOCKA_MESSAGE_OUTPUT=stdout valgrind --quiet --error-exitcode=1 --leak-check=full \
       --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect \
       --track-origins=yes --log-file="$log" "$BUILD/tests/$t" >"$log.out" 2>&1; then
    echo "   ok ($(grep -c '^\[       OK' "$log.out" || true) tests passed, no errors)"
  else
    status=1
    echo "   FAILED: see $log and $log.out"
    tail -30 "$log"
    grep -E '^\[  (FAILED|ERROR)' "$log.out" || true
  fi
done
exit $status
