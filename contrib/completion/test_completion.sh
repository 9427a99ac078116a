#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The bash completion completes commands, options and values; the zsh one
# at least parses. usage: test_completion.sh [SRC_DIR]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
fail=0

complete_words() { # the words of a command line, the last one being completed
  bash --norc --noprofile -c '
    source "$1"; shift
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
    _dlock; echo "${COMPREPLY[*]}"' _ "$HERE/dlock.bash" "$@"
}

expect() { # want, words...
  local want=$1 got
  shift
  got=$(complete_words "$@")
  if [ "$got" != "$want" ]; then
    echo "FAIL: '$*' completed to '$got', want '$want'" >&2
    fail=1
  fi
}

expect "release" dlock rel
expect "run" dlock -r redis://h:1 --prefix lock: ru
expect "--fair" dlock run --fa
expect "--fence" dlock run --fe
expect "--permits" dlock run --pe
expect "--shared" dlock run --sh
expect "--print-fence" dlock acquire --pr
expect "--pass --password-file" dlock --pas
expect "--json" dlock status --js
expect "list" dlock li
expect "elect" dlock ele
expect "--again" dlock elect --ag
expect "--watch" dlock leader --wa
expect "--json" dlock list --js
expect "doctor" dlock doc
expect "--json" dlock -r redis://h:1 doctor --js
expect "--ttl" dlock doctor --tt
expect "redis-sentinel://" dlock doctor rediss://h:1 redis-s
expect "etcd://" dlock doctor et
expect "term kill ignore" dlock run --on-lost ""
expect "--no-auth-warning" dlock --no
expect "--nonblock --no-fence" dlock run --no
expect "--cacert --cacertdir" dlock --cac
expect "etcd://" dlock -r e
expect "redis:// rediss:// redis-sentinel://" dlock --redis re
expect "--ttl --timeout" dlock run --t
expect "run" dlock --tls --cacert /tmp/ca.crt --sni h ru
# after "--", the program is completed as a command
got=$(complete_words dlock run x -- bas)
case " $got " in *" bash "*) ;; *) echo "FAIL: 'dlock run x -- bas' gave '$got'" >&2; fail=1 ;; esac

if command -v zsh >/dev/null; then
  zsh -n "$HERE/_dlock" || { echo "FAIL: _dlock does not parse" >&2; fail=1; }
fi
[ "$fail" -eq 0 ] && echo "completion: ok"
exit "$fail"
