#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The module graph of src/ (its layer folders), cli/ and bench/ has no
# circle, no source file there is longer than MAX_LINES (default 600), and
# src/util/ reaches no other layer. Run by ctest (test "modules") and so by
# `make check`.
#
# A module is a file's directory and base name: src/engine/lock.c and
# src/engine/lock.h are one module, "src/engine/lock". Each
# `#include "x.h"` line of a file is an arrow from its module to the module
# of x.h (looked up beside the file, then in each src/ folder and
# include/). A circle (a <-> b, or longer) means two modules cannot be
# understood or changed one without the other: that is what fails, as a
# file over the size limit does. The layers (docs/design.md, "Layout"):
# util knows no lock; engine, redis and etcd use util. And only
# src/engine/lock.c calls the public verbs that change a lock.
# usage: scripts/check-modules.sh [SOURCE_DIR]
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
max=${MAX_LINES:-600}
layers=(src/util src/engine src/redis src/etcd src/zk)
dirs=("${layers[@]}" cli bench)

edges=$(mktemp)
trap 'rm -f "$edges"' EXIT
status=0
for d in "${dirs[@]}"; do
  for f in "$d"/*.c "$d"/*.h; do
    [ -f "$f" ] || continue
    n=$(wc -l <"$f")
    if [ "$n" -gt "$max" ]; then
      echo "modules: $f has $n lines (more than $max): split it by concern" >&2
      status=1
    fi
    from="$d/$(basename "${f%.*}")"
    echo "$from $from" >>"$edges" # every module is a node, arrows or not
    sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" |
      while IFS= read -r inc; do
        for cand in "$d/$inc" "${layers[@]/%//$inc}" "include/$inc"; do
          if [ -f "$cand" ]; then
            to="$(dirname "$cand")/$(basename "${cand%.*}")"
            [ "$to" = "$from" ] || echo "$from $to"
            break
          fi
        done
      done >>"$edges"
  done
done

# util is the bottom layer: nothing of the lock, no backend.
bad=$(awk '$1 ~ /^src\/util\// && $2 ~ /^src\/(engine|redis|etcd)\//' "$edges" | sort -u)
if [ -n "$bad" ]; then
  echo "modules: src/util reaches a higher layer:" >&2
  echo "$bad" | sed 's/^/  /; s/ / -> /' >&2
  status=1
fi

# Only the engine changes a handle's state (src/engine/fsm.h): a backend
# reports a grant's lease end (dlock__lock_granted) and the engine fires.
bad=$(grep -nE 'dlock__fsm_fire|->state = DLOCK_STATE_' src/redis/*.c src/etcd/*.c src/zk/*.c 2>/dev/null || true)
if [ -n "$bad" ]; then
  echo "modules: a backend writes a handle's state (only src/engine may, through fsm.h):" >&2
  echo "$bad" | sed 's/^/  /' >&2
  status=1
fi

# tsort(1) names the modules of each circle it meets on stderr.
if ! out=$(tsort "$edges" 2>&1 >/dev/null) || [ -n "$out" ]; then
  echo "modules: the include graph has a circle; tsort says:" >&2
  echo "$out" | sed 's/^/  /' | head -20 >&2
  echo "modules: arrows on it:" >&2
  loop=$(echo "$out" | sed -n 's/^tsort: //p' | grep -v 'loop' | sort -u || true)
  for m in $loop; do
    grep "^$m " "$edges" | while read -r a b; do
      if [ "$a" != "$b" ] && echo "$loop" | grep -qx "$b"; then echo "  $a -> $b"; fi
    done
  done | sort -u >&2
  status=1
fi
# No module below the public verbs calls one that changes a lock: lock.c
# checks a verb's arguments and goes to the engine (or to set.c for a set
# of names), and everything else in src/ calls the engine. A call back up
# (set.c, once multi.c, calling dlock_lock_acquire() on its names) is a
# circle that the includes above do not show. Comments and strings are
# blanked first (keeping the line numbers), then every mention counts.
verbs='dlock_lock_(acquire|release|extend|adopt|forget|free|cancel)'
for d in "${layers[@]}"; do
  for f in "$d"/*.c "$d"/*.h; do
    [ -f "$f" ] && [ "$f" != src/engine/lock.c ] || continue
    perl -0777 -pe 's{/\*.*?\*/}{(my $c = $&) =~ tr/\n//cd; $c}gse;
                    s{//[^\n]*}{}g; s{"(?:\\.|[^"\\\n])*"}{""}g' "$f" |
      grep -nE "\b$verbs\b" | sed "s|^|modules: $f:|; s|\$| (a public verb below lock.c: call the engine, engine.h)|" >&2 &&
      status=1
  done
done

[ "$status" -eq 0 ] && echo "modules: $(sort -u "$edges" | awk '$1 != $2' | wc -l) arrows between $(awk '{print $1}' "$edges" | sort -u | wc -l) modules, no circle, no file over $max lines"
exit "$status"
