#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The longest functions of src/ (lines, file:line, name), longest first,
# then how many are 100 lines or more and 60 or more: the figures the
# engine issue (docs/dev/engine-plan.md §1) tracks. Needs universal-ctags.
#   scripts/func-lengths.sh [N]   (N: how many to list, default 10)
set -eu
cd "$(dirname "$0")/.."
n=${1:-10}
list=$(ctags --kinds-c=f --fields=+ne -f - $(find src -name '*.c' | sort) |
    awk -F'\t' '$4=="f"{s=e=0; for(i=5;i<=NF;i++){if($i~/^line:/)s=substr($i,6); if($i~/^end:/)e=substr($i,5)}
                if(s&&e) print e-s+1, $2":"s, $1}' | sort -rn)
printf '%s\n' "$list" | head -n "$n"
printf 'functions: %s; of 100 lines or more: %s; of 60 or more: %s\n' \
    "$(printf '%s\n' "$list" | wc -l)" \
    "$(printf '%s\n' "$list" | awk '$1>=100' | wc -l)" \
    "$(printf '%s\n' "$list" | awk '$1>=60' | wc -l)"
