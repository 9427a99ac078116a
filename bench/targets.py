#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Issue 20's speed targets, from one peers run's table (bench/run.sh).

usage: targets.py PEERS.tsv   (DLOCK_SYSCALLS: the system calls per S1
cycle that bench/syscalls.py measured, or "n/a ...")

Prints one line per target: what it asks, this run's figure and "met",
"NOT met", "n/a" (no row for it in this run) or "invalid run" (a row whose
run broke: a safety violation, errors, failed workers, late starters, a
scenario that did not reach its target, or S3 shares from fewer than its
four workers), which no figure of that row can meet. Fair mode's target is set
against the hand-over limit, which `make bench-more` measures
(bench/handover-limit.sh); here it is shown beside baseline-c only.
"""
import csv
import os
import re
import sys


def load(path):
    rows = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f, delimiter="\t"):
            rows[(r["client"], r["scenario"])] = r
    return rows


def rate(rows, who, scen):
    try:
        return float(rows[(who, scen)]["rate"])
    except (KeyError, TypeError, ValueError):
        return None


def note(rows, who, scen, name):
    """A name=value field of the row's notes column (max_wait, per-proc)."""
    m = re.search(r"(?:^|\s)%s=(\S+)" % re.escape(name), rows.get((who, scen), {}).get("notes") or "")
    return m.group(1) if m else None


def verdict(ok):
    return "n/a" if ok is None else ("met" if ok else "NOT met")


S3_WORKERS = 4


def broken(rows, who, scen):
    """Why the row's run cannot be read as a figure, or None."""
    r = rows.get((who, scen))
    if r is None:
        return None
    if (r.get("viol") or "0") != "0":
        return "viol=" + r["viol"]
    for name in ("err", "acqfail"):
        m = re.search(r"(?:^|\s)%s=(\d+)" % name, r.get("checks") or "")
        if m and m.group(1) != "0":
            return "%s=%s" % (name, m.group(1))
    notes = r.get("notes") or ""
    for word in ("FAILED", "TARGET-NOT-REACHED", "LATE="):
        if word in notes:
            return word.rstrip("=")
    pp = note(rows, who, scen, "per-proc")
    if scen.startswith("S3") and pp is not None and len(pp.split("/")) != S3_WORKERS:
        return "%d shares" % len(pp.split("/"))
    return None


def checked(rows, row, pairs):
    """row, or row with an "invalid run" verdict if a run it reads broke."""
    for who, scen in pairs:
        why = broken(rows, who, scen)
        if why:
            return (row[0], "%s [%s %s: %s]" % (row[1], who, scen, why), "invalid run")
    return row


def ratio_row(rows, label, who, ours, theirs, want):
    d, b = rate(rows, who, ours), rate(rows, "baseline-c", theirs)
    if d is None or not b:
        return (label, "n/a", "n/a")
    row = (label, "%.2f (%.0f / %.0f)" % (d / b, d, b), verdict(d / b >= want))
    return checked(rows, row, [(who, ours), ("baseline-c", theirs)])


def max_wait_row(rows, label, want_ms):
    mw = note(rows, "dlock", "S3-default", "max_wait")
    try:
        v = float(mw[:-2] if mw.endswith("ms") else mw)
        ok = None if v != v else v <= want_ms  # nan: no wait was recorded
    except (AttributeError, ValueError):
        ok = None
    return checked(rows, (label, mw or "n/a", verdict(ok)), [("dlock", "S3-default")])


def shares_row(rows, label, spread):
    pp = note(rows, "dlock", "S3-default", "per-proc")
    try:
        shares = [int(x) for x in pp.split("/")]
        mean = sum(shares) / len(shares)
        ok = all(abs(s - mean) <= spread * mean for s in shares)
    except (AttributeError, ValueError, ZeroDivisionError):
        ok = None
    return checked(rows, (label, pp or "n/a", verdict(ok)), [("dlock", "S3-default")])


def syscalls_row(label, figure, most):
    try:
        return (label, figure, verdict(float(figure) <= most))
    except ValueError:
        return (label, figure, "n/a")


def fair_row(rows):
    d, b = rate(rows, "dlock-fair", "S3-default"), rate(rows, "baseline-c", "S3-tuned")
    label = "S3 fair within 0.8 of the hand-over limit"
    if d is None or not b:
        return (label, "n/a", "n/a")
    mw = note(rows, "dlock-fair", "S3-default", "max_wait") or "n/a"
    row = (label, "%.0f cs/s, %.2f x baseline-c, longest wait %s" % (d, d / b, mw),
           "make bench-more")
    return checked(rows, row, [("dlock-fair", "S3-default"), ("baseline-c", "S3-tuned")])


def main(argv):
    if len(argv) != 2:
        print("usage: targets.py PEERS.tsv", file=sys.stderr)
        return 2
    rows = load(argv[1])
    out = [("target", "this run", "verdict"),
           ratio_row(rows, "S1 >= 0.97 x baseline-c", "dlock", "S1", "S1", 0.97),
           ratio_row(rows, "S2 >= 0.95 x baseline-c", "dlock", "S2", "S2", 0.95),
           syscalls_row("<= 6 system calls per S1 cycle", os.environ.get("DLOCK_SYSCALLS", "n/a"), 6),
           ratio_row(rows, "S3 default >= baseline-c's S3-tuned", "dlock", "S3-default",
                     "S3-tuned", 1.0),
           max_wait_row(rows, "S3 default longest wait <= 5 ms", 5.0),
           shares_row(rows, "S3 default shares within +/-10 %", 0.10),
           fair_row(rows),
           ratio_row(rows, "S4 >= baseline-c", "dlock", "S4", "S4", 1.0),
           # The same three without a fencing counter (DLOCK_NO_FENCE): no
           # script on the acquire, so the library's own cost shows.
           ratio_row(rows, "S1 >= 0.97 x baseline-c, DLOCK_NO_FENCE", "dlock-nofence", "S1",
                     "S1", 0.97),
           ratio_row(rows, "S2 >= 0.95 x baseline-c, DLOCK_NO_FENCE", "dlock-nofence", "S2",
                     "S2", 0.95),
           ratio_row(rows, "S4 >= baseline-c, DLOCK_NO_FENCE", "dlock-nofence", "S4", "S4", 1.0)]
    w = [max(len(r[i]) for r in out) for i in range(3)]
    for k, r in enumerate(out):
        print("  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip())
        if k == 0:
            print("-" * (sum(w) + 4))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
