# SPDX-License-Identifier: BSD-3-Clause
"""Server start-up shared by the dlock command's tests (test_cli.py,
test_cli_kinds.py, test_cli_etcd.py, test_cli_zk.py): free loopback
ports, polling, a server process of our own started with retries
(redis-server here, etcd and ZooKeeper in their scripts) and stopped by
the process we started, never by name; and the run tests every store's
script shares (RunOnAStore).

Imported by the test scripts from their own directory (Python puts a
script's directory first on sys.path), so ctest needs nothing more.
"""
import json
import os
import socket
import subprocess
import tempfile
import time


# Test servers listen below the ephemeral range (32768 and up on Linux), as
# the C harness's do (tests/support/proc.h): a client's outgoing connection
# never takes a port a server is about to bind.
PORT_MIN, PORT_MAX = 10000, 22768
_next_port = [os.getpid() * 7919 + time.monotonic_ns()]


def _bindable(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_port():
    """A loopback port in [PORT_MIN, PORT_MAX) free now (and its cluster
    bus port, + 10000); each call moves on, so one process never gets a
    port twice."""
    span = PORT_MAX - PORT_MIN
    for _ in range(span):
        port = PORT_MIN + _next_port[0] % span
        _next_port[0] += 1
        if _bindable(port) and _bindable(port + 10000):
            return port
    raise RuntimeError("no free loopback port below the ephemeral range")


def wait_until(cond, timeout=10.0, step=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(step)
    return cond()


def blocks_signal(pid, signo):
    """True once process pid's main thread blocks signo: the dlock command
    blocks the signals it handles before it starts any work, so a signal
    sent after that is handled, never the default action."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigBlk:"):
                    return bool(int(line.split()[1], 16) & (1 << (signo - 1)))
    except OSError:
        pass
    return False


def stop_process(proc, timeout=5):
    """SIGTERM, then SIGKILL after timeout seconds: exactly this process."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def start_process(argv, ready, failure, timeout=10.0, tries=5, **popen_kw):
    """Popen(argv()) until ready() says it serves; returns the Popen.

    argv() is called anew for each try, so that it can pick fresh free
    ports: a free port may be taken by someone else before the server binds
    it, and the server then exits. A try that neither serves nor exits
    within timeout seconds is stopped before the next. RuntimeError(failure)
    after the last try."""
    for _ in range(tries):
        proc = subprocess.Popen(argv(), **popen_kw)
        if wait_until(lambda: proc.poll() is not None or ready(), timeout) \
                and proc.poll() is None:
            return proc
        stop_process(proc)
    raise RuntimeError(failure)


class RedisServer:
    """One redis-server of our own on 127.0.0.1; stop() ends exactly it."""

    def __init__(self, tmp, port=None, conf="", auth=None):
        self.auth = ["-a", auth, "--no-auth-warning"] if auth else []
        def argv():
            with open(os.path.join(self.dir, "redis.conf"), "w") as f:
                f.write(conf)
            return [os.path.join(self.dir, "redis.conf"), "--port", str(self.port)]
        self.start(tmp, port, argv, "redis-server did not start")

    def start(self, tmp, port, argv, failure):
        """Start redis-server with argv() (called once a port and a dir are
        chosen) on 127.0.0.1, without persistence; retry on a port taken
        meanwhile."""
        def full_argv():
            self.port = port or free_port()
            self.dir = tempfile.mkdtemp(prefix="redis-", dir=tmp)
            return ["redis-server", *argv(), "--bind", "127.0.0.1",
                    "--save", "", "--appendonly", "no", "--dir", self.dir]
        self.proc = start_process(full_argv, self.ping, failure,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}"

    def cli_argv(self):
        return ["-h", "127.0.0.1", "-p", str(self.port), *self.auth]

    def cli(self, *args):
        r = subprocess.run(["redis-cli", *self.cli_argv(), *args],
                           capture_output=True, text=True, timeout=10)
        return r.stdout.strip()

    def ping(self):
        try:
            return self.cli("PING") == "PONG"
        except subprocess.TimeoutExpired:
            return False

    def stop(self):
        stop_process(self.proc)


class MoreRedisServers:
    """Mixin before a DlockTest base: two more redis-servers for the class
    (cls.more), for runs over three nodes."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.more = []
        try:
            for _ in range(2):
                cls.more.append(RedisServer(cls.tmp))
        except BaseException:
            cls.tearDownClass()  # unittest does not when setUpClass fails
            raise

    @classmethod
    def tearDownClass(cls):
        for s in cls.more:
            s.stop()
        super().tearDownClass()


class RunOnAStore:
    """The run tests every store's CLI test shares (test_cli_etcd.py,
    test_cli_zk.py), mixed into its unittest.TestCase: the class has
    dlock(*args) and spawn(*args) on its store, self.name, and TOKEN_RE,
    what a token there looks like."""

    TOKEN_RE = None

    def test_run_passes_the_status_and_releases(self):
        r = self.dlock("run", self.name, "--", "sh", "-c", 'echo "$DLOCK_TOKEN"; exit 7')
        self.assertEqual(r.returncode, 7, r.stderr)
        self.assertRegex(r.stdout.strip(), self.TOKEN_RE)
        s = self.dlock("status", self.name)
        self.assertEqual(s.returncode, 1, s.stderr)  # free
        self.assertIn("free", s.stdout)

    def test_busy_lock_exits_1_and_waiting_gets_it_after_release(self):
        # Long enough for two more dlock starts under a sanitizer on a busy
        # machine (the try-once below must still find it held).
        p = self.spawn("run", self.name, "--", "sleep", "5")
        self.assertTrue(wait_until(lambda: self.dlock("status", self.name).returncode == 0))
        r = self.dlock("run", "-n", self.name, "--", "true")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("held by another owner", r.stderr)
        r = self.dlock("run", "-w", "20s", "--fence", self.name, "--", "sh", "-c",
                       'echo "$DLOCK_FENCE"')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreater(int(r.stdout), 0)
        p.communicate(timeout=30)
        self.assertEqual(p.returncode, 0)


def lock_delay_case(t, ttl, delay, wait_max_s):
    """--lock-delay on t's store (a unittest.TestCase with dlock(*args),
    spawn(*args) and name): a holder killed by SIGKILL (dlock run's
    guardian is killed with it: its lease simply runs out) keeps the name
    for the delay more, status says "delayed", a try-once says why, a
    waiter gets it within wait_max_s; an extend with the delay and
    `dlock release` (no --lock-delay: it takes any delay out) leave the
    name free at once. test_cli.py (Redis) and test_cli_etcd.py run it."""
    p = t.spawn("run", "-t", ttl, "--lock-delay", delay, t.name, "--", "sleep", "30")
    wait_until(lambda: t.dlock("status", t.name).returncode == 0, 10)
    p.kill()
    p.wait()
    # The guardian SIGKILLs the program when dlock run dies; the lease
    # then runs out and the delay starts.
    wait_until(lambda: t.dlock("status", t.name).returncode == 1, 10)
    r = t.dlock("status", t.name)
    t.assertIn("delayed", r.stdout)
    j = json.loads(t.dlock("status", "--json", t.name).stdout)
    t.assertGreater(j["nodes"][0]["lock_delay_ms"], 0)
    r = t.dlock("acquire", "-n", "--lock-delay", delay, t.name)
    t.assertEqual(r.returncode, 1, r.stderr)
    t.assertIn("lock-delay", r.stderr)
    t0 = time.monotonic()
    r = t.dlock("acquire", "-t", "30s", "-w", "10s", "--lock-delay", delay, t.name)
    t.assertEqual(r.returncode, 0, r.stderr)
    token = r.stdout.strip()
    t.assertLess(time.monotonic() - t0, wait_max_s)
    r = t.dlock("extend", "-t", "20s", "--lock-delay", delay, t.name, token)
    t.assertEqual(r.returncode, 0, r.stderr)
    t.assertEqual(t.dlock("release", t.name, token).returncode, 0)
    r = t.dlock("run", "-n", "--lock-delay", delay, t.name, "--", "true")
    t.assertEqual(r.returncode, 0, r.stderr)
    t.assertEqual(t.dlock("status", "--json", t.name).returncode, 1)
    t.assertEqual(json.loads(t.dlock("status", "--json", t.name).stdout)
                  ["nodes"][0]["lock_delay_ms"], 0)
    for bad in ("-1s", "2h", "soon"):
        with t.subTest(bad=bad):
            t.assertEqual(t.dlock("acquire", "--lock-delay", bad, t.name).returncode, 64)
