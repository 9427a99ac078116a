#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""dlock run -s / -x / --permits N / several names, and status listing holders,
against real redis-server processes (the harness of test_cli.py).

Usage: test_cli_kinds.py PATH_TO_DLOCK [unittest options]

Concurrency is measured by the programs themselves: each run appends "in"
and "out" lines to a shared log file under an flock(2), and the test replays
the log to find the most holders inside at once.
"""
import json
import os
import sys
import time
import unittest

import test_cli
from cli_support import MoreRedisServers, wait_until
from test_cli import DlockTest

# The program run under the lock: log "in KIND", stay, log "out KIND".
SECTION = ('flock "$LOG.lock" sh -c \'echo "in $0" >> "$LOG"\' "$KIND"; sleep "$HOLD"; '
           'flock "$LOG.lock" sh -c \'echo "out $0" >> "$LOG"\' "$KIND"')


def replay(path):
    """(most readers inside at once, most holders at once, violations)."""
    readers = writers = most_r = most = bad = 0
    with open(path) as f:
        for line in f:
            what, kind = line.split()
            d = 1 if what == "in" else -1
            if kind == "r":
                readers += d
            else:
                writers += d
            if what == "in" and (writers > 1 or (writers and readers)):
                bad += 1
            most_r = max(most_r, readers)
            most = max(most, readers + writers)
    return most_r, most, bad


class Kinds(DlockTest):
    def section(self, kind, hold, *opts, names=None):
        env = self.env(LOG=self.path("log"), KIND=kind, HOLD=str(hold))
        args = self.args("run", *opts, *(names or [self.name]), "--", "sh", "-c", SECTION)
        import subprocess
        p = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        self.children.append(p)
        return p

    def finish(self, procs):
        for p in procs:
            _, err = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 0, err)

    def test_readers_share_and_writers_exclude(self):
        procs = [self.section("r", 0.4, "-s") for _ in range(3)]
        procs += [self.section("w", 0.1, "-x"), self.section("w", 0.1)]
        procs += [self.section("r", 0.2, "-s") for _ in range(2)]
        self.finish(procs)
        most_r, _, bad = replay(self.path("log"))
        self.assertEqual(bad, 0)
        self.assertGreaterEqual(most_r, 2)  # readers did share

    def test_permits_bound_the_holders(self):
        procs = [self.section("r", 0.3, "--permits", "2") for _ in range(6)]
        self.finish(procs)
        _, most, _ = replay(self.path("log"))
        self.assertEqual(most, 2)
        r = self.dlock("run", "--permits", "3", self.name, "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)  # idle: a new N is fine

    def test_status_lists_shares_and_permits(self):
        p = self.spawn("run", "-s", self.name, "--", "sleep", "5")
        q = self.spawn("run", "-s", self.name, "--", "sleep", "5")
        self.assertTrue(wait_until(lambda: self.redis.cli("ZCARD", self.name) == "2", 5))
        r = self.dlock("status", "--json", self.name)
        self.assertEqual(r.returncode, 0, r.stderr)
        node = json.loads(r.stdout)["nodes"][0]
        self.assertEqual(node["mode"], "shared")
        self.assertEqual(node["holders_count"], 2)
        self.assertTrue(all(0 < h["ttl_ms"] <= 30000 for h in node["holders"]))
        r = self.dlock("status", self.name)
        self.assertIn("shared by 2", r.stdout)
        r = self.dlock("run", "-n", self.name, "--", "true")  # a writer: busy
        self.assertEqual(r.returncode, 1, r.stderr)
        for x in (p, q):
            x.kill()  # SIGKILL: the shares end with their leases
            x.wait()
        name2 = self.name + ":sem"
        s = self.spawn("run", "--permits", "4", "-t", "1s", name2, "--", "sleep", "5")
        self.assertTrue(wait_until(lambda: self.redis.cli("ZCARD", name2) == "2", 5))
        r = self.dlock("status", name2)
        self.assertIn("permits in use 1 of 4", r.stdout)
        r = self.dlock("run", "--permits", "5", name2, "--", "true")
        self.assertEqual(r.returncode, 64, r.stderr)
        self.assertIn("number of permits differs", r.stderr)
        s.kill()
        s.wait()
        # The killed holder's 1 s permit lease ends; N goes with it.
        self.assertTrue(wait_until(lambda: self.redis.cli("EXISTS", name2) == "0", 5))

    def test_several_names_all_or_nothing(self):
        a, b = self.name + ":a", self.name + ":b"
        r = self.dlock("run", b, a, "--", "sh", "-c", 'echo "$DLOCK_NAME"')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), f"{a} {b}")
        tok = self.dlock("acquire", b).stdout.strip()
        r = self.dlock("run", "-n", a, b, "--", "true")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(self.redis.cli("EXISTS", a), "0")  # given back
        self.dlock("release", b, tok)
        procs = [self.section("w", 0.05, names=[a, b] if i % 2 else [b, a]) for i in range(6)]
        self.finish(procs)  # {a,b} against {b,a}: no deadlock
        _, most, bad = replay(self.path("log"))
        self.assertEqual((most, bad), (1, 0))

    def test_bad_combinations_are_usage_errors(self):
        for argv in (["run", "--permits", "0", self.name, "--", "true"],
                     ["run", "--permits", "x", self.name, "--", "true"],
                     ["run", "-s", "--permits", "2", self.name, "--", "true"],
                     ["run", "--fair", "-s", self.name, "--", "true"],
                     ["run", "--fair", "a", "b", "--", "true"],
                     ["run", "--permits", "2", "a", "b", "--", "true"],
                     ["run", "a", "a", "--", "true"],
                     ["run", "--permits", "2", "--fence", self.name, "--", "true"],
                     ["acquire", "--permits", "2", self.name],
                     ["acquire", "-s", self.name]):
            with self.subTest(argv=argv):
                self.assertUsage(self.dlock(*argv))


class KindsRedlock(MoreRedisServers, DlockTest):
    def test_shared_and_sets_work_permits_do_not(self):
        nodes = [self.redis, *self.more]
        urls = [s.url for s in nodes]
        p = self.spawn("run", "-s", self.name, "--", "sleep", "3", urls=urls)
        # Shared on a majority: the grant decides there, and a node that
        # answers later (a fresh node's NOSCRIPT) may never get the share.
        shares = lambda: [s.cli("ZCARD", self.name) for s in nodes]
        self.assertTrue(wait_until(lambda: shares().count("1") >= 2, 10), shares())
        r = self.dlock("run", "-s", "-n", self.name, "--", "true", urls=urls)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.dlock("run", "-n", self.name, "--", "true", urls=urls)
        self.assertEqual(r.returncode, 1, r.stderr)
        p.kill()
        p.wait()
        r = self.dlock("run", "-n", self.name + ":x", self.name + ":y", "--", "true", urls=urls)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.dlock("run", "--permits", "2", self.name + ":s", "--", "true", urls=urls)
        self.assertUsage(r)
        self.assertIn("one Redis node only", r.stderr)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: test_cli_kinds.py PATH_TO_DLOCK [unittest options]")
    test_cli.DLOCK = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
