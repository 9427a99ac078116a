#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Every test, three ways: a normal -Werror build, ASan+UBSan, and TSan for
# the threaded tests. Called by `make check` after the normal build.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
export TMPDIR=${TMPDIR:-/tmp}
# install-deps.sh installed the JDK and Curator's jars: the Curator interop
# test (tests/zk/test_zk_curator.c) fails rather than skips without them.
export DLOCK_TEST_REQUIRE_CURATOR=1
summary=()

run_ctest() { # dir label-args...
  local dir=$1; shift
  (cd "$dir" && ctest --output-on-failure -j"$JOBS" "$@")
}

# The gRPC rows (the etcd tests again over DLOCK_ETCD_TRANSPORT=grpc) run
# once, under ASan below: the same tests twice cost CI a minute.
echo "== plain build: all tests but the gRPC rows (the chaos scenarios included)"
run_ctest build -LE grpc
summary+=("plain: ok")
if [ -s build/tests/chaos/chaos_summary.tsv ]; then
  echo "== chaos summary (docs/chaos.md explains the columns)"
  cut -f1-13 build/tests/chaos/chaos_summary.tsv | column -t -s $'\t'
fi

echo "== valgrind: a subset of the integration tests"
scripts/valgrind.sh build
summary+=("valgrind: ok")

echo "== install: pkg-config and find_package(dlock) consumers"
tests/install/check.sh build
summary+=("install: ok")

echo "== Debian packages: dpkg-buildpackage, install, consumers, purge"
if [ "$(id -u)" -eq 0 ]; then
  tests/packages/check.sh
  summary+=("packages: ok")
else
  echo "packages: SKIPPED: needs root (apt-get install, dpkg -i); CI runs it as root"
  summary+=("packages: skipped (not root)")
fi

echo "== ASan+UBSan build: all tests but the chaos scenarios (the gRPC rows included)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DDLOCK_WERROR=ON \
      -DDLOCK_SANITIZE=address,undefined -DDLOCK_BUILD_TESTS=ON -DDLOCK_BUILD_BENCH=OFF >/dev/null
cmake --build build-asan -j"$JOBS" >/dev/null
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  run_ctest build-asan -LE nosan
summary+=("asan+ubsan: ok")

echo "== TSan build: threaded tests"
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DDLOCK_WERROR=ON \
      -DDLOCK_SANITIZE=thread -DDLOCK_BUILD_TESTS=ON -DDLOCK_BUILD_BENCH=OFF -DDLOCK_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build-tsan -j"$JOBS" >/dev/null
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 run_ctest build-tsan -L threads
summary+=("tsan: ok")

if [ -x scripts/fuzz.sh ]; then
  echo "== fuzzers: short run"
  scripts/fuzz.sh short
  summary+=("fuzz: ok")
fi

echo
echo "== make check summary"
printf '  %s\n' "${summary[@]}"
