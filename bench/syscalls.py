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
    """The "calls" column of strace -c's "total" line: percent, seconds,
    usecs/call, calls, [errors,] "total"."""
    for line in reversed(open(path).read().strip().splitlines()):
        fields = line.split()
        if fields and fields[-1] == "total":
            return int(fields[3])
    raise ValueError("no total line in %s" % path)


def main(argv):
    if len(argv) != 5:
        print("usage: syscalls.py STRACE_SHORT OUT_SHORT STRACE_LONG OUT_LONG", file=sys.stderr)
        return 2
    try:
        calls = [total_calls(argv[1]), total_calls(argv[3])]
        cycles = [json.load(open(argv[2]))["n"], json.load(open(argv[4]))["n"]]
    except (OSError, ValueError, KeyError) as e:
        print("n/a (%s)" % e)
        return 0
    if cycles[1] <= cycles[0]:
        print("n/a (the longer run made no more cycles)")
        return 0
    print("%.1f" % ((calls[1] - calls[0]) / (cycles[1] - cycles[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
