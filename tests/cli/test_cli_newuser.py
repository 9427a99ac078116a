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
from cli_support import RedisServer, wait_until
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

    def test_progress_does_not_call_a_mark_a_holder(self):
        self.reader("8")
        self.spawn("run", "-w", "6s", self.name, "--", "true")  # a waiting writer: its mark
        self.assertTrue(wait_until(
            lambda: self.dlock("status", "--json", self.name).stdout.find(
                '"writer_waiting_ms":-1') < 0, 5))
        r = self.dlock("-v", "run", "-s", "-w", "1.6s", self.name, "--", "true")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("waiting for", r.stderr)
        self.assertIn("next change in", r.stderr)
        self.assertNotIn("holder's ttl", r.stderr)

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


class Messages(DlockTest):
    """Item 4: every refusal gives the right reason in the user's words."""

    def test_a_lease_too_long_is_not_called_too_short(self):
        r = self.dlock("run", "-t", "30d", self.name, "--", "true")
        self.assertUsage(r)
        self.assertIn("at most", r.stderr)
        self.assertNotIn("shorter", r.stderr)
        r = self.dlock("run", "-t", "50ms", self.name, "--", "true")
        self.assertUsage(r)
        self.assertIn("shorter lease would be lost", r.stderr)

    def test_too_many_names_says_so(self):
        names = [f"{self.name}:{i}" for i in range(1025)]
        r = self.dlock("run", *names, "--", "true")
        self.assertUsage(r)
        self.assertIn("at most 1024 names", r.stderr)
        self.assertNotIn("expected '--'", r.stderr)

    def test_an_unknown_scheme_lists_every_scheme(self):
        r = self.dlock("run", self.name, "--", "true", urls=["foo://h:1"])
        self.assertUsage(r)
        for scheme in ("redis://", "rediss://", "unix://", "redis-sentinel://", "etcd://"):
            self.assertIn(scheme, r.stderr)

    def test_a_password_file_that_is_a_directory(self):
        r = self.dlock("--password-file", self.dir, "run", self.name, "--", "true")
        self.assertEqual(r.returncode, 66, r.stderr)
        self.assertIn("Is a directory", r.stderr)
        self.assertNotIn("read error", r.stderr)

    def test_cert_without_key_names_the_options(self):
        cert = self.path("c.pem")
        open(cert, "w").close()
        r = self.dlock("--tls", "--cert", cert, "run", self.name, "--", "true")
        self.assertUsage(r)
        self.assertIn("--cert and --key", r.stderr)
        self.assertNotIn("tls_cert_file", r.stderr)


class SecondReading(DlockTest):
    """What a second read of the CLI as a new user found."""

    def test_the_tls_hint_is_not_given_for_a_refused_connection(self):
        r = self.dlock("run", self.name, "--", "true", urls=["redis://127.0.0.1:1"])
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertIn("Connection refused", r.stderr)
        self.assertNotIn("TLS", r.stderr)

    def test_spaces_around_commas_in_dlock_redis_are_forgiven(self):
        r = subprocess.run([test_cli.DLOCK, "status", self.name], capture_output=True, text=True,
                           env=self.env(DLOCK_REDIS=f" {self.redis.url} "), timeout=30)
        self.assertEqual(r.returncode, 1, r.stderr)  # free, not "URL contains a space"

    def test_a_holder_without_a_ttl_is_said_to_never_expire(self):
        self.redis.cli("SET", self.name, "someone")
        r = self.dlock("run", "-n", self.name, "--", "true")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("no TTL", r.stderr)

    @unittest.skipIf(os.system("redis-cli -p 6379 ping >/dev/null 2>&1") == 0,
                     "something answers on the default port 6379")
    def test_no_server_configured_names_the_default_it_tried(self):
        for cmd in (["run", self.name, "--", "true"], ["status", self.name]):
            r = subprocess.run([test_cli.DLOCK, *cmd], capture_output=True, text=True,
                               env=self.env(), timeout=30)
            self.assertEqual(r.returncode, 69, r.stderr)
            self.assertIn("no -r and no DLOCK_REDIS: dlock tried the default, "
                          "redis://127.0.0.1:6379", r.stderr)

    def test_help_names_every_url_scheme(self):
        r = subprocess.run([test_cli.DLOCK, "--help"], capture_output=True, text=True)
        for scheme in ("redis://", "rediss://", "unix://", "redis-sentinel://", "etcd://"):
            self.assertIn(scheme, r.stdout)


