#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Install a build into a temp prefix, then build and run a consumer against
# it through pkg-config and through find_package(dlock) (shared and static).
# Also: the completion files and the soname are where they belong,
# find_package(dlock) prints nothing about pkg-config, and a build for a
# system prefix (/usr) installs a dlock binary without RUNPATH.
# usage: tests/install/check.sh BUILD_DIR
set -euo pipefail
BUILD=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/dlock-install.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
cmake --install "$BUILD" --prefix "$TMP/prefix" >/dev/null
LIBDIR=$(ls -d "$TMP"/prefix/lib*/ | head -n1)
for f in include/dlock.h bin/dlock share/man/man1/dlock.1 \
         share/bash-completion/completions/dlock share/zsh/site-functions/_dlock; do
  [ -e "$TMP/prefix/$f" ] || { echo "install: missing $f" >&2; exit 1; }
done
# Soname policy (CONTRIBUTING.md): 0.MINOR while the major version is 0.
MAJOR_MINOR=$(sed -n 's/^project(dlock VERSION \([0-9]*\.[0-9]*\)\..*/\1/p' "$HERE/../../CMakeLists.txt")
SONAME=$(readelf -d "$LIBDIR"libdlock.so | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$SONAME" = "libdlock.so.$MAJOR_MINOR" ] || { echo "install: soname $SONAME, want libdlock.so.$MAJOR_MINOR" >&2; exit 1; }
ls "$LIBDIR"libdlock.so.* "$LIBDIR"libdlock.a "$LIBDIR"pkgconfig/dlock.pc "$LIBDIR"pkgconfig/dlock-static.pc \
   "$LIBDIR"cmake/dlock/dlockConfig.cmake >/dev/null

# pkg-config
PKG_CONFIG_PATH="$LIBDIR/pkgconfig" cc -o "$TMP/consumer_pc" "$HERE/consumer.c" \
  $(PKG_CONFIG_PATH="$LIBDIR/pkgconfig" pkg-config --cflags --libs dlock)
LD_LIBRARY_PATH="$LIBDIR" "$TMP/consumer_pc"

# pkg-config --static: the line links on a fresh Debian, which has no -dev
# package (nor static archive) of libcurl's own private libraries.
STATIC_FLAGS=$(PKG_CONFIG_PATH="$LIBDIR/pkgconfig" pkg-config --static --cflags --libs dlock)
cc -o "$TMP/consumer_pc_static_flags" "$HERE/consumer.c" $STATIC_FLAGS
LD_LIBRARY_PATH="$LIBDIR" "$TMP/consumer_pc_static_flags"
# dlock-static.pc: libdlock.a in the program, its dependencies shared.
cc -o "$TMP/consumer_pc_static" "$HERE/consumer.c" \
  $(PKG_CONFIG_PATH="$LIBDIR/pkgconfig" pkg-config --cflags --libs dlock-static)
if ldd "$TMP/consumer_pc_static" | grep libdlock; then
  echo "install: dlock-static.pc linked libdlock dynamically (above)" >&2
  exit 1
fi
"$TMP/consumer_pc_static"

# CMake package
cmake -S "$HERE" -B "$TMP/cbuild" -DCMAKE_PREFIX_PATH="$TMP/prefix" >"$TMP/configure.log"
if grep -Ei 'pkg-config|PkgConfig|checking for module' "$TMP/configure.log"; then
  echo "install: find_package(dlock) is noisy about pkg-config (above)" >&2
  exit 1
fi
cmake --build "$TMP/cbuild" >/dev/null
LD_LIBRARY_PATH="$LIBDIR" "$TMP/cbuild/consumer_shared"
"$TMP/cbuild/consumer_static"
# The installed dlock binary runs too.
LD_LIBRARY_PATH="$LIBDIR" "$TMP/prefix/bin/dlock" --version
# A build for a system prefix: the library goes where ld.so looks anyway,
# so the installed binary carries no RUNPATH ($ORIGIN stays for private
# prefixes, checked above by running it).
SRC=$(cd "$HERE/../.." && pwd)
cmake -S "$SRC" -B "$TMP/sys" -DCMAKE_INSTALL_PREFIX=/usr -DDLOCK_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$TMP/sys" -j2 >/dev/null
DESTDIR="$TMP/dest" cmake --install "$TMP/sys" >/dev/null
if readelf -d "$TMP/dest/usr/bin/dlock" | grep -E 'RUNPATH|RPATH'; then
  echo "install: the dlock for prefix /usr has a RUNPATH (above)" >&2
  exit 1
fi
readelf -d "$TMP/prefix/bin/dlock" | grep -q 'RUNPATH.*\$ORIGIN' ||
  { echo "install: the dlock for a private prefix lacks \$ORIGIN" >&2; exit 1; }
echo "install check: ok"
