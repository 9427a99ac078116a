#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Every source file carries an SPDX licence line in its first three lines:
# C, headers, Lua, shell, Python, CMake, Makefile, the man page, the
# completion files. Run by ctest (test "spdx") and so by `make check`.
# usage: scripts/check-spdx.sh [SOURCE_DIR]
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  files=$(git ls-files --cached --others --exclude-standard)
else
  files=$(find . -path ./build -prune -o -path './build-*' -prune -o -type f -print | sed 's|^\./||')
fi
missing=0
checked=0
while IFS= read -r f; do
  [ -f "$f" ] || continue
  case $f in
  *.c | *.h | *.lua | *.sh | *.py | *.cmake | *.in | *.gp | *.bash | *.1 | \
    CMakeLists.txt | */CMakeLists.txt | Makefile | .ci/run | contrib/completion/_dlock) ;;
  *) continue ;;
  esac
  checked=$((checked + 1))
  if ! head -n 3 "$f" | grep -q 'SPDX-License-Identifier: BSD-3-Clause'; then
    echo "spdx: no 'SPDX-License-Identifier: BSD-3-Clause' in the first lines of $f" >&2
    missing=$((missing + 1))
  fi
done <<<"$files"
if [ "$missing" -gt 0 ]; then
  echo "spdx: $missing of $checked files lack the line" >&2
  exit 1
fi
echo "spdx: all $checked source files carry the licence line"
