#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Install a build into a temp prefix, then build and run a consumer against
# it through pkg-config and through find_package(dlock) (shared and static).
# usage: tests/install/check.sh BUILD_DIR
set -euo pipefail
BUILD=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/dlock-install.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
cmake --install "$BUILD" --prefix "$TMP/prefix" >/dev/null
LIBDIR=$(ls -d "$TMP"/prefix/lib*/ | head -n1)
for f in include/dlock.h bin/dlock share/man/man1/dlock.1; do
  [ -e "$TMP/prefix/$f" ] || { echo "install: missing $f" >&2; exit 1; }
done
ls "$LIBDIR"libdlock.so.* "$LIBDIR"libdlock.a "$LIBDIR"pkgconfig/dlock.pc \
   "$LIBDIR"cmake/dlock/dlockConfig.cmake >/dev/null

# pkg-config
PKG_CONFIG_PATH="$LIBDIR/pkgconfig" cc -o "$TMP/consumer_pc" "$HERE/consumer.c" \
  $(PKG_CONFIG_PATH="$LIBDIR/pkgconfig" pkg-config --cflags --libs dlock)
LD_LIBRARY_PATH="$LIBDIR" "$TMP/consumer_pc"

# CMake package
cmake -S "$HERE" -B "$TMP/cbuild" -DCMAKE_PREFIX_PATH="$TMP/prefix" >/dev/null
cmake --build "$TMP/cbuild" >/dev/null
LD_LIBRARY_PATH="$LIBDIR" "$TMP/cbuild/consumer_shared"
"$TMP/cbuild/consumer_static"
# The installed dlock binary runs too.
LD_LIBRARY_PATH="$LIBDIR" "$TMP/prefix/bin/dlock" --version
echo "install check: ok"
