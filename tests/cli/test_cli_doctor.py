#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""dlock doctor against real servers set up to fail each check, and set up
right so that the same check passes.

Usage: test_cli_doctor.py PATH_TO_DLOCK [unittest options]

Every redis-server (and etcd member) is started here on a free 127.0.0.1
port below the ephemeral range, in a temporary directory, and stopped by
its own pid. Clock skew and a slow link are made by a small TCP proxy in
front of a real redis-server (no real clock is touched): it delays what
the client sends, or moves the seconds of TIME replies forward.
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from cli_support import RedisServer, free_port, start_process, stop_process, wait_until

DLOCK = None  # set from argv[1]


def findings(out, check, node=None):
    """The findings of one check in a --json report (node: a URL or None
    for any)."""
    return [f for f in out["findings"] if f["check"] == check and
            (node is None or f["node"] == node)]


class DoctorTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="dlock-doctor-")
        cls.servers = []

    @classmethod
    def tearDownClass(cls):
        for s in cls.servers:
            s.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def server(cls, conf="", **kw):
        s = RedisServer(cls.tmp, conf=conf, **kw)
        cls.servers.append(s)
        return s

    def env(self, **extra):
        env = {k: v for k, v in os.environ.items() if not k.startswith("DLOCK_")}
        env.update(extra)
        return env

    def doctor(self, *args, urls=(), glob=(), env=None, json_out=True):
        """dlock -r URL... GLOB... doctor [--json] ARGS..."""
        argv = [DLOCK]
        for u in urls:
            argv += ["-r", u]
        argv += list(glob) + ["doctor"] + (["--json"] if json_out else []) + list(args)
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                           env=env or self.env())
        if json_out and r.stdout.strip():
            r.json = json.loads(r.stdout)
        return r

    def status(self, r, check, node=None):
        fs = findings(r.json, check, node)
        self.assertTrue(fs, f"no '{check}' finding in {r.stdout}")
        return fs[0]["status"]


