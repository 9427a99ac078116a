#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The dlock command on an etcd:// URL, against a real etcd member.

Usage: test_cli_etcd.py PATH_TO_DLOCK [unittest options]

Starts one etcd (Debian's etcd-server) on free 127.0.0.1 ports in a
temporary directory and stops exactly that process at the end. The same
commands, options and exit statuses as on Redis: run, busy (1), acquire /
status / release by token, a lost lock (75), an unreachable cluster (69);
and over TLS (etcds://, --tls), a member serving https with certificates
made by openssl: the TLS flags work as for Redis, a wrong CA exits 69.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from cli_support import (RunOnAStore, free_port, lock_delay_case, start_process,
                         stop_process, wait_until)
from test_cli import make_certs

DLOCK = None
# the key's ID; an auto-renewed hold's (on the client's session) names its
# fence in 16 more digits (docs/backends.md, "A session takes its keys again")
TOKEN_RE = re.compile(r"^[0-9a-f]{16}([0-9a-f]{16})?$")


class Etcd:
    """One etcd member of our own (Debian's etcd-server) on 127.0.0.1, in a
    temporary directory; stop() ends exactly it and removes the directory."""

    def __init__(self, certs=None):
        self.certs = certs  # serve clients over TLS with certs["server.crt"]
        scheme = "https" if certs else "http"
        self.dir = tempfile.mkdtemp(prefix="dlock-cli-etcd-")
        self.log = open(os.path.join(self.dir, "etcd.log"), "w")
        data = os.path.join(self.dir, "m0")

        def argv():
            shutil.rmtree(data, ignore_errors=True)  # a failed try's
            self.port, peer = free_port(), free_port()
            tls = ["--cert-file", certs["server.crt"], "--key-file", certs["server.key"]] \
                if certs else []
            return ["etcd", "--name", "m0", "--data-dir", data, *tls,
                    "--listen-client-urls", f"{scheme}://127.0.0.1:{self.port}",
                    "--advertise-client-urls", f"{scheme}://127.0.0.1:{self.port}",
                    "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                    "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                    "--initial-cluster", f"m0=http://127.0.0.1:{peer}",
                    "--logger", "zap", "--log-level", "warn"]
        try:
            self.proc = start_process(argv, self.ready, "etcd did not start", timeout=20,
                                      stdout=self.log, stderr=self.log)
        except BaseException:
            self.log.close()
            shutil.rmtree(self.dir, ignore_errors=True)
            raise

    @property
    def url(self):
        return f"{'etcds' if self.certs else 'etcd'}://127.0.0.1:{self.port}"

    def ctl(self, *args):
        tls = [f"--cacert={self.certs['ca.crt']}"] if self.certs else []
        endpoint = f"{'https://' if self.certs else ''}127.0.0.1:{self.port}"
        return subprocess.run(["etcdctl", f"--endpoints={endpoint}", *tls, *args],
                              capture_output=True, text=True, timeout=10,
                              env=dict(os.environ, ETCDCTL_API="3"))

    def ready(self):
        try:
            return self.ctl("endpoint", "health").returncode == 0
        except subprocess.TimeoutExpired:
            return False

    def stop(self):
        stop_process(self.proc, timeout=10)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class EtcdCli(RunOnAStore, unittest.TestCase):
    TOKEN_RE = TOKEN_RE

    @classmethod
    def setUpClass(cls):
        cls.etcd = Etcd()

    @classmethod
    def tearDownClass(cls):
        cls.etcd.stop()

    def setUp(self):
        self.name = "cli-" + self._testMethodName

    def dlock(self, *args, url=None, env=None, timeout=30):
        e = dict(os.environ)
        e.pop("DLOCK_REDIS", None)
        e.update(env or {})
        pre = ["-r", url or self.etcd.url] if url != "" else []
        return subprocess.run([DLOCK, *pre, *args], capture_output=True, text=True,
                              timeout=timeout, env=e)

    def spawn(self, *args):
        return subprocess.Popen([DLOCK, "-r", self.etcd.url, *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def test_acquire_status_extend_release_by_token(self):
        r = self.dlock("acquire", "-t", "10s", self.name)
        self.assertEqual(r.returncode, 0, r.stderr)
        token = r.stdout.strip()
        self.assertRegex(token, TOKEN_RE)
        s = self.dlock("status", self.name)
        self.assertEqual(s.returncode, 0, s.stderr)
        self.assertIn("held", s.stdout)
        self.assertIn(f"127.0.0.1:{self.etcd.port}", s.stdout)
        r = self.dlock("extend", "-t", "10s", self.name, token)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.dlock("release", self.name, token)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.dlock("status", self.name).returncode, 1)

    def test_lock_delay_keeps_a_name_whose_holder_died_and_not_a_released_one(self):
        # etcd's default shortest lease is 2 s and its delay whole seconds:
        # the companion outlives the key by the delay's second and, on
        # dlock run's session, a third of the TTL more (docs/backends.md)
        lock_delay_case(self, "2s", "1s", 1 + 1 + 3)

    def test_elect_and_leader_with_etcdctl(self):
        # dlock leads: etcdctl reads its value from the key, dlock leader too.
        r = self.dlock("elect", self.name, "--value", "from-dlock", "--", "sh", "-c",
                       f'etcdctl --endpoints=127.0.0.1:{self.etcd.port} get --prefix '
                       f'"{self.name}/" --print-value-only; echo "$DLOCK_LEADER_VALUE"',
                       env={"ETCDCTL_API": "3"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["from-dlock", "from-dlock"])
        # etcdctl leads: dlock leader shows it; dlock elect -n does not lead.
        p = subprocess.Popen(["etcdctl", f"--endpoints=127.0.0.1:{self.etcd.port}", "elect",
                              self.name, "from-etcdctl"], stdout=subprocess.PIPE, text=True,
                             env=dict(os.environ, ETCDCTL_API="3"))
        try:
            self.assertIn("from-etcdctl", p.stdout.readline() + p.stdout.readline())
            r = self.dlock("leader", self.name)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.split()[1], "from-etcdctl")
            self.assertEqual(self.dlock("elect", "-n", self.name, "--", "true").returncode, 1)
        finally:
            p.terminate()
            p.communicate(timeout=10)
        self.assertEqual(self.dlock("leader", self.name).returncode, 1)  # nobody leads

    def test_extend_to_a_new_ttl_then_release_by_the_same_token(self):
        # etcd moves the key to a new lease of the new TTL (issue 38); the
        # token names the key, so the release by it still frees the name.
        r = self.dlock("acquire", "-t", "5s", self.name)
        self.assertEqual(r.returncode, 0, r.stderr)
        token = r.stdout.strip()
        r = self.dlock("extend", "-t", "20s", self.name, token)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.dlock("release", self.name, token)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.dlock("status", self.name).returncode, 1)

    def test_list_shows_held_names_with_fence_and_waiter(self):
        r = self.dlock("acquire", "-t", "10s", self.name + "-a")
        self.assertEqual(r.returncode, 0, r.stderr)
        token = r.stdout.strip()
        r = self.dlock("list", "--json", self.name + "-*")
        self.assertEqual(r.returncode, 0, r.stderr)
        got = json.loads(r.stdout)
        self.assertEqual([e["name"] for e in got], [self.name + "-a"])
        self.assertEqual((got[0]["held"], got[0]["mode"], got[0]["holders"]),
                         (True, "exclusive", 1))
        self.assertGreater(got[0]["fence"], 0)
        # The command keeps an identity by default: the owner key's value.
        self.assertRegex(got[0]["identity"] or "", r"^host=\S+ pid=\d+ prog=\S+ since=\d+$")
        r = self.dlock("list", self.name + "-*")
        self.assertIn(f'"{self.name}-a" exclusive', r.stdout)
        self.assertIn("identity host=", r.stdout)
        self.assertEqual(self.dlock("release", self.name + "-a", token).returncode, 0)
        r = self.dlock("list", "--json", self.name + "-*")
        self.assertEqual((r.returncode, json.loads(r.stdout)), (0, []), r.stderr)

    def test_readers_share_and_keep_a_writer_and_the_default_lock_out(self):
        # run -s is the recipe RWMutex's reader (NAME/read/<ID>): a second
        # reader runs beside it; -x (NAME/write/<ID>) and the default lock
        # (etcd's own, NAME/<lease>) are busy (1) until it is done.
        p = self.spawn("run", "-s", self.name, "--", "sh", "-c", "echo in; sleep 3")
        try:
            self.assertEqual(p.stdout.readline(), "in\n")
            keys = self.etcd.ctl("get", "--prefix", "--keys-only", self.name + "/").stdout
            self.assertIn(self.name + "/read/", keys)
            r = self.dlock("run", "-s", "-w", "0", self.name, "--", "echo", "beside")
            self.assertEqual((r.returncode, r.stdout), (0, "beside\n"), r.stderr)
            for args in (["-x"], []):
                r = self.dlock("run", *args, "-w", "0", self.name, "--", "true")
                self.assertEqual(r.returncode, 1, r.stderr)
            r = self.dlock("list", "--json", self.name)
            got = json.loads(r.stdout)
            self.assertEqual([(e["name"], e["mode"], e["holders"]) for e in got],
                             [(self.name, "shared", 1)])
            # readers hold no fence; shown is the reader's key's create
            # revision, the guard `dlock break` takes (as status shows it)
            r = self.dlock("status", "--json", self.name)
            self.assertGreater(got[0]["fence"], 0)
            self.assertEqual(json.loads(r.stdout)["nodes"][0]["fence"], got[0]["fence"], r.stdout)
            r = self.dlock("run", "-x", "-w", "10s", self.name, "--", "sh", "-c",
                           'echo "$DLOCK_TOKEN"')
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertRegex(r.stdout.strip(), TOKEN_RE)
        finally:
            p.communicate(timeout=20)
        self.assertEqual(p.returncode, 0)

    def test_a_name_that_would_be_a_readers_or_writers_key_is_refused(self):
        # NAME/read's keys are NAME's readers' by their layout: refused
        # before anything is sent, alone or in a set (docs/backends.md)
        for args in ([self.name + "/read"], [self.name + "/write"],
                     ["-s", self.name + "/read/x"], [self.name, self.name + "/read"]):
            r = self.dlock("run", *args, "--", "true")
            self.assertEqual(r.returncode, 64, r.stderr)
            self.assertIn("may not end in /read or /write", r.stderr)
        r = self.dlock("run", self.name + "/reads", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_lost_lock_exits_75(self):
        p = self.spawn("run", "-t", "3s", self.name, "--", "sleep", "30")
        self.assertTrue(wait_until(lambda: self.dlock("status", self.name).returncode == 0))
        # someone deletes the lock's keys (its waiter key under NAME NUL)
        d = self.etcd.ctl("del", "--prefix", self.name)
        self.assertEqual(d.returncode, 0, d.stderr)
        _, err = p.communicate(timeout=20)
        self.assertEqual(p.returncode, 75, err)
        self.assertIn(f'lost "{self.name}"', err)

    def test_unreachable_cluster_exits_69(self):
        r = self.dlock("run", self.name, "--", "true", url=f"etcd://127.0.0.1:{free_port()}")
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertIn("DLOCK_EIO", r.stderr)

    def test_dlock_redis_may_list_the_members(self):
        r = self.dlock("run", self.name, "--", "echo", "ok", url="",
                       env={"DLOCK_REDIS": f"{self.etcd.url},127.0.0.1:{free_port()}"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "ok\n")

    def test_bad_etcd_url_is_a_usage_error(self):
        r = self.dlock("run", self.name, "--", "true", url="etcd://127.0.0.1")
        self.assertEqual(r.returncode, 64, r.stderr)
        self.assertIn("needs a port", r.stderr)


class EtcdTlsCli(unittest.TestCase):
    """The TLS flags on etcds:// (and etcd:// with --tls), as on rediss://."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="dlock-cli-etcd-certs-")
        cls.certs = make_certs(cls.tmp)
        cls.etcd = Etcd(cls.certs)

    @classmethod
    def tearDownClass(cls):
        cls.etcd.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.name = "cli-" + self._testMethodName

    def dlock(self, *args, url=None, env=None):
        e = dict(os.environ)
        for k in ("DLOCK_REDIS", "DLOCK_TLS", "DLOCK_CACERT", "DLOCK_SNI", "DLOCK_INSECURE"):
            e.pop(k, None)
        e.update(env or {})
        return subprocess.run([DLOCK, "-r", url or self.etcd.url, *args], capture_output=True,
                              text=True, timeout=30, env=e)

    def test_verified_acquire_release_and_run(self):
        ca = ["--cacert", self.certs["ca.crt"]]
        r = self.dlock(*ca, "acquire", self.name)
        self.assertEqual(r.returncode, 0, r.stderr)
        token = r.stdout.strip()
        self.assertRegex(token, TOKEN_RE)
        held = self.etcd.ctl("get", "--prefix", f"{self.name}/", "--keys-only")
        self.assertIn(f"{self.name}/", held.stdout, held.stderr)
        # list, status and break read and write over TLS too
        r = self.dlock(*ca, "list", "--json", self.name)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual([e["name"] for e in json.loads(r.stdout)], [self.name])
        r = self.dlock(*ca, "status", self.name)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.dlock(*ca, "release", self.name, token)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.dlock(*ca, "acquire", self.name)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.dlock(*ca, "break", "--force", self.name)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.dlock(*ca, "list", "--json", self.name)
        self.assertEqual((r.returncode, json.loads(r.stdout)), (0, []), r.stderr)
        r = self.dlock(*ca, "run", self.name, "--", "sh", "-c", "exit 7")
        self.assertEqual(r.returncode, 7, r.stderr)

    def test_wrong_ca_and_wrong_name_exit_69_and_say_why(self):
        r = self.dlock("--cacert", self.certs["other.crt"], "run", "-n", self.name, "--", "true")
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertIn("certificate verification failed", r.stderr)
        self.assertIn("DLOCK_ETLS", r.stderr)
        r = self.dlock("--cacert", self.certs["ca.crt"], "--sni", "wrong.example",
                       "run", "-n", self.name, "--", "true")
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertIn("wrong.example", r.stderr)
        # the name the certificate holds, instead of the address
        r = self.dlock("--cacert", self.certs["ca.crt"], "--sni", "localhost",
                       "run", self.name, "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_tls_flag_insecure_and_environment_on_etcd_urls(self):
        plain_url = f"etcd://127.0.0.1:{self.etcd.port}"
        r = self.dlock("--tls", "--insecure", "run", self.name, "--", "true", url=plain_url)
        self.assertEqual(r.returncode, 0, r.stderr)
        env = {"DLOCK_TLS": "1", "DLOCK_CACERT": self.certs["ca.crt"]}
        r = self.dlock("run", self.name, "--", "true", url=plain_url, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        env["DLOCK_CACERT"] = self.certs["other.crt"]
        r = self.dlock("run", self.name, "--", "true", url=plain_url, env=env)
        self.assertEqual(r.returncode, 69, r.stderr)

    def test_doctor_checks_a_tls_member(self):
        r = self.dlock("--cacert", self.certs["ca.crt"], "doctor")
        self.assertIn("etcds://127.0.0.1", r.stdout + r.stderr)
        self.assertNotIn("unreachable", r.stdout, r.stdout)
        r = self.dlock("--cacert", self.certs["other.crt"], "doctor")
        self.assertIn("certificate", r.stdout, r.stdout)
        self.assertNotEqual(r.returncode, 0)


if __name__ == "__main__":
    DLOCK = os.path.abspath(sys.argv.pop(1))
    unittest.main()
