#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Build the Debian packages (debian/) and use them as a user would:
# install the build dependencies, run dpkg-buildpackage -us -uc -b on a
# copy of the tree (it writes the .debs to the parent directory), install
# libdlock0.1, libdlock-dev and dlock, build tests/install/consumer.c
# against them through pkg-config and through find_package(dlock), run
# `dlock --version` and `man -w dlock`, check the file lists, then purge
# the packages again so the machine is left as it was found.
#
# Needs root (apt-get, dpkg) and a Debian-like system; otherwise it says so
# and exits 0 without testing anything (`make check` as a user).
# lintian runs on the built packages when it is installed
# (scripts/install-deps.sh installs it) and its errors or warnings fail
# the check; DLOCK_LINTIAN=0 skips it.
# usage: tests/packages/check.sh
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
if [ "$(id -u)" -ne 0 ]; then
  echo "packages: SKIPPED: needs root (apt-get install, dpkg -i); run as root to test debian/"
  exit 0
fi
if ! command -v apt-get >/dev/null || ! command -v dpkg >/dev/null; then
  echo "packages: SKIPPED: not a Debian-like system (no apt-get/dpkg)"
  exit 0
fi
PKGS="libdlock0.1 libdlock-dev dlock"
for p in $PKGS; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "installed"; then
    echo "packages: SKIPPED: $p is already installed on this machine; not touching it" >&2
    exit 0
  fi
done

export DEBIAN_FRONTEND=noninteractive
TMP=$(mktemp -d "${TMPDIR:-/tmp}/dlock-packages.XXXXXX")
installed=0
cleanup() {
  if [ "$installed" = 1 ]; then
    # shellcheck disable=SC2086
    apt-get purge -y -qq $PKGS >/dev/null 2>&1 || dpkg --purge $PKGS >/dev/null 2>&1 || true
  fi
  rm -rf "$TMP"
}
trap cleanup EXIT
start=$(date +%s)

# The changelog's version is the project's: a package built from 0.2.0
# must not call itself 0.1.0.
CMAKE_VER=$(sed -n 's/^project(dlock VERSION \([0-9.]*\) .*/\1/p' "$SRC/CMakeLists.txt")
DEB_VER=$(dpkg-parsechangelog -l "$SRC/debian/changelog" -S Version)
case "$DEB_VER" in
"$CMAKE_VER" | "$CMAKE_VER"-* | "$CMAKE_VER"+*) ;;
*) echo "packages: debian/changelog is $DEB_VER, the project is $CMAKE_VER" >&2; exit 1 ;;
esac
SOVER=$(echo "$CMAKE_VER" | cut -d. -f1,2)
[ "${SOVER%%.*}" = 0 ] || SOVER=${SOVER%%.*}
grep -q "^Package: libdlock$SOVER\$" "$SRC/debian/control" ||
  { echo "packages: debian/control has no libdlock$SOVER for soname libdlock.so.$SOVER" >&2; exit 1; }

# Build dependencies, from debian/control itself (not a list kept here).
apt-get install -y -qq --no-install-recommends dpkg-dev debhelper fakeroot man-db >/dev/null
(cd "$SRC" && dpkg-checkbuilddeps 2>&1) | sed -n 's/.*Unmet build dependencies: //p' >"$TMP/unmet"
if [ -s "$TMP/unmet" ]; then
  # Strip version constraints: "cmake (>= 3.13)" -> cmake.
  deps=$(sed 's/([^)]*)//g' "$TMP/unmet")
  echo "packages: installing build dependencies: $deps"
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $deps >/dev/null
fi

# A clean copy of the tracked files (no build/ trees) in a directory of
# its own: dpkg-buildpackage puts its output beside the source.
mkdir -p "$TMP/src/dlock-$CMAKE_VER"
if git -C "$SRC" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  (cd "$SRC" && git ls-files -z --cached --others --exclude-standard |
    xargs -0 tar -cf - --ignore-failed-read 2>/dev/null) | tar -xf - -C "$TMP/src/dlock-$CMAKE_VER"
else
  tar -C "$SRC" --exclude='./build' --exclude='./build-*' -cf - . | tar -xf - -C "$TMP/src/dlock-$CMAKE_VER"
fi
echo "packages: dpkg-buildpackage -us -uc -b"
if ! (cd "$TMP/src/dlock-$CMAKE_VER" &&
      DEB_BUILD_OPTIONS="parallel=${JOBS:-2} ${DEB_BUILD_OPTIONS:-}" \
        dpkg-buildpackage -us -uc -b >"$TMP/build.log" 2>&1); then
  tail -n 60 "$TMP/build.log" >&2
  echo "packages: dpkg-buildpackage failed (log above)" >&2
  exit 1
