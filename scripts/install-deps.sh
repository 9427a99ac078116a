#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Install what dlock needs to build, test, demo and benchmark, from Debian
# packages, only if missing. Uses sudo when not root. Idempotent.
set -eu
PKGS="cmake make gcc pkg-config libhiredis-dev libssl-dev openssl libcmocka-dev redis-server redis-sentinel redis-tools python3 clang libclang-rt-14-dev valgrind bsdextrautils libcurl4-openssl-dev libjansson-dev libuv1-dev libevent-dev etcd-server etcd-client zookeeper libzookeeper-st-dev libgrpc-dev libprotobuf-c-dev protobuf-c-compiler golang-etcd-server-dev default-jdk-headless libzookeeper-java libcurator-framework-java libcurator-recipes-java dpkg-dev debhelper fakeroot lintian man-db"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "install-deps: installing:$missing"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
