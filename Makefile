# SPDX-License-Identifier: BSD-3-Clause
# Front door for a fresh Debian/Ubuntu machine. The real build is CMake;
# these targets install what is missing, configure, build and run.
#
#   make demo    install deps, build the demo's two programs, start a
#                throwaway redis-server, run the demo
#   make check   install deps, build with tests, benchmarks and -Werror,
#                run every test (plain, ASan+UBSan, TSan)
#   make bench   run ../shared/peers with dlock's worker beside the peers
#   make bench-more  dlock-bench (watchdog scale, memory, Redlock 1/3/5, histogram)
#                    s3-cost (commands and CPU per contended critical section)
#                    and handover-limit (fair mode beside a pub/sub ring)
#   make install PREFIX=/usr/local
#                configure and build what gets installed (no tests, no
#                benchmarks, no -Werror) and install it; installs no packages
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
PREFIX ?= /usr/local
CMAKE_FLAGS ?=

.PHONY: all deps build demo check check-plain check-asan check-tsan check-fuzz \
        bench bench-more soak install clean

all: build

deps:
	@scripts/install-deps.sh

# The developer build: tests, benchmarks and -Werror (what CI runs).
build: deps
	cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDLOCK_WERROR=ON \
	      -DDLOCK_BUILD_TESTS=ON -DDLOCK_BUILD_BENCH=ON \
	      -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS) >/dev/null
	cmake --build build -j$(JOBS)

# Only the two programs the demo runs, quietly: the build's output is shown
# only if it fails.
demo: deps
	@mkdir -p build-demo
	@{ cmake -S . -B build-demo -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) && \
	   cmake --build build-demo -j$(JOBS) --target stock_demo dlock_cli; } \
	   >build-demo/build.log 2>&1 || { cat build-demo/build.log; exit 1; }
	@scripts/demo.sh build-demo

check: build
	scripts/check.sh

bench: build
	bench/run.sh build

bench-more: build
	bench/dlock-bench.sh build
	bench/s3-cost.sh build 2
	bench/handover-limit.sh build 3

soak: build
	scripts/soak.sh build

install:
	cmake -S . -B build-install -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	      -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS) >/dev/null
	cmake --build build-install -j$(JOBS)
	cmake --install build-install

clean:
	rm -rf build build-asan build-tsan build-fuzz build-demo build-install