fi
# A symbol the library exports but debian/*.symbols does not list is a new
# API that the symbols file must record (with the version it came in).
if grep -q 'dpkg-gensymbols: warning' "$TMP/build.log"; then
  grep -A20 'dpkg-gensymbols: warning' "$TMP/build.log" >&2
  echo "packages: debian/libdlock$SOVER.symbols is out of step with the library (above)" >&2
  exit 1
fi
cd "$TMP/src"
ls ./*.deb
for p in $PKGS; do
  ls "./${p}_"*.deb >/dev/null 2>&1 || { echo "packages: no $p package built" >&2; exit 1; }
done

# What each package holds.
contents() { dpkg-deb -c "./${1}_"*.deb | awk '{print $6}'; }
need() { # package path-regex
  contents "$1" | grep -Eq "$2" || { echo "packages: $1 lacks $2" >&2; contents "$1" >&2; exit 1; }
}
need "libdlock$SOVER" "/usr/lib/[^/]+/libdlock\.so\.$SOVER(\.[0-9]+)*$"
need libdlock-dev '/usr/include/dlock\.h$'
need libdlock-dev '/usr/lib/[^/]+/libdlock\.a$'
need libdlock-dev '/usr/lib/[^/]+/libdlock\.so$'
need libdlock-dev '/usr/lib/[^/]+/pkgconfig/dlock\.pc$'
need libdlock-dev '/usr/lib/[^/]+/cmake/dlock/dlockConfig\.cmake$'
need dlock '/usr/bin/dlock$'
need dlock '/usr/share/man/man1/dlock\.1\.gz$'
need dlock '/usr/share/bash-completion/completions/dlock$'
need dlock '/usr/share/zsh/site-functions/_dlock$'
# ${shlibs:Depends} worked: dlock depends on the library, the library on
# hiredis.
dpkg-deb -f ./dlock_*.deb Depends | grep -q "libdlock$SOVER" ||
  { echo "packages: dlock does not depend on libdlock$SOVER" >&2; exit 1; }
dpkg-deb -f "./libdlock${SOVER}_"*.deb Depends | grep -q libhiredis ||
  { echo "packages: libdlock$SOVER does not depend on libhiredis" >&2; exit 1; }

if [ "${DLOCK_LINTIAN:-1}" = 1 ] && command -v lintian >/dev/null; then
  echo "packages: lintian"
  lrc=0
  lintian --fail-on error,warning ./*.changes >"$TMP/lintian.log" 2>&1 || lrc=$?
  grep -v 'running with root privileges' "$TMP/lintian.log" || true
  [ "$lrc" -eq 0 ] || { echo "packages: lintian found errors or warnings (above)" >&2; exit 1; }
fi

installed=1
apt-get install -y -qq --no-install-recommends "./libdlock${SOVER}_"*.deb ./libdlock-dev_*.deb ./dlock_*.deb >/dev/null
dpkg -s $PKGS >/dev/null

# The installed command and its manual page.
dlock --version
dlock --version | grep -q "dlock $CMAKE_VER" || { echo "packages: dlock --version is not $CMAKE_VER" >&2; exit 1; }
man -w dlock
dlock doctor --help >/dev/null
if readelf -d /usr/bin/dlock | grep -Eq 'RUNPATH|RPATH'; then
  echo "packages: /usr/bin/dlock has a RUNPATH" >&2
  exit 1
fi

# A consumer through pkg-config (shared) ...
cc -o "$TMP/consumer_pc" "$SRC/tests/install/consumer.c" $(pkg-config --cflags --libs dlock)
"$TMP/consumer_pc"
# ... and static, through dlock-static.pc (libdlock.a in the program).
cc -o "$TMP/consumer_pc_static" "$SRC/tests/install/consumer.c" \
  $(pkg-config --cflags --libs dlock-static)
if readelf -d "$TMP/consumer_pc_static" | grep -q 'libdlock\.so'; then
  echo "packages: dlock-static.pc linked libdlock dynamically" >&2
  exit 1
fi
"$TMP/consumer_pc_static"
# ... and through find_package(dlock), shared and static.
cmake -S "$SRC/tests/install" -B "$TMP/cbuild" >/dev/null
cmake --build "$TMP/cbuild" >/dev/null
"$TMP/cbuild/consumer_shared"
"$TMP/cbuild/consumer_static"

apt-get purge -y -qq $PKGS >/dev/null
installed=0
for p in $PKGS; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "installed"; then
    echo "packages: $p still installed after purge" >&2
    exit 1
  fi
done
[ ! -e /usr/bin/dlock ] || { echo "packages: /usr/bin/dlock left after purge" >&2; exit 1; }
echo "packages check: ok ($(($(date +%s) - start)) s; built $(cd "$TMP/src" && ls ./*.deb | sed 's|^\./||' | tr '\n' ' '))"
