#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""dlock break [--force] [--json] NAME against a real redis-server (the
harness of test_cli.py): a running holder loses its lock and exits 75; the
fence keeps growing; the question on a terminal (answered no, then yes);
refused without --force when there is no terminal; a name its readers hold
(their grants raise the counter with --fence: the guard status shows spares
a writer that came after them, and breaks every reader); a free name; a key
that is not a lock; bad input.

Usage: test_cli_break.py PATH_TO_DLOCK [unittest options]
"""
import json
import os
import select
import subprocess
import sys
import time
import unittest

import test_cli
from cli_support import wait_until
from test_cli import DlockTest


class Break(DlockTest):
    def pfx(self):
        return ["--prefix", self.name + "/"]

    def held(self, name):
        return self.dlock(*self.pfx(), "status", name).returncode == 0

    def test_a_running_holder_loses_it_and_exits_75(self):
        p = self.spawn(*self.pfx(), "run", "-t", "3s", "--fence", "job", "--", "sleep", "60")
        self.assertTrue(wait_until(lambda: self.held("job"), 10))
        # No terminal to ask on, and no --force: refused, nothing changes.
        r = self.dlock(*self.pfx(), "break", "job")
        self.assertEqual(r.returncode, 64, r.stderr)
        self.assertIn("--force", r.stderr)
        self.assertTrue(self.held("job"))
        r = self.dlock(*self.pfx(), "break", "--force", "--json", "job")
        self.assertEqual(r.returncode, 0, r.stderr)
        got = json.loads(r.stdout)
        self.assertEqual((got["name"], got["removed"], got["mode"], got["fence"]),
                         ("job", 1, "exclusive", 1))
        self.assertEqual((got["nodes_removed"], got["answered"], got["nodes"]), (1, 1, 1))
        # The holder learns it at its next renewal (every second at -t 3s).
        p.communicate(timeout=20)
        self.assertEqual(p.returncode, 75)
        r = self.dlock(*self.pfx(), "acquire", "-n", "--print-fence", "job")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split()[1], "2")  # the fence went on growing

    def ask(self, answer, name):
        """dlock break NAME with a terminal on stdin that answers `answer`."""
        master, slave = os.openpty()
        try:
            p = subprocess.Popen(self.args(*self.pfx(), "break", name), stdin=slave,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env=self.env())
            os.write(master, answer.encode())
            out, err = p.communicate(timeout=30)
        finally:
            os.close(master)
            os.close(slave)
        return p.returncode, out, err

    def test_asks_on_a_terminal(self):
        r = self.dlock(*self.pfx(), "acquire", "-t", "60s", "asked")
        self.assertEqual(r.returncode, 0, r.stderr)
        token = r.stdout.strip()
        code, out, err = self.ask("n\n", "asked")
        self.assertEqual(code, 1, err)
        self.assertIn('"asked" is held on 1 of 1 node(s)', err)
        self.assertIn("token " + token, err)
        self.assertIn("not broken", err)
        self.assertTrue(self.held("asked"))
        code, out, err = self.ask("y\n", "asked")
        self.assertEqual(code, 0, err)
        self.assertIn('broke "asked": removed 1 exclusive hold(s) on 1 of 1 node(s)', out)
        self.assertFalse(self.held("asked"))

    def ask_after(self, name, between):
        """dlock break NAME on a terminal, answered yes once between() ran:
        after the question (what holds the name was read), before the
        answer."""
        master, slave = os.openpty()
        try:
            p = subprocess.Popen(self.args(*self.pfx(), "break", name), stdin=slave,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env=self.env())
            asked, deadline = "", time.monotonic() + 20
            while "[y/N]" not in asked and time.monotonic() < deadline:
                if select.select([p.stderr], [], [], 1)[0]:
                    chunk = os.read(p.stderr.fileno(), 4096).decode()
                    if not chunk:
                        break
                    asked += chunk
            between()
            os.write(master, b"y\n")
            out, err = p.communicate(timeout=30)
        finally:
            os.close(master)
            os.close(slave)
        return p.returncode, out, asked + err

    def readers(self, name, n):
        """n readers of NAME (dlock run -s --fence: each grant raises the
        counter), holding until stopped."""
        ps = [self.spawn(*self.pfx(), "run", "-s", "--fence", "-t", "3s", name, "--",
                         "sleep", "60") for _ in range(n)]
        key = self.name + "/" + name
        self.assertTrue(wait_until(lambda: self.redis.cli("ZCARD", key) == str(n), 10))
        return ps

    def test_a_writer_after_the_readers_shown_is_not_broken(self):
        # Found by review: status showed readers fence 0, the break took it
        # as "whoever holds it", and broke the writer that came after them.
        readers = self.readers("rw", 2)
        r = self.dlock(*self.pfx(), "status", "--json", "rw")
        fence = json.loads(r.stdout)["nodes"][0]["fence"]
        self.assertEqual(fence, 2, r.stdout)  # each reader's grant raised the counter
        r = self.dlock(*self.pfx(), "list", "--json", "rw")
        self.assertEqual([(e["mode"], e["holders"], e["fence"]) for e in json.loads(r.stdout)],
                         [("shared", 2, fence)], r.stdout)
        writer = []

        def readers_leave_and_a_writer_comes():
            for p in readers:
                p.terminate()  # dlock run releases once sleep is gone
                p.communicate(timeout=20)
            r = self.dlock(*self.pfx(), "acquire", "-n", "-t", "60s", "--print-fence", "rw")
            self.assertEqual(r.returncode, 0, r.stderr)
            writer.extend(r.stdout.split())

        code, out, err = self.ask_after("rw", readers_leave_and_a_writer_comes)
        self.assertIn("fence %d" % fence, err)
        self.assertIn("shared, 2 holder(s)", err)
        self.assertEqual(code, 1, err)
        self.assertIn("taken again since it was shown", err)
        self.assertEqual(int(writer[1]), fence + 1)
        r = self.dlock(*self.pfx(), "release", "rw", writer[0])
        self.assertEqual(r.returncode, 0, r.stderr)  # still the writer's
        # What status shows now guards every reader there: all go.
        readers = self.readers("rw", 2)
        code, out, err = self.ask("y\n", "rw")
        self.assertEqual(code, 0, err)
        self.assertIn("fence %d" % (fence + 3), err)
        self.assertIn('removed 2 shared hold(s) on 1 of 1 node(s); the fence was %d' % (fence + 3),
                      out)
        for p in readers:
            p.communicate(timeout=20)
            self.assertEqual(p.returncode, 75)

    def test_free_name_and_a_key_that_is_not_a_lock(self):
        r = self.dlock(*self.pfx(), "break", "-f", "nobody")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('"nobody" was free: nothing removed', r.stdout)
        self.redis.cli("RPUSH", self.name + "/alist", "a")
        r = self.dlock(*self.pfx(), "break", "-f", "alist")
        self.assertEqual(r.returncode, 76, r.stderr)
        self.assertEqual(self.redis.cli("LLEN", self.name + "/alist"), "1")

    def test_bad_input_is_a_usage_error(self):
        self.assertUsage(self.dlock("break"))
        self.assertUsage(self.dlock("break", "-f", ""))
        self.assertUsage(self.dlock("break", "-f", "a", "b"))
        self.assertUsage(self.dlock("break", "--nope", "a"))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: test_cli_break.py PATH_TO_DLOCK [unittest options]")
    test_cli.DLOCK = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
