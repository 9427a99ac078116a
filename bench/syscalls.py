#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""System calls per cycle from two `strace -f -c` runs of dlock's worker.

usage: syscalls.py STRACE_SHORT OUT_SHORT STRACE_LONG OUT_LONG

Each STRACE file is what `strace -f -c -o FILE` wrote for one run of
`dlock-bench-worker mode=cycle`, and OUT the worker's own out file (its
"n" is the cycles it measured). Start-up (loading, connecting, priming)
costs both runs the same calls, so the difference over the difference in
cycles is what one cycle costs. Prints that figure, or "n/a (...)".
"""
import json
import sys


def total_calls(path):
    """The sum of strace -c's "calls" column over its per-call rows: percent,
    seconds, usecs/call, calls, [errors,] name. (The "total" line is not
    read: some strace versions leave its usecs/call blank.)"""
    calls, rows = 0, 0
    for line in open(path).read().splitlines():
        fields = line.split()
        if len(fields) < 5 or fields[-1] == "total" or fields[0].startswith(("%", "-")):
            continue
        calls += int(fields[3])
        rows += 1
    if not rows:
        raise ValueError("no rows in %s" % path)
    return calls


def main(argv):
    if len(argv) != 5:
        print("usage: syscalls.py STRACE_SHORT OUT_SHORT STRACE_LONG OUT_LONG", file=sys.stderr)
        return 2
    try:
        calls = [total_calls(argv[1]), total_calls(argv[3])]
        outs = [json.load(open(argv[2])), json.load(open(argv[4]))]
        cycles = [o["n"] for o in outs]
    except (OSError, ValueError, KeyError) as e:
        print("n/a (%s)" % e)
        return 0
    # A failed acquire costs calls that no counted cycle pays for.
    if any(o.get("acq_fail") or o.get("errors") for o in outs):
        print("n/a (the worker failed some acquires)")
        return 0
    if cycles[1] <= cycles[0]:
        print("n/a (the longer run made no more cycles)")
        return 0
    print("%.1f" % ((calls[1] - calls[0]) / (cycles[1] - cycles[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
