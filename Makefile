# SPDX-License-Identifier: BSD-3-Clause
# Front door for a fresh Debian/Ubuntu machine. The real build is CMake;
# these targets install what is missing, configure, build and run.
#
#   make demo    install deps, build, start a throwaway redis-server, run the demo
#   make check   install deps, build, run every test (plain, ASan+UBSan, TSan)
#   make bench   run ../shared/peers with dlock's worker beside the peers
#   make bench-more  dlock-bench (watchdog scale, memory, Redlock 1/3/5, histogram)
#                    and s3-cost (commands and CPU per contended critical section)
#   make install PREFIX=/usr/local
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
PREFIX ?= /usr/local
CMAKE_FLAGS ?=

.PHONY: all deps build demo check check-plain check-asan check-tsan check-fuzz \
        bench bench-more soak install clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDLOCK_WERROR=ON \
	      -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS) >/dev/null
	cmake --build build -j$(JOBS)

demo: build
	scripts/demo.sh build

check: build
	scripts/check.sh

bench: build
	bench/run.sh build

bench-more: build
	bench/dlock-bench.sh build
	bench/s3-cost.sh build 2

soak: build
	scripts/soak.sh build

install: build
	cmake --install build

clean:
	rm -rf build build-asan build-tsan build-fuzz
