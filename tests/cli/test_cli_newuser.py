#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""What a new user trips over: the dlock command saying one thing and doing
another (the issue of that name), item by item, against real redis-server
processes (test_cli.py's harness) and, with --etcd, a real etcd member
(test_cli_etcd.py's).

Usage: test_cli_newuser.py PATH_TO_DLOCK [--etcd] [unittest options]
"""
import json
import os
import subprocess
import sys
import unittest

import test_cli
import test_cli_etcd
from cli_support import wait_until
from test_cli import DlockTest

WITH_ETCD = False


class WriterMark(DlockTest):
    """Item 1: only a writer that waits keeps new readers back (dlock(1)),
    and a busy message says what keeps us out."""

    def reader(self, secs="6"):
        p = self.spawn("run", "-s", self.name, "--", "sleep", secs)
        self.assertTrue(wait_until(lambda: self.redis.cli("ZCARD", self.name) == "1", 5))
        return p

    def test_a_writer_that_tries_once_leaves_no_mark(self):
        self.reader()
        r = self.dlock("run", "-n", self.name, "--", "true")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f'"{self.name}" is held shared by 1 holder', r.stderr)
        self.assertNotIn("another owner", r.stderr)
        r = self.dlock("run", "-s", "-n", self.name, "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)  # no mark: readers still come in

    def test_a_writer_that_waits_leaves_a_mark_that_is_named_as_such(self):
        self.reader()
        r = self.dlock("run", "-w", "300ms", self.name, "--", "true")
        self.assertEqual(r.returncode, 1, r.stderr)
        r = self.dlock("run", "-s", "-n", self.name, "--", "true")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f'a writer waits for "{self.name}"', r.stderr)
        self.assertNotIn("another owner", r.stderr)

    def test_a_full_semaphore_is_named_as_such(self):
        self.spawn("run", "--permits", "1", self.name, "--", "sleep", "6")
        self.assertTrue(wait_until(lambda: self.redis.cli("ZCARD", self.name) == "2", 5))
        r = self.dlock("run", "-n", "--permits", "1", self.name, "--", "true")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f'every permit of "{self.name}" is in use (1 of 1)', r.stderr)
        self.assertNotIn("another owner", r.stderr)

    def test_several_names_say_which_one_is_held(self):
        a, b = self.name + ":a", self.name + ":b"
        self.dlock("acquire", b)
        r = self.dlock("run", "-n", a, b, "--", "true")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f'"{b}" is held by another owner', r.stderr)


def main():
    global WITH_ETCD
    if len(sys.argv) < 2:
        sys.exit("usage: test_cli_newuser.py PATH_TO_DLOCK [--etcd] [unittest options]")
    test_cli.DLOCK = test_cli_etcd.DLOCK = os.path.abspath(sys.argv.pop(1))
    if len(sys.argv) > 1 and sys.argv[1] == "--etcd":
        WITH_ETCD = True
        sys.argv.pop(1)
    unittest.main(verbosity=2)


if __name__ == "__main__":
    main()
