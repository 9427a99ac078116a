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


class StatusModes(DlockTest):
    """Items 2 and 5: status --json says what a key is, and always parses."""

    def status(self, name):
        r = self.dlock("status", "--json", name)
        return r, json.loads(r.stdout)

    def test_a_key_that_is_not_a_lock_is_reported_as_what_it_is(self):
        for kind, make in (("list", ["RPUSH", "a"]), ("hash", ["HSET", "f", "v"]),
                           ("zset", ["ZADD", "1", "m"]), ("set", ["SADD", "m"])):
            with self.subTest(kind=kind):
                name = f"{self.name}:{kind}"
                self.redis.cli(make[0], name, *make[1:])
                run = self.dlock("run", "-n", name, "--", "true")
                self.assertEqual(run.returncode, 76, run.stderr)  # WRONGTYPE
                r, j = self.status(name)
                self.assertEqual(r.returncode, 76, r.stdout)
                self.assertFalse(j["held"])
                self.assertEqual(j["state"], "wrongtype")
                node = j["nodes"][0]
                self.assertEqual((node["error"], node["type"]), ("DLOCK_EWRONGTYPE", kind))
                self.assertNotIn("mode", node)
                t = self.dlock("status", name)
                self.assertEqual(t.returncode, 76)
                self.assertIn(f"not a lock: the key holds a Redis {kind}", t.stdout)
                self.assertNotIn("shared by 0", t.stdout)

    def test_binary_names_give_json_that_parses(self):
        name = self.name.encode() + b"\xff\xfe:\xc3\xa9\xed\xa0\x80"
        r = subprocess.run(self.args("status", "--json", name), capture_output=True,
                           env=self.env(), timeout=30)
        self.assertEqual(r.returncode, 1, r.stderr)
        j = json.loads(r.stdout.decode("utf-8"))  # strict: invalid UTF-8 raises
        self.assertEqual(bytes.fromhex(j["name_hex"]), name)
        self.assertTrue(j["name"].endswith(":\u00e9\ufffd\ufffd\ufffd"))


class Etcd(unittest.TestCase):
    """What differs on etcd:// (with --etcd)."""

    @classmethod
    def setUpClass(cls):
        if not WITH_ETCD:
            raise unittest.SkipTest("built without etcd")
        cls.etcd = test_cli_etcd.Etcd()

    @classmethod
    def tearDownClass(cls):
        cls.etcd.stop()

    def setUp(self):
        self.name = "cli-" + self._testMethodName

    def dlock(self, *args, env=None):
        e = {k: v for k, v in os.environ.items() if not k.startswith("DLOCK_")}
        e.update(env or {})
        return subprocess.run([test_cli.DLOCK, "-r", self.etcd.url, *args], capture_output=True,
                              text=True, timeout=30, env=e)

    def test_status_of_a_held_lock_says_exclusive(self):
        p = subprocess.Popen([test_cli.DLOCK, "-r", self.etcd.url, "run", self.name, "--",
                              "sleep", "3"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            self.assertTrue(wait_until(lambda: self.dlock("status", self.name).returncode == 0))
            r = self.dlock("status", "--json", self.name)
            j = json.loads(r.stdout)
            self.assertTrue(j["held"])
            self.assertEqual(j["nodes"][0]["mode"], "exclusive")
        finally:
            p.kill()
            p.wait()
            p.stderr.close()


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