class Names(DlockTest):
    """Item 6: run takes a NAME that starts with '-', as acquire does."""

    def test_run_takes_names_that_start_with_a_dash(self):
        r = self.dlock("run", "-n", "--", "-x", "--", "sh", "-c", 'echo "$DLOCK_NAME"')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "-x\n")
        r = self.dlock("run", "--", "-x", "-y", "--", "sh", "-c", 'echo "$DLOCK_NAME"')
        self.assertEqual((r.returncode, r.stdout), (0, "-x -y\n"), r.stderr)
        r = self.dlock("run", "-c", 'echo "$DLOCK_NAME"', "--", "-z")
        self.assertEqual((r.returncode, r.stdout), (0, "-z\n"), r.stderr)
        tok = self.dlock("acquire", "--", "-x").stdout.strip()
        r = self.dlock("run", "-n", "--", "-x", "--", "true")
        self.assertEqual(r.returncode, 1, r.stderr)  # the same lock as acquire's
        self.assertEqual(self.dlock("release", "--", "-x", tok).returncode, 0)
        r = self.dlock("run", "--", "-x")
        self.assertUsage(r)
        self.assertIn("second '--'", r.stderr)


class Flock(DlockTest):
    """Item 7: flock(1)'s long name for -w."""

    def test_timeout_is_flocks_name_for_w(self):
        self.acquire()
        r = self.dlock("run", "--timeout", "0.3", self.name, "--", "true")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("gave up after", r.stderr)
        r = self.dlock("acquire", "--timeout=300ms", "-E", "9", self.name)
        self.assertEqual(r.returncode, 9, r.stderr)

    def test_e_is_flocks_other_letter_for_x(self):
        r = self.dlock("run", "-e", "-n", self.name, "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)


class PlainOnTls(DlockTest):
    """Item 4: a plain URL on a TLS port hints at --tls."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.certs = test_cli.make_certs(cls.tmp)
        cls.tls = test_cli.TlsRedisServer(cls.tmp, cls.certs)

    @classmethod
    def tearDownClass(cls):
        cls.tls.stop()
        super().tearDownClass()

    def test_a_plain_url_on_a_tls_port_hints_at_tls(self):
        r = self.dlock("--io-timeout", "500ms", "run", "-n", self.name, "--", "true",
                       urls=[f"redis://127.0.0.1:{self.tls.port}"])
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertIn("use rediss:// or --tls", r.stderr)

    def test_tls_to_a_plain_port_hints_at_plain(self):
        r = self.dlock("--insecure", "--connect-timeout", "300ms", "run", "-n", self.name, "--",
                       "true", urls=[f"rediss://127.0.0.1:{self.redis.port}"])
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertIn("TLS handshake timed out (DLOCK_EIO)", r.stderr)  # as dlock.h says
        self.assertIn("use redis:// without --tls", r.stderr)


PW = "sekrit-pass-word"
SHOW_ARGV = 'tr "\\0" "\\n" < /proc/$PPID/cmdline; env'


class Credentials(DlockTest):
    """Item 8: passwords out of ps, REDISCLI_AUTH as redis-cli reads it."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.auth = RedisServer(cls.tmp, conf=f"requirepass {PW}\n", auth=PW)

    @classmethod
    def tearDownClass(cls):
        cls.auth.stop()
        super().tearDownClass()

    def argv_seen(self, *global_opts, url=None, env=None):
        """What ps shows of dlock's argv while it runs, the program's
        environment, and the warning on stderr."""
        r = subprocess.run([test_cli.DLOCK, "-r", url or f"redis://127.0.0.1:{self.auth.port}",
                            *global_opts, "run", self.name, "--", "sh", "-c", SHOW_ARGV],
                           capture_output=True, text=True, timeout=30, env=env or self.env())
        self.assertEqual(r.returncode, 0, r.stderr)
        argv, _, environ = r.stdout.partition("\n\n")  # argv ends in NULs
        return [a for a in argv.split("\n") if a], environ, r.stderr

    def test_a_password_in_a_url_is_hidden_from_ps_with_a_warning(self):
        argv, _, err = self.argv_seen(url=f"redis://:{PW}@127.0.0.1:{self.auth.port}")
        self.assertNotIn(PW, "\n".join(argv))
        self.assertIn(f"redis://:***@127.0.0.1:{self.auth.port}", argv)
        self.assertIn("Warning: Using a password", err)

    def test_the_starred_out_password_does_not_show_its_length(self):
        for opts in (["-a", PW], [f"-a{PW}"], [f"--pass={PW}"]):
            with self.subTest(opts=opts):
                argv, _, _ = self.argv_seen(*opts, "--no-auth-warning")
                self.assertNotIn(PW, "\n".join(argv))
                self.assertNotIn("*" * len(PW), "\n".join(argv))
                self.assertIn(opts[0].replace(PW, "***") if len(opts) == 1 else "***", argv)
                self.assertEqual(argv[-4:], ["--", "sh", "-c", SHOW_ARGV])  # args intact

    def test_rediscli_auth_is_honoured_and_not_passed_on(self):
        argv, environ, _ = self.argv_seen(env=self.env(REDISCLI_AUTH=PW))
        self.assertNotIn("REDISCLI_AUTH", environ)
        r = self.dlock("run", self.name, "--", "true", urls=[self.auth.url],
                       env=self.env(REDISCLI_AUTH="wrong", DLOCK_PASSWORD=PW))
        self.assertEqual(r.returncode, 0, r.stderr)  # DLOCK_PASSWORD first


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

    def test_the_other_kinds_run_there(self):
        # a semaphore works there (issue 38): the N oldest keys of the line
        r = self.dlock("run", "--permits", "2", self.name, "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        # several names too, each etcd's own lock (tests/etcd/test_etcd_multi.c)
        r = self.dlock("run", self.name + "-a", self.name + "-b", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        # and shared locks, the recipe RWMutex's readers (test_cli_etcd)
        r = self.dlock("run", "-s", self.name, "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_an_exported_redis_password_does_not_break_etcd(self):
        for var in ("DLOCK_PASSWORD", "REDISCLI_AUTH"):
            r = self.dlock("run", self.name, "--", "true", env={var: "x"})
            self.assertEqual(r.returncode, 0, r.stderr)
            r = self.dlock("-v", "status", self.name, env={var: "x"})
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn(f"{var} ignored: etcd:// URLs carry their own credentials", r.stderr)

    def test_etcdctl_lock_and_dlock_run_exclude_each_other(self):
        """docs/primitives.md: one key layout with etcd's own lock, so a
        name etcdctl holds is busy for dlock (and listed with etcdctl's key's
        create revision as its fence)."""
        p = subprocess.Popen(["etcdctl", f"--endpoints=127.0.0.1:{self.etcd.port}", "lock",
                              self.name], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True, env=dict(os.environ, ETCDCTL_API="3"))
        try:
            key = p.stdout.readline().strip()  # etcdctl holds it: NAME/<lease hex>
            self.assertTrue(key.startswith(self.name + "/"), key)
            r = self.dlock("run", "-n", self.name, "--", "true")
            self.assertEqual(r.returncode, 1, r.stderr)
            r = self.dlock("status", self.name)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn(self.name, self.dlock("list").stdout)
        finally:
            p.terminate()  # etcdctl unlocks on SIGTERM
            p.wait()
            p.stdout.close()
        r = self.dlock("run", "-n", self.name, "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)

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