class Redis(DoctorTest):
    """One node's checks, each failed and then passed."""

    def test_good_node_passes_every_check_and_exits_0(self):
        s = self.server("appendonly yes\nappendfsync always\n")
        # RedisServer's command line turns AOF off; the admin turns it on.
        s.cli("CONFIG", "SET", "appendonly", "yes")
        s.cli("CONFIG", "SET", "appendfsync", "always")
        r = self.doctor(urls=[s.url])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertTrue(r.json["ok"])
        for check in ("connect", "server", "scripting", "acl", "eviction", "persistence",
                      "replication", "round-trip"):
            self.assertEqual(self.status(r, check), "ok", check)
        self.assertRegex(findings(r.json, "server")[0]["detail"], r"^Redis \d+\.\d+")
        # The text form says the same, one line per check.
        t = self.doctor(urls=[s.url], json_out=False)
        self.assertEqual(t.returncode, 0)
        self.assertRegex(t.stdout, r"(?m)^  ok    eviction ")
        self.assertIn("0 failed, 0 warnings", t.stdout)
        # the nodes come as for every command: DLOCK_REDIS when no -r
        e = self.doctor(env=self.env(DLOCK_REDIS=s.url))
        self.assertEqual(e.returncode, 0, e.stdout + e.stderr)
        self.assertEqual(findings(e.json, "connect")[0]["node"], s.url)

    def test_evicting_policy_fails_and_noeviction_passes(self):
        s = self.server()
        s.cli("CONFIG", "SET", "appendonly", "yes")
        s.cli("CONFIG", "SET", "appendfsync", "always")
        s.cli("CONFIG", "SET", "maxmemory", "100mb")
        s.cli("CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
        r = self.doctor(urls=[s.url])
        self.assertEqual(r.returncode, 2, r.stdout)
        self.assertEqual(self.status(r, "eviction"), "fail")
        f = findings(r.json, "eviction")[0]
        self.assertIn("allkeys-lru", f["detail"])
        self.assertIn("noeviction", f["fix"])
        self.assertTrue(f["reason"])
        # volatile-*: every lock key has a TTL, so it is evicted too
        s.cli("CONFIG", "SET", "maxmemory-policy", "volatile-ttl")
        r = self.doctor(urls=[s.url])
        self.assertEqual(self.status(r, "eviction"), "fail")
        # no limit yet: nothing is evicted now, a warning
        s.cli("CONFIG", "SET", "maxmemory", "0")
        r = self.doctor(urls=[s.url])
        self.assertEqual(self.status(r, "eviction"), "warn")
        self.assertEqual(r.returncode, 1)
        s.cli("CONFIG", "SET", "maxmemory", "100mb")
        s.cli("CONFIG", "SET", "maxmemory-policy", "noeviction")
        r = self.doctor(urls=[s.url])
        self.assertEqual(self.status(r, "eviction"), "ok")
        self.assertEqual(r.returncode, 0, r.stdout)

    def test_no_persistence_fails_unless_aof_always_or_the_restart_rule(self):
        s = self.server()  # appendonly no, save ""
        r = self.doctor(urls=[s.url])
        self.assertEqual(self.status(r, "persistence"), "fail")
        self.assertIn('save ""', findings(r.json, "persistence")[0]["detail"])
        self.assertIn("--min-node-uptime", findings(r.json, "persistence")[0]["fix"])
        self.assertEqual(r.returncode, 2)
        # the restart rule set to the TTL makes it safe
        r = self.doctor("--ttl", "10s", urls=[s.url])
        self.assertEqual(self.status(r, "persistence"), "fail")
        r = self.doctor("--ttl", "10s", urls=[s.url], glob=["--min-node-uptime", "10s"])
        self.assertEqual(self.status(r, "persistence"), "ok")
        # a rule shorter than the TTL is not enough
        r = self.doctor("--ttl", "10s", urls=[s.url], glob=["--min-node-uptime", "5s"])
        self.assertEqual(self.status(r, "restart-rule"), "warn")
        s.cli("CONFIG", "SET", "appendonly", "yes")
        r = self.doctor(urls=[s.url])  # everysec: the last second is lost
        self.assertEqual(self.status(r, "persistence"), "warn")
        s.cli("CONFIG", "SET", "appendfsync", "always")
        r = self.doctor(urls=[s.url])
        self.assertEqual(self.status(r, "persistence"), "ok")

    def test_user_without_eval_fails_scripting_and_acl(self):
        s = self.server()
        s.cli("ACL", "SETUSER", "noeval", "on", ">pw", "~*", "&*", "+@all", "-eval",
              "-evalsha")
        login = ["--user", "noeval", "--password-file", self.password_file("pw")]
        r = self.doctor(urls=[s.url], glob=login)
        self.assertEqual(r.returncode, 2, r.stdout)
        self.assertEqual(self.status(r, "scripting"), "fail")
        self.assertIn("NOPERM", findings(r.json, "scripting")[0]["detail"])
        acl = findings(r.json, "acl")[0]
        self.assertEqual(acl["status"], "fail")
        self.assertIn("evalsha", acl["detail"])
        self.assertIn("eval (", acl["detail"])
        self.assertNotIn("get (", acl["detail"])
        # the same user with EVAL back: both pass
        s.cli("ACL", "SETUSER", "noeval", "+eval", "+evalsha")
        r = self.doctor(urls=[s.url], glob=login)
        self.assertEqual(self.status(r, "scripting"), "ok")
        self.assertEqual(self.status(r, "acl"), "ok")

    def test_least_privilege_user_is_reported_as_not_checkable(self):
        s = self.server()
        s.cli("ACL", "SETUSER", "locker", "on", ">pw", "resetkeys", "~lock:*", "resetchannels",
              "&dlock:wake:lock:*", "-@all", "+evalsha", "+eval", "+script|load", "+set", "+get",
              "+del", "+info")
        r = self.doctor(urls=[f"redis://locker:pw@127.0.0.1:{s.port}"],
                        glob=["--prefix", "lock:"])
        self.assertEqual(self.status(r, "scripting"), "ok")
        acl = findings(r.json, "acl")[0]
        self.assertEqual(acl["status"], "skip")
        self.assertIn("could not check", acl["detail"])
        self.assertIn("docs/design.md", acl["fix"])
        # the password never reaches the report
        self.assertNotIn(":pw@", r.stdout)

    def test_wrong_password_fails_auth(self):
        s = self.server()
        s.cli("ACL", "SETUSER", "someone", "on", ">right", "+@all", "~*")
        r = self.doctor(urls=[f"redis://someone:wrong@127.0.0.1:{s.port}"])
        self.assertEqual(self.status(r, "auth"), "fail")
        self.assertEqual(r.returncode, 2)

    def test_unreachable_node_exits_69(self):
        port = free_port()
        r = self.doctor(urls=[f"redis://127.0.0.1:{port}"])
        self.assertEqual(r.returncode, 69, r.stdout + r.stderr)
        self.assertEqual(self.status(r, "connect"), "fail")
        self.assertIn("unreachable", findings(r.json, "connect")[0]["detail"])

    def test_bad_url_is_a_usage_error(self):
        r = self.doctor(urls=["redis://127.0.0.1:notaport"], json_out=False)
        self.assertEqual(r.returncode, 64, r.stderr)

    def password_file(self, pw):
        path = os.path.join(self.tmp, "pw")
        with open(path, "w") as f:
            f.write(pw + "\n")
        return path


class Replication(DoctorTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.primary = cls.server()
        cls.replica = cls.server(f"replicaof 127.0.0.1 {cls.primary.port}\n")
        assert wait_until(lambda: "master_link_status:up" in
                          cls.replica.cli("INFO", "replication"), 20)

    def test_replicas_without_min_replicas_warn(self):
        r = self.doctor(urls=[self.primary.url])
        f = findings(r.json, "replication")[0]
        self.assertEqual(f["status"], "warn")
        self.assertIn("--min-replicas", f["fix"])

    def test_min_replicas_above_the_replicas_fails_and_within_passes(self):
        r = self.doctor(urls=[self.primary.url],
                        glob=["--min-replicas", "2", "--min-replicas-timeout", "200ms"])
        self.assertEqual(self.status(r, "replication"), "fail")
        self.assertIn("WAIT counted 1", findings(r.json, "replication")[0]["detail"])
        r = self.doctor(urls=[self.primary.url], glob=["--min-replicas", "1"])
        self.assertEqual(self.status(r, "replication"), "ok")

    def test_a_sentinel_fails_as_a_data_node_and_its_url_checks_the_primary(self):
        conf = (f"sentinel monitor m 127.0.0.1 {self.primary.port} 1\n"
                "sentinel down-after-milliseconds m 1000\n")
        sentinel = SentinelServer(self.tmp, conf)
        self.servers.append(sentinel)
        r = self.doctor(urls=[sentinel.url])  # as if it were a Redis node
        f = findings(r.json, "server")[0]
        self.assertEqual(f["status"], "fail", r.stdout)
        self.assertIn("redis-sentinel://", f["fix"])
        url = f"redis-sentinel://127.0.0.1:{sentinel.port}/m"
        r = self.doctor(urls=[url])
        self.assertEqual(self.status(r, "sentinel"), "ok", r.stdout)
        self.assertIn(f":{self.primary.port}", findings(r.json, "sentinel")[0]["detail"])
        self.assertEqual(self.status(r, "server"), "ok", r.stdout)
        r = self.doctor(urls=[f"redis-sentinel://127.0.0.1:{sentinel.port}/nosuch"])
        self.assertEqual(self.status(r, "sentinel"), "fail", r.stdout)

    def test_a_replica_fails(self):
        r = self.doctor(urls=[self.replica.url])
        self.assertEqual(self.status(r, "replication"), "fail")
        self.assertIn("primary", findings(r.json, "replication")[0]["fix"])


class SentinelServer(RedisServer):
    """redis-server --sentinel with conf (a sentinel rewrites its file)."""

    def __init__(self, tmp, conf):
        self.auth = []

        def argv():
            path = os.path.join(self.dir, "sentinel.conf")
            with open(path, "w") as f:
                f.write(conf)
            return [path, "--sentinel", "--port", str(self.port)]
        self.start(tmp, None, argv, "redis-sentinel did not start")

    def start(self, tmp, port, argv, failure):
        def full_argv():
            self.port = free_port()
            self.dir = tempfile.mkdtemp(prefix="sentinel-", dir=tmp)
            return ["redis-server", *argv(), "--bind", "127.0.0.1", "--dir", self.dir]
        self.proc = start_process(full_argv, self.ping, failure,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class Proxy:
    """A TCP proxy in front of a real redis-server: delay_s holds each chunk
    the client sends; shift_s moves the seconds of TIME replies forward
    (as a node whose clock is off would answer)."""

    TIME_RE = re.compile(rb"\*2\r\n\$10\r\n(\d{10})\r\n")

    def __init__(self, target_port, delay_s=0.0, shift_s=0):
        self.target, self.delay, self.shift = target_port, delay_s, shift_s
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.port = free_port()
        self.lsock.bind(("127.0.0.1", self.port))
        self.lsock.listen(16)
        self.stopping = False
        threading.Thread(target=self.accept, daemon=True).start()

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}"

    def accept(self):
        while not self.stopping:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            s = socket.create_connection(("127.0.0.1", self.target))
            threading.Thread(target=self.pump, args=(c, s, True), daemon=True).start()
            threading.Thread(target=self.pump, args=(s, c, False), daemon=True).start()

    def pump(self, src, dst, upstream):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if upstream and self.delay:
                    time.sleep(self.delay)
                if not upstream and self.shift:
                    data = self.TIME_RE.sub(
                        lambda m: b"*2\r\n$10\r\n" + str(int(m.group(1)) + self.shift).encode()
                        + b"\r\n", data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for x in (src, dst):  # the other pump then ends too
                try:
                    x.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            src.close()

    def stop(self):
        self.stopping = True
        self.lsock.close()


class Redlock(DoctorTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.nodes = [cls.server() for _ in range(3)]
        for s in cls.nodes:
            s.cli("CONFIG", "SET", "appendonly", "yes")
            s.cli("CONFIG", "SET", "appendfsync", "always")
        cls.proxies = []

    @classmethod
    def tearDownClass(cls):
        for p in cls.proxies:
            p.stop()
        super().tearDownClass()

    def proxy(self, node, **kw):
        p = Proxy(node.port, **kw)
        self.proxies.append(p)
        return p

    def test_three_nodes_in_step_pass(self):
        r = self.doctor(urls=[s.url for s in self.nodes])
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertEqual(self.status(r, "clocks"), "ok")
        self.assertEqual(self.status(r, "round-trip"), "ok")
        self.assertEqual(self.status(r, "redlock"), "ok")

    def test_two_nodes_warn_that_an_even_count_tolerates_no_failure(self):
        r = self.doctor(urls=[s.url for s in self.nodes[:2]])
        self.assertEqual(self.status(r, "redlock"), "warn")
        self.assertEqual(r.returncode, 1, r.stdout)

    def test_a_node_whose_clock_is_off_fails_the_clock_check(self):
        skewed = self.proxy(self.nodes[2], shift_s=5)
        r = self.doctor(urls=[self.nodes[0].url, self.nodes[1].url, skewed.url])
        f = findings(r.json, "clocks")[0]
        self.assertEqual(f["status"], "warn", r.stdout)
        self.assertIn("drift allowance", f["detail"])
        self.assertIn(skewed.url + " ahead", f["detail"])
        self.assertIn("NTP", f["fix"])
        # the allowance grows with the TTL: 1% of 10 minutes is 6 s
        r = self.doctor("--ttl", "10m", urls=[self.nodes[0].url, self.nodes[1].url, skewed.url])
        self.assertEqual(self.status(r, "clocks"), "ok", r.stdout)

    def test_a_node_slower_than_the_per_node_timeout_fails_the_round_trip_check(self):
        slow = self.proxy(self.nodes[2], delay_s=0.15)
        urls = [self.nodes[0].url, self.nodes[1].url, slow.url]
        r = self.doctor("--ttl", "1s", urls=urls)  # per-node timeout 100 ms
        f = findings(r.json, "round-trip")[0]
        self.assertEqual(f["status"], "fail", r.stdout)
        self.assertIn(slow.url, f["detail"])
        r = self.doctor("--ttl", "10s", urls=urls)  # 1000 ms
        self.assertEqual(self.status(r, "round-trip"), "ok", r.stdout)


class Cluster(DoctorTest):
    def test_unassigned_slots_fail_and_full_coverage_passes(self):
        s = self.server("cluster-enabled yes\ncluster-config-file nodes.conf\n")
        s.cli("CONFIG", "SET", "appendonly", "yes")
        s.cli("CONFIG", "SET", "appendfsync", "always")
        r = self.doctor(urls=[s.url], glob=["--cluster"])
        f = [x for x in findings(r.json, "cluster") if x["status"] == "fail"]
        self.assertTrue(f, r.stdout)
        self.assertIn("0 of 16384", f[0]["detail"])
        # without --cluster a cluster node is a mistake too
        r = self.doctor(urls=[s.url])
        self.assertIn("--cluster", findings(r.json, "cluster")[0]["fix"])
        s.cli("CLUSTER", "ADDSLOTSRANGE", "0", "16383")
        self.assertTrue(wait_until(lambda: "cluster_state:ok" in s.cli("CLUSTER", "INFO"), 20))
        r = self.doctor(urls=[s.url], glob=["--cluster"])
        self.assertEqual(self.status(r, "cluster"), "ok", r.stdout)
        self.assertEqual(r.returncode, 0, r.stdout)
        # several seeds of one cluster are not Redlock masters: no vote
        # count, no clock comparison between them
        r = self.doctor(urls=[s.url, f"redis://localhost:{s.port}"], glob=["--cluster"])
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertFalse(findings(r.json, "redlock"), r.stdout)
        self.assertFalse(findings(r.json, "clocks"), r.stdout)


def make_cert(d, days, name):
    """A CA and a server certificate for 127.0.0.1 valid for `days`."""
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

    def ssl(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    ssl("req", "-x509", "-new", *key, "-keyout", f"{name}-ca.key", "-out", f"{name}-ca.crt",
        "-days", "400", "-subj", f"/CN={name}-ca")
    ssl("req", "-new", *key, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", "/CN=server")
    with open(os.path.join(d, f"{name}.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    ssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{name}-ca.crt", "-CAkey", f"{name}-ca.key",
        "-CAcreateserial", "-days", str(days), "-extfile", f"{name}.ext", "-out", f"{name}.crt")
    return {k: os.path.join(d, f"{name}{k}") for k in ("-ca.crt", ".crt", ".key")}


class TlsServer(RedisServer):
    def __init__(self, tmp, cert):
        def argv():
            self.sock = os.path.join(self.dir, "redis.sock")
            return ["--port", "0", "--tls-port", str(self.port), "--unixsocket", self.sock,
                    "--tls-cert-file", cert[".crt"], "--tls-key-file", cert[".key"],
                    "--tls-ca-cert-file", cert["-ca.crt"], "--tls-auth-clients", "no"]
        self.start(tmp, None, argv, "redis-server with TLS did not start")
        self.cli("CONFIG", "SET", "appendonly", "yes")
        self.cli("CONFIG", "SET", "appendfsync", "always")

    @property
    def url(self):
        return f"rediss://127.0.0.1:{self.port}"

    def cli_argv(self):
        return ["-s", self.sock]


class Tls(DoctorTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.soon = make_cert(cls.tmp, 3, "soon")
        cls.later = make_cert(cls.tmp, 365, "later")
        cls.servers += [TlsServer(cls.tmp, cls.soon), TlsServer(cls.tmp, cls.later)]

    def test_certificate_expiring_soon_fails_and_a_long_one_passes(self):
        soon, later = self.servers
        r = self.doctor(urls=[soon.url], glob=["--cacert", self.soon["-ca.crt"]])
        f = findings(r.json, "tls-expiry")[0]
        self.assertEqual(f["status"], "fail", r.stdout)
        self.assertRegex(f["detail"], r"expires in [23]\.\d days")
        self.assertEqual(self.status(r, "connect"), "ok")
        r = self.doctor(urls=[later.url], glob=["--cacert", self.later["-ca.crt"]])
        self.assertEqual(self.status(r, "tls-expiry"), "ok", r.stdout)
        self.assertEqual(r.returncode, 0, r.stdout)

    def test_untrusted_certificate_fails_and_nothing_is_sent(self):
        _, later = self.servers
        r = self.doctor(urls=[later.url], glob=["--cacert", self.soon["-ca.crt"]])
        f = findings(r.json, "tls")[0]
        self.assertEqual(f["status"], "fail")
        self.assertIn("verification failed", f["detail"])
        self.assertFalse(findings(r.json, "scripting"))


class Etcd(DoctorTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if not shutil.which("etcd"):
            raise unittest.SkipTest("etcd-server is not installed")
        from test_cli_etcd import Etcd as EtcdMember
        cls.etcd = EtcdMember()

    @classmethod
    def tearDownClass(cls):
        if hasattr(cls, "etcd"):
            cls.etcd.stop()
        super().tearDownClass()

    def setUp(self):
        r = subprocess.run([DLOCK, "-r", "etcd://127.0.0.1:1", "status", "x"],
                           capture_output=True, text=True, env=self.env())
        if "not supported" in r.stderr or "ENOTSUP" in r.stderr:
            self.skipTest("dlock built without the etcd backend")

    def test_lease_minimum_above_the_ttl_warns_and_below_passes(self):
        r = self.doctor("--ttl", "1s", urls=[self.etcd.url])
        f = findings(r.json, "lease")[0]
        self.assertEqual(f["status"], "warn", r.stdout)
        self.assertRegex(f["detail"], r"granted for [2-9]\d*s")
        self.assertEqual(self.status(r, "member"), "ok")
        r = self.doctor(urls=[self.etcd.url])  # 30 s
        self.assertEqual(self.status(r, "lease"), "ok", r.stdout)
        self.assertEqual(r.returncode, 0, r.stdout)
        # the probe lease is revoked again
        out = self.etcd.ctl("lease", "list").stdout
        self.assertNotRegex(out, r"[0-9a-f]{16}")

    def test_unreachable_member_fails(self):
        port = free_port()
        r = self.doctor(urls=[f"etcd://127.0.0.1:{self.etcd.port},127.0.0.1:{port}"])
        fs = findings(r.json, "member")
        self.assertEqual(sorted(f["status"] for f in fs), ["fail", "ok"], r.stdout)
        self.assertEqual(r.returncode, 2)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: test_cli_doctor.py PATH_TO_DLOCK [unittest options]")
    DLOCK = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
