#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The dlock command on a zk:// URL, against a real ZooKeeper member.

Usage: test_cli_zk.py PATH_TO_DLOCK [unittest options]

Starts one ZooKeeper member (java, Debian's zookeeper package) on a free
127.0.0.1 port in a temporary directory and stops exactly that process at
the end; skipped without java or the jar. run, busy (1), waiting and status
as on Redis; acquire, release and extend by token refused (69: a lock there
ends with its process's session); a password in the URL shows as *** in
ps; an unreachable ensemble exits 69; elect and leader (--watch) in
Curator's LeaderSelector layout; list, status and break --force.
"""
import json
import os
import re
import select
import signal
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

from cli_support import RunOnAStore, free_port, start_process, stop_process, wait_until

DLOCK = None
JAR = "/usr/share/java/zookeeper.jar"
JAVA = "/usr/bin/java"
TOKEN_RE = re.compile(r"^_c_[0-9a-f-]{36}-lock-[0-9]{10}$")


class ZooKeeper:
    """One standalone member of our own on 127.0.0.1, in a temporary
    directory; stop() ends exactly it and removes the directory."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="dlock-cli-zk-")
        self.log = open(os.path.join(self.dir, "zookeeper.log"), "w")

        def argv():
            self.port = free_port()
            conf = os.path.join(self.dir, "zoo.cfg")
            with open(conf, "w") as f:
                f.write(f"tickTime=100\ndataDir={self.dir}/data\nclientPort={self.port}\n"
                        "clientPortAddress=127.0.0.1\nmaxSessionTimeout=60000\n"
                        "admin.enableServer=false\n4lw.commands.whitelist=ruok,srvr\n")
            return [JAVA, "-Xmx128m", "-XX:+UseSerialGC", "-cp", "/etc/zookeeper/conf:" + JAR,
                    "org.apache.zookeeper.server.ZooKeeperServerMain", conf]
        try:
            self.proc = start_process(argv, self.ready, "ZooKeeper did not start", timeout=30,
                                      stdout=self.log, stderr=self.log)
        except BaseException:
            self.log.close()
            shutil.rmtree(self.dir, ignore_errors=True)
            raise

    @property
    def url(self):
        return f"zk://127.0.0.1:{self.port}"

    def ready(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"ruok")
                return s.recv(4) == b"imok"
        except OSError:
            return False

    def stop(self):
        stop_process(self.proc, timeout=10)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@unittest.skipUnless(os.access(JAR, os.R_OK) and os.access(JAVA, os.X_OK),
                     "no ZooKeeper (apt-get install zookeeper)")
class ZkCli(RunOnAStore, unittest.TestCase):
    TOKEN_RE = TOKEN_RE

    @classmethod
    def setUpClass(cls):
        cls.zk = ZooKeeper()

    @classmethod
    def tearDownClass(cls):
        cls.zk.stop()

    def setUp(self):
        self.name = "cli-" + self._testMethodName

    def dlock(self, *args, url=None, timeout=30):
        e = dict(os.environ)
        e.pop("DLOCK_REDIS", None)
        return subprocess.run([DLOCK, "-r", url or self.zk.url, *args], capture_output=True,
                              text=True, timeout=timeout, env=e)

    def spawn(self, *args, url=None):
        return subprocess.Popen([DLOCK, "-r", url or self.zk.url, *args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def test_half_a_digest_exits_64_and_a_redis_password_is_ignored(self):
        """ZooKeeper's digest is user:password: -a with no user anywhere
        is refused, not dropped; an exported DLOCK_PASSWORD (a Redis
        password) does not apply to zk:// without --user."""
        r = self.dlock("-a", "secret", "run", self.name, "--", "true")
        self.assertEqual(r.returncode, 64, r.stderr)
        self.assertIn("needs both a user and a password", r.stderr)
        e = dict(os.environ, DLOCK_PASSWORD="redis-secret")
        e.pop("DLOCK_REDIS", None)
        r = subprocess.run([DLOCK, "-v", "-r", self.zk.url, "run", self.name, "--", "true"],
                           capture_output=True, text=True, timeout=30, env=e)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("DLOCK_PASSWORD ignored", r.stderr)
        # with --user it is the digest's password, and ZooKeeper takes it
        r = subprocess.run([DLOCK, "--user", "app", "-r", self.zk.url, "run", self.name, "--",
                            "true"], capture_output=True, text=True, timeout=30, env=e)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_a_password_in_the_url_is_not_shown_in_ps(self):
        url = f"zk://app:s3cr3t-pw@127.0.0.1:{self.zk.port}"
        p = self.spawn("run", self.name, "--", "sleep", "2", url=url)
        try:
            self.assertTrue(wait_until(lambda: self.dlock("status", self.name).returncode == 0))
            with open(f"/proc/{p.pid}/cmdline", "rb") as f:
                cmdline = f.read().decode(errors="replace")
            self.assertNotIn("s3cr3t-pw", cmdline)
            self.assertIn("app:***@", cmdline)
        finally:
            p.communicate(timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_acquire_release_and_extend_are_refused_with_69(self):
        """A zk:// lock is its session's and ends with the process: acquire
        would print a token for a lock already gone (it did), so it is
        refused, as release and extend by token are; nothing is left
        held."""
        for args in (("acquire", self.name), ("release", self.name, "_c_x-lock-0000000001"),
                     ("extend", self.name, "_c_x-lock-0000000001")):
            r = self.dlock(*args)
            self.assertEqual(r.returncode, 69, r.stderr)
            self.assertIn("dlock run", r.stderr)
            self.assertEqual(r.stdout, "")
        r = self.dlock("run", "-n", self.name, "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_doctor_asks_each_member_and_takes_a_lock(self):
        r = self.dlock("doctor")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)  # a warning: one server
        self.assertIn("standalone", r.stdout)
        self.assertRegex(r.stdout, r"ok +lock +a lock on /dlock-doctor/\d+ taken")
        self.assertRegex(r.stdout, r"WARN +quorum")
        # a second member that does not answer: no majority, a failure
        r = self.dlock("doctor", url=f"{self.zk.url},127.0.0.1:{free_port()}")
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"FAIL +quorum +1 of 2 members answered")

    def test_an_unreachable_ensemble_exits_69(self):
        r = self.dlock("--connect-timeout", "300ms", "run", self.name, "--", "true",
                       url=f"zk://127.0.0.1:{free_port()}")
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertIn("answered", r.stderr)

    def test_each_kind_runs_on_its_curator_node(self):
        # The default is Curator's InterProcessMutex (TOKEN_RE); -s and -x
        # its read-write lock's sides, --permits its semaphore's lease.
        for args, marker in ((["-s"], "-__READ__"), (["-x"], "-__WRIT__"),
                             (["--permits", "2"], "-lease-")):
            r = self.dlock("run", *args, self.name, "--", "sh", "-c", 'echo "$DLOCK_TOKEN"')
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn(marker, r.stdout)

    def test_list_status_and_break_show_and_free_what_is_held(self):
        """list names every kind with its holders, status a holder's
        identity (its node's data), break --force removes the holder (which
        learns it at its next renewal and exits 75) and its waiter runs."""
        pfx = ["--prefix", self.name + "/"]
        short = self.zk.url + "?session_timeout_ms=3000"  # renewals each second
        held = [self.spawn(*pfx, "run", "job", "--", "sleep", "60", url=short),
                self.spawn(*pfx, "run", "-s", "sh", "--", "sleep", "60"),
                self.spawn(*pfx, "run", "-s", "sh", "--", "sleep", "60"),
                self.spawn(*pfx, "run", "--permits", "3", "sem", "--", "sleep", "60")]
        try:
            def listed():
                r = self.dlock(*pfx, "list", "--json")
                return {e["name"]: e for e in json.loads(r.stdout)} if r.returncode == 0 else {}
            self.assertTrue(wait_until(lambda: len(listed()) == 3
                                       and listed()["sh"]["holders"] == 2, 10))
            waiter = self.spawn(*pfx, "run", "job", "--", "true")
            self.assertTrue(wait_until(lambda: listed()["job"]["waiters"] == 1, 10))
            got = listed()
            self.assertEqual((got["job"]["mode"], got["job"]["holders"]), ("exclusive", 1))
            self.assertEqual((got["sh"]["mode"], got["sh"]["holders"]), ("shared", 2))
            self.assertEqual((got["sem"]["mode"], got["sem"]["holders"]), ("semaphore", 1))
            self.assertRegex(got["job"]["identity"], r"^host=\S+ pid=[0-9]+ prog=dlock since=")
            r = self.dlock(*pfx, "status", "job")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("prog=dlock since=", r.stdout)
            r = self.dlock(*pfx, "break", "--force", "--json", "job")
            self.assertEqual(r.returncode, 0, r.stderr)
            broke = json.loads(r.stdout)
            self.assertEqual((broke["removed"], broke["mode"]), (1, "exclusive"))
            self.assertEqual(broke["fence"], got["job"]["fence"])
            waiter.communicate(timeout=10)
            self.assertEqual(waiter.returncode, 0)
            held[0].communicate(timeout=10)
            self.assertEqual(held[0].returncode, 75)
            r = self.dlock(*pfx, "break", "--force", "--json", "sh")
            self.assertEqual((json.loads(r.stdout)["removed"], r.returncode), (2, 0), r.stderr)
        finally:
            for p in held:
                p.kill()
                p.communicate()

    def test_elect_and_leader_hand_over_and_watch_sees_each_change(self):
        # Curator's LeaderSelector layout: the fence is the node's czxid,
        # the value its data; a standby leads at the leader's resign.
        w = self.spawn("leader", "--watch", "--json", self.name)
        # its first line (nobody leads) before a campaigns
        self.assertTrue(select.select([w.stdout], [], [], 10)[0])
        first = w.stdout.readline()
        a = self.spawn("elect", self.name, "--value", "a", "--", "sleep", "2")

        def leads():
            r = self.dlock("leader", self.name)
            return r.returncode == 0 and r.stdout.split()[1:] == ["a"]
        self.assertTrue(wait_until(leads, 10))
        fence_a = int(self.dlock("leader", self.name).stdout.split()[0])
        r = self.dlock("elect", "-n", self.name, "--", "true")
        self.assertEqual(r.returncode, 1, r.stderr)  # a leads: the try is refused
        # (b leads long enough for the watcher's look: a term shorter than
        # one read may be merged into the next change, docs/elections.md)
        r = self.dlock("elect", self.name, "--value", "b", "--", "sh", "-c",
                       'echo "$DLOCK_FENCE $DLOCK_LEADER_VALUE"; sleep 0.2')
        self.assertEqual(r.returncode, 0, r.stderr)
        fence_b, value = r.stdout.split()
        self.assertGreater(int(fence_b), fence_a)
        self.assertEqual(value, "b")
        a.communicate(timeout=10)
        self.assertEqual(a.returncode, 0)
        r = self.dlock("leader", self.name)
        self.assertEqual((r.returncode, r.stdout.strip()), (1, "0"))  # nobody leads
        time.sleep(0.5)  # the last change reaches the watcher
        w.send_signal(signal.SIGTERM)
        out, _ = w.communicate(timeout=10)
        lines = [json.loads(line) for line in [first] + out.splitlines()]
        self.assertEqual([(x["leader"], x["value"]) for x in lines],
                         [(False, ""), (True, "a"), (True, "b"), (False, "")])
        self.assertEqual([x["fence"] for x in lines[1:3]], [fence_a, int(fence_b)])

    def test_a_bad_url_exits_64(self):
        r = self.dlock("run", self.name, "--", "true", url="zk://host-without-port")
        self.assertEqual(r.returncode, 64, r.stderr)
        self.assertIn("bad zk URL", r.stderr)


if __name__ == "__main__":
    DLOCK = sys.argv.pop(1)
    unittest.main()
