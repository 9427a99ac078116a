#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""dlock list [--json] [PATTERN] against real redis-server processes (the
harness of test_cli.py): every kind with its mode, holders, TTL, waiters
and fence, text and JSON (always valid UTF-8), the pattern and --prefix,
three nodes merged by name, bad input and an unreachable node.

Usage: test_cli_list.py PATH_TO_DLOCK [unittest options]
"""
import json
import os
import re
import signal
import sys
import unittest

import test_cli
from cli_support import MoreRedisServers, wait_until
from test_cli import DlockTest


class List(DlockTest):
    def pfx(self):
        return ["--prefix", self.name + "/"]

    def list_json(self, *args, urls=None):
        r = self.dlock(*self.pfx(), "list", "--json", *args, urls=urls)
        self.assertEqual(r.returncode, 0, r.stderr)
        return {e["name"]: e for e in json.loads(r.stdout)}

    def test_every_kind_in_text_and_json(self):
        for name, opts in (("plain", ["--fence"]), ("fair", ["--fair"])):
            r = self.dlock(*self.pfx(), "acquire", "-t", "30s", *opts, name)
            self.assertEqual(r.returncode, 0, r.stderr)
        held = [self.spawn(*self.pfx(), "run", "-s", "sh", "--", "sleep", "60"),
                self.spawn(*self.pfx(), "run", "-s", "sh", "--", "sleep", "60"),
                self.spawn(*self.pfx(), "run", "--permits", "3", "sem", "--", "sleep", "60")]
        key = self.name + "/"
        self.assertTrue(wait_until(lambda: self.redis.cli("ZCARD", key + "sh") == "2"
                                   and self.redis.cli("ZCARD", key + "sem") == "2", 10))
        # A waiter on the plain lock: a waiting acquire that stays.
        held.append(self.spawn(*self.pfx(), "acquire", "-w", "60s", "plain"))
        self.assertTrue(wait_until(
            lambda: self.list_json("plain")["plain"]["waiters"] >= 1, 10))
        got = self.list_json()
        self.assertEqual(sorted(got), ["fair", "plain", "sem", "sh"])
        self.assertEqual(got["plain"]["mode"], "exclusive")
        self.assertEqual(got["plain"]["holders"], 1)
        self.assertEqual(got["plain"]["fence"], 1)
        self.assertTrue(0 < got["plain"]["ttl_ms"] <= 30000)
        self.assertTrue(got["plain"]["held"])
        self.assertEqual(got["sh"]["mode"], "shared")
        self.assertEqual(got["sh"]["holders"], 2)
        self.assertEqual(got["sem"]["mode"], "semaphore")
        self.assertEqual(got["sem"]["permits"], 3)
        self.assertEqual(got["sem"]["holders"], 1)
        r = self.dlock(*self.pfx(), "list")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), 4, r.stdout)
        self.assertRegex(lines[1], r'^"plain" exclusive  holders 1  ttl [0-9.]+s  '
                                   r'waiters [1-9][0-9]*  fence 1  identity host=\S+ '
                                   r'pid=[0-9]+ prog=dlock since=[0-9]+$')
        self.assertRegex(lines[2], r'^"sem" semaphore 1/3  holders 1 ')
        for p in held:
            p.kill()
            p.wait()

    def test_names_that_are_not_utf8_still_give_json(self):
        bad = self.name + "/x\udcff\x01y"  # bytes ff and 01 in the name
        r = self.dlock("acquire", bad)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.dlock(*self.pfx(), "list", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        got = json.loads(r.stdout)
        self.assertEqual(len(got), 1, r.stdout)
        self.assertEqual(got[0]["name"], "x\ufffd\x01y")
        self.assertEqual(got[0]["name_hex"], "78ff0179")

    def test_pattern_and_prefix(self):
        for n in ("job:1", "job:2", "job:10", "cron:1"):
            r = self.dlock(*self.pfx(), "acquire", n)
            self.assertEqual(r.returncode, 0, r.stderr)
        self.redis.cli("SET", self.name + "-other/job:3", "x", "PX", "30000")
        self.assertEqual(sorted(self.list_json("job:*")), ["job:1", "job:10", "job:2"])
        self.assertEqual(sorted(self.list_json("job:?")), ["job:1", "job:2"])
        self.assertEqual(self.list_json("none*"), {})
        r = self.dlock(*self.pfx(), "list", "none*")
        self.assertEqual((r.returncode, r.stdout), (0, ""))
        r = self.dlock(*self.pfx(), "list", "--json", "none*")
        self.assertEqual(r.stdout, "[]\n")

    def test_bad_input_is_a_usage_error(self):
        self.assertUsage(self.dlock("list", "a", "b"))
        self.assertUsage(self.dlock("list", ""))
        self.assertUsage(self.dlock("list", "--nope"))

    def test_unreachable_exits_69(self):
        from cli_support import free_port
        r = self.dlock("list", urls=[f"redis://127.0.0.1:{free_port()}"])
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertIn("list:", r.stderr)


class Identity(DlockTest):
    """Who holds what (issue 40): the CLI keeps its identity beside each
    lock it takes (host, pid, program, since) unless told --no-identity;
    status and list show it; the lock key's value stays the bare token."""

    def pfx(self):
        return ["--prefix", self.name + "/"]

    def id_key_exists(self, name):
        return self.redis.cli("EVAL", "return redis.call('exists', KEYS[1] .. '\\0id')", "1",
                              self.name + "/" + name)

    def status_json(self, name):
        r = self.dlock(*self.pfx(), "status", "--json", name)
        return json.loads(r.stdout)["nodes"][0]

    def test_status_and_list_show_who_holds_until_release(self):
        p = self.spawn(*self.pfx(), "run", "held", "--", "sleep", "60")
        key = self.name + "/held"
        self.assertTrue(wait_until(lambda: self.redis.cli("EXISTS", key) == "1", 10))
        want = rf"host=\S+ pid={p.pid} prog=dlock since=[0-9]+"
        self.assertRegex(self.status_json("held")["identity"], "^" + want + "$")
        r = self.dlock(*self.pfx(), "status", "held")
        self.assertRegex(r.stdout, r"\n +identity " + want + "\n")
        r = self.dlock(*self.pfx(), "list", "--json")
        self.assertRegex(json.loads(r.stdout)[0]["identity"], "^" + want + "$")
        r = self.dlock(*self.pfx(), "list")
        self.assertRegex(r.stdout, "  identity " + want + "\n$")
        # The lock key holds the bare token, as other libraries expect.
        self.assertRegex(self.redis.cli("GET", key), "^[0-9a-f]{32}$")
        self.assertEqual(self.id_key_exists("held"), "1")
        p.send_signal(signal.SIGTERM)  # forwarded; dlock releases on the way out
        p.wait(10)
        self.assertEqual(self.redis.cli("EXISTS", key), "0")
        self.assertEqual(self.id_key_exists("held"), "0")

    def test_each_reader_shows_its_own(self):
        # Two readers of one shared lock: status names each holder's
        # identity on its line, list joins them; both go with the holds.
        held = [self.spawn(*self.pfx(), "run", "-s", "sh", "--", "sleep", "60")
                for _ in range(2)]
        key = self.name + "/sh"
        self.assertTrue(wait_until(lambda: self.redis.cli("ZCARD", key) == "2", 10))
        who = [rf"host=\S+ pid={p.pid} prog=dlock since=[0-9]+" for p in held]
        node = self.status_json("sh")
        got = sorted(h["identity"] for h in node["holders"])
        self.assertEqual(len(got), 2)
        for w in who:
            self.assertTrue(any(re.match("^" + w + "$", g) for g in got), (w, got))
        r = self.dlock(*self.pfx(), "status", "sh")
        for w in who:
            self.assertRegex(r.stdout, r"\n +[0-9a-f#]+  lease [0-9.]+s  identity " + w + "\n")
        r = self.dlock(*self.pfx(), "list", "--json")
        for w in who:
            self.assertRegex(json.loads(r.stdout)[0]["identity"], w)
        for p in held:
            p.send_signal(signal.SIGTERM)  # forwarded; dlock releases on the way out
            p.wait(10)
        self.assertEqual(self.redis.cli("EXISTS", key), "0")
        self.assertEqual(self.id_key_exists("sh"), "0")

    def test_no_identity_and_a_text_of_ones_own(self):
        r = self.dlock("--no-identity", *self.pfx(), "acquire", "off")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIsNone(self.status_json("off")["identity"])
        self.assertEqual(self.id_key_exists("off"), "0")
        r = self.dlock(*self.pfx(), "list")
        self.assertNotIn("identity", r.stdout)
        r = self.dlock("--identity", "deploy #7", *self.pfx(), "acquire", "own")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(self.status_json("own")["identity"], "^deploy #7 since=[0-9]+$")
        r = self.dlock("--identity", "tab\there", *self.pfx(), "acquire", "bad")
        self.assertEqual(r.returncode, 64, r.stderr)
        self.assertIn("identity", r.stderr)


class ListThreeNodes(MoreRedisServers, List.__base__):
    def test_merged_by_name_with_a_majority(self):
        urls = [self.redis.url] + [s.url for s in self.more]
        pfx = ["--prefix", self.name + "/"]
        r = self.dlock(*pfx, "acquire", "a", urls=urls)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.more[0].cli("SET", self.name + "/b", "x", "PX", "30000")  # one node of 3
        r = self.dlock(*pfx, "list", "--json", urls=urls)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = {e["name"]: e for e in json.loads(r.stdout)}
        self.assertEqual((got["a"]["held"], got["a"]["nodes_held"], got["a"]["quorum"]),
                         (True, 3, 2))
        self.assertEqual((got["b"]["held"], got["b"]["nodes_held"]), (False, 1))
        r = self.dlock(*pfx, "list", urls=urls)
        self.assertIn('"a" exclusive', r.stdout)
        self.assertIn("held on 3 of 3 nodes", r.stdout)
        self.assertIn("partial on 1 of 3 nodes", r.stdout)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: test_cli_list.py PATH_TO_DLOCK [unittest options]")
    test_cli.DLOCK = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
