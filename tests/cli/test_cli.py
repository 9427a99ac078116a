#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Integration tests of the dlock command against real redis-server processes.

Usage: test_cli.py PATH_TO_DLOCK [unittest options]

Each test class starts its own redis-server on a free 127.0.0.1 port, in a
temporary directory, and stops exactly that process at the end. Every test
uses its own lock name, so tests do not see each other's keys.
"""
import fcntl
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

from cli_support import (MoreRedisServers, RedisServer, blocks_signal, free_port,
                         lock_delay_case, wait_until)

DLOCK = None  # set from argv[1]
TOKEN_RE = re.compile(r"^[0-9a-f]{32}$")


def pid_alive(pid):
    """True while pid runs; a zombie counts as dead."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False


class DlockTest(unittest.TestCase):
    """Base: one Redis for the class, helpers to run dlock against it."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="dlock-cli-")
        cls.redis = RedisServer(cls.tmp)

    @classmethod
    def tearDownClass(cls):
        cls.redis.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.name = "cli:" + self.id().rsplit(".", 1)[-1]
        self.dir = tempfile.mkdtemp(dir=self.tmp)
        self.children = []

    def tearDown(self):
        for p in self.children:  # only processes this test started
            if p.poll() is None:
                p.kill()
                p.wait()
            for f in (p.stdout, p.stderr, p.stdin):
                if f:
                    f.close()

    def env(self, **extra):
        env = {k: v for k, v in os.environ.items() if not k.startswith("DLOCK_")}
        env.update(extra)
        return env

    def args(self, *args, urls=None):
        r = []
        for u in urls if urls is not None else [self.redis.url]:
            r += ["-r", u]
        return [DLOCK, *r, *args]

    def dlock(self, *args, urls=None, env=None, timeout=30):
        return subprocess.run(self.args(*args, urls=urls), capture_output=True, text=True,
                              env=env or self.env(), timeout=timeout)

    def spawn(self, *args, urls=None, **kw):
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        p = subprocess.Popen(self.args(*args, urls=urls), text=True, env=self.env(), **kw)
        self.children.append(p)
        return p

    def path(self, name):
        return os.path.join(self.dir, name)

    def acquire(self, ttl="30s", *more):
        r = self.dlock("acquire", "-t", ttl, *more, self.name)
        self.assertEqual(r.returncode, 0, r.stderr)
        token = r.stdout.strip()
        self.assertRegex(token, TOKEN_RE)
        return token

    def assertUsage(self, r):
        self.assertEqual(r.returncode, 64, r.stderr)
        self.assertIn("usage: dlock", r.stderr)


class ExitStatus(DlockTest):
    def test_busy_lock_with_nonblock_exits_1(self):
        self.acquire()
        for cmd in (["run", "-n", self.name, "--", "true"], ["acquire", "-n", self.name]):
            r = self.dlock(*cmd)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn(f'"{self.name}" is held by another owner', r.stderr)
            self.assertIn(f"127.0.0.1:{self.redis.port}", r.stderr)

    def test_busy_lock_with_wait_times_out_with_1_or_the_E_code(self):
        self.acquire()
        t0 = time.monotonic()
        r = self.dlock("run", "-w", "300ms", self.name, "--", "true")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertGreaterEqual(time.monotonic() - t0, 0.3)
        self.assertIn("gave up after", r.stderr)
        r = self.dlock("run", "-w", "0.3", "-E", "42", self.name, "--", "true")
        self.assertEqual(r.returncode, 42, r.stderr)
        r = self.dlock("acquire", "-w", "0", "-E", "7", self.name)
        self.assertEqual(r.returncode, 7, r.stderr)

    def test_program_exit_status_is_passed_through_and_lock_released(self):
        r = self.dlock("run", self.name, "--", "sh", "-c", "exit 3")
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertEqual(self.redis.cli("EXISTS", self.name), "0")

    def test_program_killed_by_signal_gives_128_plus_n(self):
        r = self.dlock("run", self.name, "--", "sh", "-c", "kill -TERM $$")
        self.assertEqual(r.returncode, 128 + signal.SIGTERM, r.stderr)
        self.assertEqual(self.redis.cli("EXISTS", self.name), "0")

    def test_program_not_found_gives_127_and_not_executable_126(self):
        r = self.dlock("run", self.name, "--", self.path("no-such-program"))
        self.assertEqual(r.returncode, 127, r.stderr)
        self.assertIn("no-such-program", r.stderr)
        with open(self.path("plain"), "w") as f:
            f.write("not a program\n")
        r = self.dlock("run", self.name, "--", self.path("plain"))
        self.assertEqual(r.returncode, 126, r.stderr)
        self.assertEqual(self.redis.cli("EXISTS", self.name), "0")

    def test_usage_errors_exit_64_with_a_usage_line(self):
        n = self.name
        cases = [
            [],
            ["frobnicate"],
            ["--bogus", "status", n],
            ["--connect-timeout", "soon", "status", n],
            ["--min-replicas", "x", "status", n],
            ["--min-replicas", "-1", "status", n],
            ["--min-replicas", "1001", "status", n],
            ["--min-replicas-timeout", "0", "status", n],
            ["--min-replicas-timeout", "61s", "status", n],
            ["run", "-t", "abc", n, "--", "true"],
            ["run", "-w", "5x", n, "--", "true"],
            ["run", "--grace", "-1", n, "--", "true"],
            ["run", "--bogus", n, "--", "true"],
            ["run", "-Z", n, "--", "true"],
            ["run", "--on-lost", "maybe", n, "--", "true"],
            ["run", n, "true"],
            ["run", n, "--"],
            ["run", n],
            ["run"],
            ["run", n, "-c", "true", "extra"],
            ["run", "-n", "-w", "1", n, "--", "true"],
            ["run", "-t"],
            ["acquire"],
            ["acquire", "-t", "0", n],
            ["acquire", "-E", "300", n],
            ["acquire", n, "extra"],
            ["release", n],
            ["extend", "-w", "1", n, "token"],
            ["status", "--json"],
        ]
        for argv in cases:
            with self.subTest(argv=argv):
                self.assertUsage(self.dlock(*argv))
        self.assertEqual(self.redis.cli("EXISTS", n), "0")

    def test_unreachable_server_exits_69_within_the_connect_timeout(self):
        dead = [f"redis://127.0.0.1:{free_port()}"]
        for argv in (["run", self.name, "--", "true"], ["acquire", self.name],
                     ["release", self.name, "0" * 32], ["extend", self.name, "0" * 32],
                     ["status", self.name]):
            with self.subTest(argv=argv):
                t0 = time.monotonic()
                r = self.dlock("--connect-timeout", "500ms", *argv, urls=dead)
                self.assertEqual(r.returncode, 69, r.stderr)
                self.assertLess(time.monotonic() - t0, 3.0)
                self.assertIn(dead[0][len("redis://"):], r.stderr)

    def test_help_and_version(self):
        r = self.dlock("--help")
        self.assertEqual(r.returncode, 0)
        for cmd in ("run", "acquire", "release", "extend", "status"):
            self.assertIn(cmd, r.stdout)
        r = self.dlock("run", "--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("--on-lost", r.stdout)
        r = self.dlock("--version")
        self.assertEqual(r.returncode, 0)
        self.assertRegex(r.stdout, r"^dlock \d+\.\d+\.\d+")


class Run(DlockTest):
    def test_child_sees_name_token_and_fence(self):
        script = ('printf "%s\\n%s\\n%s\\n" "$DLOCK_NAME" "$DLOCK_TOKEN" "$DLOCK_FENCE"; '
                  f'redis-cli -h 127.0.0.1 -p {self.redis.port} GET "$DLOCK_NAME"')
        r = self.dlock("run", self.name, "--", "sh", "-c", script)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines()[2], "0")  # no fencing by default
        fences = []
        for _ in range(2):
            r = self.dlock("run", "--fence", self.name, "--", "sh", "-c", script)
            self.assertEqual(r.returncode, 0, r.stderr)
            name, token, fence, stored = r.stdout.splitlines()
            self.assertEqual(name, self.name)
            self.assertRegex(token, TOKEN_RE)
            self.assertEqual(stored, token)  # the token is the one in Redis
            fences.append(int(fence))
        self.assertGreater(fences[0], 0)
        self.assertGreater(fences[1], fences[0])

    def test_shell_command_form(self):
        r = self.dlock("run", self.name, "-c", 'echo "$((1 + 2)) $DLOCK_NAME"; exit 4')
        self.assertEqual(r.returncode, 4, r.stderr)
        self.assertEqual(r.stdout, f"3 {self.name}\n")

    def test_options_after_name_and_before_dashdash_are_parsed(self):
        r = self.dlock("run", self.name, "-t", "5s", "--", "echo", "-t", "-n", "x")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "-t -n x\n")

    def test_program_inherits_our_descriptors_but_not_the_redis_sockets(self):
        with open(self.path("passed"), "w") as f:
            fd = f.fileno()
            p = self.spawn("run", self.name, "--", "sh", "-c",
                           'for f in /proc/$$/fd/*; do echo "${f##*/} $(readlink $f)"; done',
                           pass_fds=(fd,))
            out, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 0, err)
        fds = dict(line.split(" ", 1) for line in out.splitlines())
        self.assertEqual(fds.get(str(fd)), self.path("passed"))
        self.assertFalse([t for t in fds.values() if t.startswith("socket:")], out)

    def test_lost_lock_kills_the_program_group_and_exits_75(self):
        pidfile = self.path("pid")
        p = self.spawn("run", "-t", "1s", self.name, "--", "sh", "-c",
                       f"sleep 60 & echo $! > {pidfile}; wait")
        def read_pid():
            try:
                with open(pidfile) as f:
                    return int(f.read())
            except (OSError, ValueError):
                return None
        self.assertTrue(wait_until(lambda: read_pid() is not None))
        grandchild = read_pid()
        self.assertTrue(pid_alive(grandchild))
        self.assertEqual(self.redis.cli("DEL", self.name), "1")
        _, err = p.communicate(timeout=10)
        self.assertEqual(p.returncode, 75, err)
        self.assertIn(f'lost "{self.name}"', err)
        self.assertTrue(wait_until(lambda: not pid_alive(grandchild), 5),
                        "the program's background child survived")

    def test_lost_lock_sigkill_after_grace_when_sigterm_is_ignored(self):
        ready = self.path("ready")
        p = self.spawn("run", "-t", "900ms", "--grace", "300ms", self.name, "--", "sh", "-c",
                       f"trap '' TERM; touch {ready}; while :; do sleep 0.1; done")
        self.assertTrue(wait_until(lambda: os.path.exists(ready)))
        self.redis.cli("DEL", self.name)
        t0 = time.monotonic()
        _, err = p.communicate(timeout=10)
        self.assertEqual(p.returncode, 75, err)
        self.assertLess(time.monotonic() - t0, 5)

    def test_lost_lock_with_on_lost_ignore_lets_the_program_finish(self):
        ready, go = self.path("ready"), self.path("go")
        p = self.spawn("run", "-t", "600ms", "--on-lost", "ignore", self.name, "--", "sh", "-c",
                       f"touch {ready}; while [ ! -e {go} ]; do sleep 0.05; done")
        self.assertTrue(wait_until(lambda: os.path.exists(ready)))
        self.redis.cli("DEL", self.name)
        time.sleep(1.0)  # several renewal periods: the loss is seen
        self.assertIsNone(p.poll())
        open(go, "w").close()
        _, err = p.communicate(timeout=10)
        self.assertEqual(p.returncode, 75, err)
        self.assertIn("ignore", err)

    def test_sigterm_to_dlock_reaches_the_program_and_the_lock_is_released(self):
        ready, got = self.path("ready"), self.path("got")
        p = self.spawn("run", self.name, "--", "sh", "-c",
                       f"trap 'echo TERM > {got}; exit 5' TERM; touch {ready}; "
                       "while :; do sleep 0.1; done")
        self.assertTrue(wait_until(lambda: os.path.exists(ready)))
        self.assertEqual(self.redis.cli("EXISTS", self.name), "1")
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=10)
        self.assertEqual(p.returncode, 5, err)
        with open(got) as f:
            self.assertEqual(f.read(), "TERM\n")
        self.assertEqual(self.redis.cli("EXISTS", self.name), "0")

    def test_signal_ends_the_wait_at_once_with_an_attempt_in_flight(self):
        # issue 22 item 8: the server stops while `dlock run` waits; its
        # next attempt hangs on the stopped server (I/O timeout 3 s) and a
        # SIGTERM must end the wait at once, not after 1.5 x the timeout.
        self.acquire("2s")
        ran = self.path("ran")
        p = self.spawn("--io-timeout", "3s", "run", "-w", "20s", self.name, "--", "touch", ran)
        self.assertTrue(wait_until(lambda: blocks_signal(p.pid, signal.SIGTERM)))
        time.sleep(0.5)  # waiting by now
        os.kill(self.redis.proc.pid, signal.SIGSTOP)
        try:
            time.sleep(2.5)  # the holder's TTL is over: an attempt is on the wire
            self.assertIsNone(p.poll())
            t0 = time.monotonic()
            p.send_signal(signal.SIGTERM)
            _, err = p.communicate(timeout=10)
            took = time.monotonic() - t0
        finally:
            os.kill(self.redis.proc.pid, signal.SIGCONT)
        self.assertEqual(p.returncode, 143, err)
        self.assertLess(took, 1.0, err)
        self.assertFalse(os.path.exists(ran))
        # the attempt runs when the server resumes, and its undo after it
        self.assertTrue(wait_until(self.redis.ping, 5))
        time.sleep(0.3)
        self.assertEqual(self.redis.cli("EXISTS", self.name), "0")

    def test_sigint_while_waiting_exits_130_and_leaves_nothing_behind(self):
        token = self.acquire("30s")
        ran = self.path("ran")
        p = self.spawn("run", self.name, "--", "touch", ran)
        # Handled from here on (a slow start under a sanitizer on a busy
        # machine could otherwise still meet the default action).
        self.assertTrue(wait_until(lambda: blocks_signal(p.pid, signal.SIGINT)))
        time.sleep(0.5)  # waiting by now
        self.assertIsNone(p.poll())
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=5)
        self.assertEqual(p.returncode, 130, err)
        self.assertFalse(os.path.exists(ran))
        self.assertEqual(self.redis.cli("GET", self.name), token)
        self.assertGreater(int(self.redis.cli("PTTL", self.name)), 25000)
        keys = set(self.redis.cli("KEYS", f"*{self.name}*").split())
        # No fencing counter by default; the holder's identity (KEY NUL id).
        self.assertEqual(keys, {self.name, self.name + "\x00id"})

    def test_sighup_while_acquire_waits_exits_129(self):
        token = self.acquire("30s")
        p = self.spawn("acquire", "-w", "20s", self.name)
        self.assertTrue(wait_until(lambda: blocks_signal(p.pid, signal.SIGHUP)))
        time.sleep(0.5)
        p.send_signal(signal.SIGHUP)
        out, err = p.communicate(timeout=5)
        self.assertEqual(p.returncode, 129, err)
        self.assertEqual(out, "")
        self.assertEqual(self.redis.cli("GET", self.name), token)

    def test_second_run_waits_for_the_first(self):
        log, started = self.path("log"), self.path("started")
        first = self.spawn("run", self.name, "--", "sh", "-c",
                           f"touch {started}; sleep 1; echo first >> {log}")
        self.assertTrue(wait_until(lambda: os.path.exists(started)))
        t0 = time.monotonic()
        second = self.spawn("run", self.name, "--", "sh", "-c", f"echo second >> {log}")
        self.assertEqual(second.wait(timeout=10), 0)
        self.assertGreater(time.monotonic() - t0, 0.5)
        self.assertEqual(first.wait(timeout=10), 0)
        with open(log) as f:
            self.assertEqual(f.read(), "first\nsecond\n")

    def rides_out_a_server_restart(self, *run_opts):
        """A `dlock run` waiting (with run_opts) for a lock held on a server
        that restarts empty gets the lock and runs."""
        server = RedisServer(self.tmp)
        try:
            urls = [server.url]
            r = self.dlock("acquire", "-t", "20s", self.name, urls=urls)
            self.assertEqual(r.returncode, 0, r.stderr)
            p = self.spawn("run", *run_opts, "-w", "20s", self.name, "--", "true", urls=urls)
            time.sleep(0.5)
            server.stop()  # no persistence: the restarted server is empty
            time.sleep(0.5)
            self.assertIsNone(p.poll())
            server = RedisServer(self.tmp, port=server.port)
            _, err = p.communicate(timeout=20)
            self.assertEqual(p.returncode, 0, err)
        finally:
            server.stop()

    def test_waiting_rides_out_a_server_restart(self):
        self.rides_out_a_server_restart()

    def test_fair_waiter_rides_out_a_server_restart(self):
        self.rides_out_a_server_restart("--fair")

    def test_verbose_fair_waiters_run_in_arrival_order(self):
        token = self.acquire("30s")
        log = self.path("order")
        procs = []
        for who in "ABC":
            procs.append(self.spawn("-v", "run", "--fair", "-w", "30s", self.name, "--",
                                    "sh", "-c", f"echo {who} >> {log}"))
            time.sleep(0.3)
        time.sleep(2.5)  # several progress slices: nobody may leave the line
        r = self.dlock("release", self.name, token)
        self.assertEqual(r.returncode, 0, r.stderr)
        for p in procs:
            _, err = p.communicate(timeout=20)
            self.assertEqual(p.returncode, 0, err)
            self.assertIn("waiting for", err)
        with open(log) as f:
            self.assertEqual(f.read(), "A\nB\nC\n")

    def pid1(self, *args):
        """dlock as PID 1 of a new PID namespace (a container's entry point)."""
        if os.geteuid() != 0 or not shutil.which("unshare"):
            self.skipTest("needs root and unshare(1) for a PID namespace")
        probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"],
                               capture_output=True)
        if probe.returncode != 0:
            self.skipTest("cannot create a PID namespace here")
        return ["unshare", "--pid", "--fork", "--mount-proc", *self.args(*args)]

    def test_as_pid_1_reaps_orphans(self):
        out = self.path("zombies")
        # The subshell exits at once: its background sleep is orphaned to
        # PID 1 (dlock) and exits 0.3 s later.
        script = ("( sleep 0.3 & ); sleep 1.2; "
                  f"grep -l '^State:.*Z' /proc/[0-9]*/status | wc -l > {out}")
        r = subprocess.run(self.pid1("run", self.name, "--", "sh", "-c", script),
                           capture_output=True, text=True, env=self.env(), timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out) as f:
            self.assertEqual(f.read().strip(), "0")

    def test_as_pid_1_exits_75_soon_after_the_lock_is_lost(self):
        # An orphaned sleep in the program's group dies with SIGTERM; unreaped
        # it stayed a zombie and kept dlock in the 5 s grace period.
        p = subprocess.Popen(self.pid1("run", "-t", "1s", self.name, "--", "sh", "-c",
                                       "( sleep 30 & ); sleep 30"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=self.env())
        self.children.append(p)
        self.assertTrue(wait_until(lambda: self.redis.cli("EXISTS", self.name) == "1"))
        time.sleep(0.5)
        t0 = time.monotonic()
        self.redis.cli("DEL", self.name)
        _, err = p.communicate(timeout=20)
        took = time.monotonic() - t0
        self.assertEqual(p.returncode, 75, err)
        self.assertLess(took, 2.5, err)

    def read_pids(self, *files):
        """The pids the program wrote to files, once all are there."""
        def read_one(name):
            with open(self.path(name)) as f:
                return int(f.read())
        def read():
            try:
                return [read_one(name) for name in files]
            except (OSError, ValueError):
                return None
        self.assertTrue(wait_until(lambda: read() is not None), "the program did not start")
        return read()

    def kill_by_pid(self, pids):
        """SIGKILL what a failed test left running: pids the program wrote."""
        for pid in pids:
            if os.path.exists(f"/proc/{pid}"):  # a zombie's threads may run
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def test_sigkill_of_dlock_kills_the_program_and_grandchildren_before_the_lease_ends(self):
        # The program, a grandchild in its group, one that left it with
        # setsid(), and one that did so and was orphaned by its parent.
        script = ("sleep 60 & echo $! > bg; setsid sleep 60 & echo $! > sid; "
                  "( setsid sleep 60 & echo $! > orphan ); echo $$ > prog; wait")
        p = self.spawn("run", "-t", "3s", self.name, "--", "sh", "-c", script, cwd=self.dir)
        pids = self.read_pids("prog", "bg", "sid", "orphan")
        self.addCleanup(self.kill_by_pid, pids)
        self.assertTrue(all(pid_alive(pid) for pid in pids))
        t0 = time.monotonic()
        p.kill()  # SIGKILL: no chance to clean up
        p.wait()
        gone = wait_until(lambda: not any(pid_alive(pid) for pid in pids), 5, 0.005)
        took = time.monotonic() - t0
        self.assertTrue(gone, f"outlived dlock's SIGKILL: {[x for x in pids if pid_alive(x)]}")
        self.assertLess(took, 2.0)  # the lease (3 s) still runs
        sys.stderr.write(f"[program gone {took * 1000:.0f} ms after dlock's SIGKILL] ")
        # A second run gets the name only once the lease ran out, and by
        # then nothing of the first program may run.
        check = " ".join(str(x) for x in pids)
        out = self.path("second")
        r = self.dlock("run", "-w", "10s", self.name, "--", "sh", "-c",
                       f"for pid in {check}; do "
                       "grep -qs '^State:[[:space:]]*[^Z]' /proc/$pid/status && echo $pid; "
                       f"done > {out}; true")
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out) as f:
            self.assertEqual(f.read(), "", "the second holder ran beside the first program")

    def test_sigkill_of_dlock_with_1100_inherited_descriptors_kills_the_program(self):
        # dlock's pipes then get numbers above 1024: the guardian must not
        # keep the ctl pipe's write end whatever its number, or it never
        # sees dlock die (review 34, finding 3).
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = 4096 if hard == resource.RLIM_INFINITY else min(hard, 4096)
        if want < 1200:
            self.skipTest(f"RLIMIT_NOFILE hard limit {hard} is below 1200")
        if soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            self.addCleanup(resource.setrlimit, resource.RLIMIT_NOFILE, (soft, hard))
        fds = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
        try:
            p = self.spawn("run", "-t", "3s", self.name, "--", "sh", "-c",
                           "echo $$ > prog; exec sleep 60", cwd=self.dir, pass_fds=fds)
        finally:
            for fd in fds:
                os.close(fd)
        pids = self.read_pids("prog")
        self.addCleanup(self.kill_by_pid, pids)
        self.assertTrue(pid_alive(pids[0]))
        t0 = time.monotonic()
        p.kill()
        p.wait()
        gone = wait_until(lambda: not pid_alive(pids[0]), 5, 0.005)
        took = time.monotonic() - t0
        self.assertTrue(gone, "the program outlived dlock's SIGKILL")
        self.assertLess(took, 2.0)  # the lease (3 s) still runs

    def test_sigkill_of_dlocks_whole_job_kills_the_program(self):
        # `kill -9 %1` signals dlock's process group: the guardian is not
        # in it, and must survive to do its work.
        p = self.spawn("run", self.name, "--", "sh", "-c",
                       "setsid sleep 60 & echo $! > sid; echo $$ > prog; wait",
                       cwd=self.dir, start_new_session=True)
        pids = self.read_pids("prog", "sid")
        self.addCleanup(self.kill_by_pid, pids)
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        self.assertTrue(wait_until(lambda: not any(pid_alive(pid) for pid in pids), 5),
                        f"outlived dlock's job: {[x for x in pids if pid_alive(x)]}")

    def test_sigkill_of_the_guardian_kills_the_program_and_exits_71(self):
        # Without its guardian nothing would stop the program if dlock died:
        # dlock stops it while the lease holds, releases, and says so.
        script = "setsid sleep 60 & echo $! > sid; echo $$ > prog; wait"
        p = self.spawn("run", self.name, "--", "sh", "-c", script, cwd=self.dir)
        pids = self.read_pids("prog", "sid")
        self.addCleanup(self.kill_by_pid, pids)
        guardians = []
        for entry in os.listdir("/proc"):
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == p.pid:
                        guardians.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
        self.assertEqual(len(guardians), 1, guardians)
        os.kill(guardians[0], signal.SIGKILL)
        _, err = p.communicate(timeout=10)
        self.assertEqual(p.returncode, 71, err)
        self.assertIn("guardian", err)
        self.assertFalse([pid for pid in pids if pid_alive(pid)])
        self.assertEqual(self.redis.cli("EXISTS", self.name), "0")

    def test_lost_lock_exits_75_at_once_under_a_slow_reaping_init(self):
        # An init (here: a subreaper above dlock) that reaps its orphans only
        # every 10 s. The program's orphaned sleep dies with the SIGTERM of the
        # loss and stays a zombie member of the group until reaped: dlock
        # used to wait for it the whole grace period (5 s).
        helper = ("import ctypes, os, subprocess, sys, time\n"
                  "ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)\n"
                  "p = subprocess.Popen(sys.argv[1:])\n"
                  "last = time.monotonic()\n"
                  "while p.poll() is None:\n"
                  "    time.sleep(0.01)\n"
                  "    if time.monotonic() - last > 10:\n"
                  "        last = time.monotonic()\n"
                  "        while True:\n"
                  "            si = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)\n"
                  "            if si is None or si.si_pid == p.pid: break\n"
                  "            os.waitpid(si.si_pid, 0)\n"
                  "sys.exit(p.returncode)\n")
        orphan = self.path("orphan")
        p = subprocess.Popen([sys.executable, "-c", helper,
                              *self.args("run", "-t", "1s", self.name, "--", "sh", "-c",
                                         f"( sleep 30 & echo $! > {orphan} ); sleep 30")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=self.env())
        self.children.append(p)
        pids = self.read_pids("orphan")
        self.addCleanup(self.kill_by_pid, pids)
        time.sleep(0.3)
        t0 = time.monotonic()
        self.assertEqual(self.redis.cli("DEL", self.name), "1")
        _, err = p.communicate(timeout=20)
        took = time.monotonic() - t0
        self.assertEqual(p.returncode, 75, err)
        self.assertFalse(pid_alive(pids[0]))
        sys.stderr.write(f"[exit 75 {took * 1000:.0f} ms after the loss] ")
        self.assertLess(took, 2.5, err)

    def test_lost_lock_waits_for_the_threads_of_a_program_whose_main_thread_exited(self):
        # After pthread_exit() in main, /proc shows the process as a zombie
        # while its other threads run: here a grandchild that ignores
        # SIGTERM. It is not dead: dlock must wait out the grace and SIGKILL
        # it, not exit when the shell is gone.
        script = ("import ctypes, os, signal, sys, threading, time\n"
                  "signal.signal(signal.SIGTERM, lambda *a: None)\n"
                  "threading.Thread(target=time.sleep, args=(30,)).start()\n"
                  "with open(sys.argv[1], 'w') as f: f.write(str(os.getpid()))\n"
                  "ctypes.CDLL(None).pthread_exit(None)\n")
        def threads_run(pid):
            try:
                return len(os.listdir(f"/proc/{pid}/task")) > 1
            except FileNotFoundError:
                return False
        with open(self.path("err"), "w+") as err:
            # Not pipes: a survivor would hold them open.
            p = self.spawn("run", "-t", "1s", "--grace", "1s", self.name, "--", "sh", "-c",
                           '"$@" & wait', "sh", sys.executable, "-c", script, self.path("pid"),
                           stdout=subprocess.DEVNULL, stderr=err)
            pid = self.read_pids("pid")[0]
            self.addCleanup(self.kill_by_pid, [pid])
            self.assertTrue(wait_until(lambda: threads_run(pid) and not pid_alive(pid)))
            self.assertEqual(self.redis.cli("DEL", self.name), "1")
            p.wait(timeout=20)
            err.seek(0)
            self.assertEqual(p.returncode, 75, err.read())
        self.assertTrue(wait_until(lambda: not threads_run(pid), 5),
                        "a thread of the program outlived dlock")

    def test_verbose_reports_progress_while_waiting(self):
        self.acquire("30s")
        r = self.dlock("-v", "run", "-w", "2.2s", self.name, "--", "true")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertGreaterEqual(r.stderr.count("waiting for"), 2, r.stderr)
        self.assertIn("holder's ttl", r.stderr)

    def test_fair_works_or_says_it_is_not_supported(self):
        r = self.dlock("run", "--fair", self.name, "--", "true")
        self.assertIn(r.returncode, (0, 69), r.stderr)
        if r.returncode == 69:
            self.assertIn("--fair", r.stderr)

    def test_program_owns_the_terminal(self):
        import pty
        import termios
        master, slave = pty.openpty()
        try:
            p = subprocess.Popen(
                self.args("run", self.name, "--", "sh", "-c",
                          'read x; echo "got $x"; exec sleep 30'),
                stdin=slave, stdout=slave, stderr=subprocess.PIPE, env=self.env(),
                start_new_session=True,
                preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
            self.children.append(p)
            os.close(slave)
            slave = -1
            time.sleep(0.3)
            os.write(master, b"hello\n")  # no SIGTTIN: the program may read
            out = b""
            deadline = time.monotonic() + 5
            while b"got hello" not in out and time.monotonic() < deadline:
                if select.select([master], [], [], 0.1)[0]:
                    out += os.read(master, 1024)
            self.assertIn(b"got hello", out)
            time.sleep(0.3)  # sleep runs by now
            os.write(master, b"\x03")  # ^C goes to the program's group
            p.wait(timeout=5)
            self.assertEqual(p.returncode, 128 + signal.SIGINT, p.stderr.read())
            self.assertEqual(self.redis.cli("EXISTS", self.name), "0")
        finally:
            os.close(master)
            if slave >= 0:
                os.close(slave)


class Commands(DlockTest):
    def status(self):
        r = self.dlock("status", "--json", self.name)
        st = json.loads(r.stdout)
        self.assertEqual(r.returncode, 0 if st["held"] else 1, r.stderr)
        return st

    def test_acquire_status_extend_release_round_trip(self):
        token = self.acquire("10s", "--fence")
        self.assertEqual(self.redis.cli("GET", self.name), token)
        r = self.dlock("status", self.name)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("held", r.stdout)
        st = self.status()
        self.assertEqual(st["name"], self.name)
        self.assertTrue(st["held"])
        node = st["nodes"][0]
        self.assertEqual(node["node"], f"127.0.0.1:{self.redis.port}")
        self.assertTrue(node["held"])
        self.assertTrue(0 < node["ttl_ms"] <= 10000)
        self.assertGreaterEqual(node["fence"], 1)

        r = self.dlock("extend", "-t", "60s", self.name, token)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreater(int(self.redis.cli("PTTL", self.name)), 50000)

        r = self.dlock("release", self.name, token)
        self.assertEqual(r.returncode, 0, r.stderr)
        st = self.status()
        self.assertFalse(st["held"])
        self.assertEqual(st["state"], "free")
        r = self.dlock("status", self.name)
        self.assertEqual(r.returncode, 1, r.stderr)  # free: 1, as flock's "no"
        self.assertEqual(st["nodes"][0]["ttl_ms"], -1)
        r = self.dlock("release", self.name, token)
        self.assertEqual(r.returncode, 1, r.stderr)
        r = self.dlock("extend", self.name, token)
        self.assertEqual(r.returncode, 1, r.stderr)

    def test_acquired_lock_lives_for_its_ttl(self):
        self.acquire("700ms")
        self.assertEqual(self.redis.cli("EXISTS", self.name), "1")
        self.assertTrue(wait_until(lambda: self.redis.cli("EXISTS", self.name) == "0", 3))

    def test_acquire_with_stdout_closed_fails_and_takes_nothing(self):
        r = subprocess.run(["sh", "-c", 'exec "$@" >&-', "sh",
                            *self.args("acquire", self.name)],
                           capture_output=True, text=True, env=self.env(), timeout=30)
        self.assertEqual(r.returncode, 71, r.stderr)
        self.assertIn("cannot print the token", r.stderr)
        self.assertEqual(self.redis.cli("EXISTS", self.name), "0")

    def test_release_or_extend_with_a_wrong_token_exits_1(self):
        token = self.acquire()
        r = self.dlock("release", self.name, "f" * 32)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("another owner", r.stderr)
        r = self.dlock("extend", self.name, "f" * 32)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(self.redis.cli("GET", self.name), token)

    def test_dlock_redis_environment_variable(self):
        env = self.env(DLOCK_REDIS=self.redis.url)
        r = subprocess.run([DLOCK, "acquire", self.name], capture_output=True, text=True,
                           env=env, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.redis.cli("GET", self.name), r.stdout.strip())
        # -r wins over the environment.
        env = self.env(DLOCK_REDIS=f"redis://127.0.0.1:{free_port()}")
        r = subprocess.run([DLOCK, "-r", self.redis.url, "status", self.name],
                           capture_output=True, text=True, env=env, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)  # held (by the acquire above)
        r = subprocess.run([DLOCK, "status", self.name], capture_output=True, text=True,
                           env=self.env(DLOCK_REDIS="redis://127.0.0.1:1,"), timeout=30)
        self.assertEqual(r.returncode, 64, r.stderr)


class Redlock(MoreRedisServers, DlockTest):
    def values(self, nodes):
        """What each node holds under the test's name ("" for nothing)."""
        return [s.cli("GET", self.name) for s in nodes]

    def test_lock_over_three_nodes(self):
        # Redlock grants at a majority and stops listening there: a node
        # that answers later (here often a fresh node's NOSCRIPT, whose EVAL
        # is then never sent; on a loaded machine any slow node) may never
        # get the key. The promises checked are the majority's.
        nodes = [self.redis, *self.more]
        urls = [s.url for s in nodes]
        r = self.dlock("acquire", self.name, urls=urls)
        self.assertEqual(r.returncode, 0, r.stderr)
        token = r.stdout.strip()
        before = self.values(nodes)
        self.assertGreaterEqual(before.count(token), 2, before)  # a majority holds it
        self.assertLessEqual(set(before), {token, ""}, before)

        # status agrees with the nodes. A key can only appear late (no
        # owner releases it meanwhile), so a node holding it before the
        # status call must be reported held, and one still without it
        # after the call must be reported free (or not answering).
        r = self.dlock("status", "--json", self.name, urls=urls)
        after = self.values(nodes)
        self.assertEqual(r.returncode, 0, r.stderr)
        st = json.loads(r.stdout)
        self.assertEqual((st["state"], st["quorum"]), ("held", 2))
        by_node = {n["node"]: n.get("held") for n in st["nodes"]}  # None: no answer
        said = [by_node[f"127.0.0.1:{s.port}"] for s in nodes]
        self.assertEqual(st["nodes_held"], said.count(True), st)
        for i in range(len(nodes)):
            if before[i] == token:
                self.assertIn(said[i], (True, None), (i, before, st))
            if after[i] != token:
                self.assertIn(said[i], (False, None), (i, after, st))

        r = self.dlock("run", "-n", self.name, "--", "true", urls=urls)
        self.assertEqual(r.returncode, 1, r.stderr)
        r = self.dlock("release", self.name, token, urls=urls)
        self.assertEqual(r.returncode, 0, r.stderr)
        # Released on a majority at once (the release decides there too).
        left = self.values(nodes)
        self.assertLessEqual(left.count(token), 1, left)

        script = 'printf %s "$DLOCK_TOKEN" >"$0"; exit 9'
        r = self.dlock("run", self.name, "--", "sh", "-c", script, self.path("token"),
                       urls=urls)
        self.assertEqual(r.returncode, 9, r.stderr)
        with open(self.path("token")) as f:
            self.assertRegex(f.read(), TOKEN_RE)
        # No key left behind: each release reaches the nodes that answer
        # (a late one when its handle is freed), long before the 30 s lease
        # would end by itself.
        self.assertTrue(wait_until(lambda: not any(self.values(nodes)), 10),
                        self.values(nodes))

    def test_busy_lock_with_one_of_three_nodes_dead_exits_1_and_waits(self):
        nodes = [RedisServer(self.tmp) for _ in range(3)]
        try:
            urls = [s.url for s in nodes]
            r = self.dlock("acquire", "-t", "30s", self.name, urls=urls)
            self.assertEqual(r.returncode, 0, r.stderr)
            token = r.stdout.strip()
            # The grant is a majority's: the node to kill is one without
            # the key if there is one, so that the lock stays held on both
            # nodes left (a majority of three).
            held = [v == token for v in self.values(nodes)]
            self.assertGreaterEqual(held.count(True), 2, held)
            dead = nodes[held.index(False)] if False in held else nodes[2]
            dead.stop()
            r = self.dlock("run", "-n", self.name, "--", "true", urls=urls)
            self.assertEqual(r.returncode, 1, r.stderr)  # busy, not 69
            p = self.spawn("run", "-w", "10s", self.name, "--", "true", urls=urls)
            time.sleep(1)
            self.assertIsNone(p.poll())  # waits instead of giving up with 69
            r = self.dlock("release", self.name, token, urls=urls)
            self.assertEqual(r.returncode, 0, r.stderr)
            _, err = p.communicate(timeout=15)
            self.assertEqual(p.returncode, 0, err)
        finally:
            for s in nodes:
                s.stop()

    def test_renewed_lease_survives_a_stopped_node(self):
        nodes = [self.redis, *self.more]
        urls = [s.url for s in nodes]
        p = self.spawn("run", "-t", "1s", self.name, "--", "sleep", "4", urls=urls)
        # Stopped once the lock is held; a node the grant missed (it
        # decides at a majority) is the one stopped, so that the lease
        # stands on the two nodes left.
        self.assertTrue(wait_until(lambda: sum(map(bool, self.values(nodes))) >= 2, 10),
                        self.values(nodes))
        held = [bool(v) for v in self.values(nodes)]
        stopped = nodes[held.index(False)] if False in held else self.more[1]
        os.kill(stopped.proc.pid, signal.SIGSTOP)
        try:
            _, err = p.communicate(timeout=20)
        finally:
            os.kill(stopped.proc.pid, signal.SIGCONT)
        self.assertEqual(p.returncode, 0, err)  # not 75 (lost)

    def test_fair_with_several_nodes_is_a_usage_error(self):
        urls = [self.redis.url, *[s.url for s in self.more]]
        for argv in (["run", "--fair", self.name, "--", "true"], ["acquire", "--fair", self.name]):
            with self.subTest(argv=argv):
                r = self.dlock(*argv, urls=urls)
                self.assertUsage(r)
                self.assertIn("--fair", r.stderr)
        for s in (self.redis, *self.more):
            self.assertEqual(s.cli("EXISTS", self.name), "0")


class Scripting(DlockTest):
    def test_quiet_conflict_prints_nothing(self):
        self.acquire()
        for argv in (["run", "-q", "-n", self.name, "--", "true"],
                     ["run", "--quiet", "-w", "200ms", self.name, "--", "true"],
                     ["acquire", "-q", "-n", self.name],
                     ["-q", "run", "-n", self.name, "--", "true"]):
            with self.subTest(argv=argv):
                r = self.dlock(*argv)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertEqual(r.stderr, "")
                self.assertEqual(r.stdout, "")

    def test_lock_delay_keeps_a_name_whose_holder_died_and_not_a_released_one(self):
        lock_delay_case(self, "500ms", "1500ms", 1.5 + 2)

    def test_status_exits_0_when_held_and_1_when_free(self):
        r = self.dlock("status", self.name)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("free", r.stdout)
        token = self.acquire()
        r = self.dlock("status", self.name)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("held", r.stdout)
        self.assertEqual(self.dlock("release", self.name, token).returncode, 0)
        self.assertEqual(self.dlock("status", "--json", self.name).returncode, 1)

    def test_acquire_prints_the_fencing_token_on_request(self):
        seen = []
        for _ in range(2):
            r = self.dlock("acquire", "--print-fence", self.name)
            self.assertEqual(r.returncode, 0, r.stderr)
            token, fence = r.stdout.split()
            self.assertRegex(token, TOKEN_RE)
            seen.append(int(fence))
            self.assertEqual(self.dlock("release", self.name, token).returncode, 0)
        self.assertGreater(seen[0], 0)
        self.assertEqual(seen[1], seen[0] + 1)

    def test_durations_accept_days(self):
        self.acquire("1d")
        self.assertGreater(int(self.redis.cli("PTTL", self.name)), 86000000)

    def test_lease_below_the_minimum_is_a_usage_error(self):
        for ttl in ("99ms", "0.05", "1ms"):
            with self.subTest(ttl=ttl):
                r = self.dlock("run", "-t", ttl, self.name, "--", "true")
                self.assertUsage(r)
                self.assertIn("100ms", r.stderr)
        self.assertEqual(self.redis.cli("EXISTS", self.name), "0")
        r = self.dlock("run", "-t", "100ms", self.name, "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_control_characters_in_names_are_escaped(self):
        name = self.name + "\x1b[31m\nred\x07"
        r = self.dlock("acquire", name)
        self.assertEqual(r.returncode, 0, r.stderr)
        outputs = [self.dlock("run", "-n", name, "--", "true").stderr,
                   self.dlock("-v", "run", "-n", name + "2", "--", "true").stderr,
                   self.dlock("status", name).stdout]
        for out in outputs:
            self.assertNotRegex(out, "[\x00-\x08\x0b-\x1f\x7f]")
            self.assertIn("\\x1b[31m\\x0ared\\x07", out)
            self.assertEqual(out.count("\n"), len(out.splitlines()))

    def test_many_names_leave_no_key_by_default(self):
        # Only these names' keys (a lock key and its helpers start with the
        # name): DBSIZE also counted an earlier test's helper key that
        # lapsed meanwhile (a run lives 2 s), which failed a CI run.
        for i in range(200):
            r = self.dlock("run", f"{self.name}:{i}", "--", "true")
            self.assertEqual(r.returncode, 0, r.stderr)
            r = self.dlock("acquire", "-t", "5s", f"{self.name}:a{i}")
            self.assertEqual(self.dlock("release", f"{self.name}:a{i}", r.stdout.strip()).returncode, 0)
        self.assertEqual(self.redis.cli("KEYS", f"{self.name}:*"), "")

    def test_wrong_type_is_refused_with_76(self):
        self.redis.cli("HSET", self.name, "f", "v")
        r = self.dlock("run", "-n", self.name, "--", "true")
        self.assertEqual(r.returncode, 76, r.stderr)
        self.assertIn("WRONGTYPE", r.stderr)


SECRET = "s3cr3t-Pa55"
ACL_CONF = f"""requirepass {SECRET}
user alice on >{SECRET} ~* &* +@all
user locker on >{SECRET} resetkeys ~lock:* resetchannels &dlock:wake:lock:* -@all +evalsha +eval +script|load +subscribe +unsubscribe +set +get +del +exists +type +pttl +pexpire +incr +publish +hset +hget +hdel +hexists +hincrby +rpush +lpop +lindex +lpos +lrem
"""
WARNING = ("Warning: Using a password with '-a' or '-u' option on the command line "
           "interface may not be safe.")


class Credentials(DlockTest):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="dlock-cli-")
        cls.redis = RedisServer(cls.tmp, conf=ACL_CONF, auth=SECRET)

    def admin(self, *args):
        return self.redis.cli(*args)

    def assertNoSecret(self, r):
        self.assertNotIn(SECRET, r.stdout + r.stderr)

    def test_pass_option_warns_like_redis_cli(self):
        r = self.dlock("-a", SECRET, "run", self.name, "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr.strip(), WARNING)
        r = self.dlock("--pass", SECRET, "--no-auth-warning", "run", self.name, "--", "true")
        self.assertEqual((r.returncode, r.stderr), (0, ""))

    def test_password_from_environment_and_file_and_url(self):
        r = self.dlock("run", self.name, "--", "true", env=self.env(DLOCK_PASSWORD=SECRET))
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        pf = self.path("pw")
        with open(pf, "w") as f:
            f.write(SECRET + "\n")
        r = self.dlock("--password-file", pf, "run", self.name, "--", "true")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        r = self.dlock("--password-file", self.path("missing"), "run", self.name, "--", "true")
        self.assertEqual(r.returncode, 66, r.stderr)
        url = f"redis://:{SECRET}@127.0.0.1:{self.redis.port}"
        r = self.dlock("--no-auth-warning", "run", self.name, "--", "true", urls=[url])
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        r = self.dlock("run", self.name, "--", "true", urls=[url])  # in argv: -a's warning
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("Warning: Using a password", r.stderr)
        # --user with a password: an ACL user
        r = self.dlock("--user", "alice", "run", self.name, "--", "true",
                       env=self.env(DLOCK_PASSWORD=SECRET))
        self.assertEqual((r.returncode, r.stderr), (0, ""))

    def test_auth_failure_exits_77_unreachable_69_and_never_shows_the_password(self):
        r = self.dlock("-a", "wrong-" + SECRET, "--no-auth-warning", "run", self.name, "--", "true")
        self.assertEqual(r.returncode, 77, r.stderr)
        self.assertIn("DLOCK_EAUTH", r.stderr)
        self.assertNoSecret(r)
        r = self.dlock("run", self.name, "--", "true")  # no password at all
        self.assertEqual(r.returncode, 77, r.stderr)
        dead = f"redis://:{SECRET}@127.0.0.1:{free_port()}"
        r = self.dlock("--connect-timeout", "300ms", "run", self.name, "--", "true", urls=[dead])
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertIn("DLOCK_EIO", r.stderr)
        self.assertNoSecret(r)
        for url in (f"rediss://:{SECRET}@127.0.0.1:1", f"redis://u:{SECRET}@127.0.0.1:1/x",
                    f"unix:///tmp/x.sock?password={SECRET}&db=x"):
            with self.subTest(url=url):
                r = self.dlock("status", self.name, urls=[url])
                self.assertNotEqual(r.returncode, 0)
                self.assertNoSecret(r)
        r = self.dlock("status", self.name, env=self.env(DLOCK_REDIS=f"redis://:{SECRET}@h:1,"),
                       urls=[])
        self.assertEqual(r.returncode, 64, r.stderr)
        self.assertNoSecret(r)

    def test_status_never_shows_the_password(self):
        url = f"redis://alice:{SECRET}@127.0.0.1:{self.redis.port}"
        for argv in (["status", self.name], ["status", "--json", self.name], ["-v", "run", self.name, "--", "true"]):
            r = self.dlock(*argv, urls=[url])
            self.assertIn(r.returncode, (0, 1), r.stderr)
            self.assertNoSecret(r)

    def test_the_program_never_gets_a_password(self):
        url = f"redis://alice:{SECRET}@127.0.0.1:{self.redis.port}"
        for env in ({"DLOCK_REDIS": url}, {"DLOCK_PASSWORD": SECRET,
                                           "DLOCK_REDIS": f"redis://127.0.0.1:{self.redis.port}"}):
            with self.subTest(env=env):
                r = subprocess.run([DLOCK, "--user", "alice", "run", self.name, "--", "env"],
                                   capture_output=True, text=True, env=self.env(**env), timeout=30)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertNoSecret(r)
                self.assertIn("DLOCK_TOKEN=", r.stdout)
        # a DLOCK_REDIS without a password is kept
        self.assertIn(f"DLOCK_REDIS=redis://127.0.0.1:{self.redis.port}", r.stdout)

    def test_pass_value_is_blanked_in_the_process_arguments(self):
        p = self.spawn("-a", SECRET, "run", self.name, "--", "sleep", "2")
        self.assertTrue(wait_until(lambda: self.admin("EXISTS", self.name) == "1", 5))
        with open(f"/proc/{p.pid}/cmdline", "rb") as f:
            self.assertNotIn(SECRET.encode(), f.read())
        p.wait(10)

    def test_least_privilege_user_with_prefix_runs_every_mode(self):
        base = ["--user", "locker", "--prefix", "lock:"]
        env = self.env(DLOCK_PASSWORD=SECRET)
        for mode in ([], ["--fair"], ["--fence"]):
            with self.subTest(mode=mode):
                r = self.dlock(*base, "run", *mode, "x", "--", "true", env=env)
                self.assertEqual((r.returncode, r.stderr), (0, ""))
        # acquire, a waiter, release and status through the same user
        r = self.dlock(*base, "acquire", "--print-fence", "x", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        token = r.stdout.split()[0]
        self.assertEqual(self.admin("GET", "lock:x"), token)
        # The holder identity is best effort: this user may HSET and HGET
        # but not TIME, so it is kept without its "since".
        r = self.dlock(*base, "status", "--json", "x", env=env)
        self.assertRegex(json.loads(r.stdout)["nodes"][0]["identity"],
                         r"^host=\S+ pid=[0-9]+ prog=dlock$")
        w = subprocess.Popen(self.args(*base, "run", "-w", "10s", "x", "--", "true"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.children.append(w)
        time.sleep(0.3)
        self.assertEqual(self.dlock(*base, "status", "x", env=env).returncode, 0)
        r = self.dlock(*base, "release", "x", token, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(w.wait(10), 0, w.stderr.read())
        # without the prefix the user may not touch the key: 77
        r = self.dlock("--user", "locker", "run", "x", "--", "true", env=env)
        self.assertEqual(r.returncode, 77, r.stderr)
        self.assertEqual(self.admin("DBSIZE"), "1")  # only the fencing counter of lock:x


def make_certs(d):
    """A CA, a server certificate for 127.0.0.1/localhost, a client
    certificate, and an unrelated CA, made with the openssl command in d."""
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

    def ssl(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    ssl("req", "-x509", "-new", *key, "-keyout", "ca.key", "-out", "ca.crt", "-days", "3",
        "-subj", "/CN=dlock-cli-ca")
    ssl("req", "-x509", "-new", *key, "-keyout", "other.key", "-out", "other.crt", "-days", "3",
        "-subj", "/CN=unrelated-ca")
    for who, ext in (("server", "subjectAltName=IP:127.0.0.1,DNS:localhost\n"),
                     ("client", "extendedKeyUsage=clientAuth\n")):
        ssl("req", "-new", *key, "-keyout", f"{who}.key", "-out", f"{who}.csr",
            "-subj", f"/CN={who}")
        with open(os.path.join(d, f"{who}.ext"), "w") as f:
            f.write(ext)
        ssl("x509", "-req", "-in", f"{who}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "3", "-extfile", f"{who}.ext", "-out", f"{who}.crt")
    return {k: os.path.join(d, k) for k in
            ("ca.crt", "other.crt", "server.crt", "server.key", "client.crt", "client.key")}


class TlsRedisServer(RedisServer):
    """A TLS-only redis-server (port 0, tls-port); administered over its
    unix socket, since it has no plain TCP port."""

    def __init__(self, tmp, certs, auth_clients=False):
        def argv():
            self.sock = os.path.join(self.dir, "redis.sock")
            return ["--port", "0", "--tls-port", str(self.port), "--unixsocket", self.sock,
                    "--tls-cert-file", certs["server.crt"], "--tls-key-file", certs["server.key"],
                    "--tls-ca-cert-file", certs["ca.crt"],
                    "--tls-auth-clients", "yes" if auth_clients else "no"]
        self.start(tmp, None, argv, "redis-server with TLS did not start")

    @property
    def url(self):
        return f"rediss://127.0.0.1:{self.port}"

    def cli_argv(self):
        return ["-s", self.sock]


class Tls(DlockTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.certs = make_certs(cls.tmp)
        cls.tls = TlsRedisServer(cls.tmp, cls.certs)
        cls.mtls = TlsRedisServer(cls.tmp, cls.certs, auth_clients=True)

    @classmethod
    def tearDownClass(cls):
        cls.tls.stop()
        cls.mtls.stop()
        super().tearDownClass()

    def test_verified_run_and_acquire_release(self):
        urls = [self.tls.url]
        r = self.dlock("--cacert", self.certs["ca.crt"], "acquire", self.name, urls=urls)
        self.assertEqual(r.returncode, 0, r.stderr)
        token = r.stdout.strip()
        self.assertEqual(self.tls.cli("GET", self.name), token)
        r = self.dlock("--cacert", self.certs["ca.crt"], "release", self.name, token, urls=urls)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.dlock("--cacert", self.certs["ca.crt"], "run", self.name, "--", "sh", "-c",
                       "exit 7", urls=urls)
        self.assertEqual(r.returncode, 7, r.stderr)

    def test_verification_failure_exits_69_and_says_why(self):
        r = self.dlock("--cacert", self.certs["other.crt"], "run", "-n", self.name, "--", "true",
                       urls=[self.tls.url])
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertIn("certificate verification failed", r.stderr)
        r = self.dlock("--cacert", self.certs["ca.crt"], "--sni", "wrong.example",
                       "acquire", self.name, urls=[self.tls.url])
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertIn("hostname mismatch", r.stderr)
        self.assertEqual(self.tls.cli("EXISTS", self.name), "0")

    def test_insecure_and_tls_flag_and_environment(self):
        plain_url = f"redis://127.0.0.1:{self.tls.port}"
        r = self.dlock("--tls", "--insecure", "run", self.name, "--", "true", urls=[plain_url])
        self.assertEqual(r.returncode, 0, r.stderr)
        env = self.env(DLOCK_REDIS=plain_url, DLOCK_TLS="1", DLOCK_CACERT=self.certs["ca.crt"])
        r = subprocess.run([DLOCK, "run", self.name, "--", "true"], capture_output=True,
                           text=True, env=env, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        env["DLOCK_CACERT"] = self.certs["other.crt"]
        r = subprocess.run([DLOCK, "run", self.name, "--", "true"], capture_output=True,
                           text=True, env=env, timeout=30)
        self.assertEqual(r.returncode, 69, r.stderr)

    def test_client_certificate_for_mutual_tls(self):
        urls = [self.mtls.url]
        ca = ["--cacert", self.certs["ca.crt"]]
        r = self.dlock(*ca, "run", self.name, "--", "true", urls=urls)
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertIn("TLS", r.stderr)
        r = self.dlock(*ca, "--cert", self.certs["client.crt"], "--key", self.certs["client.key"],
                       "run", self.name, "--", "true", urls=urls)
        self.assertEqual(r.returncode, 0, r.stderr)
        env = self.env(DLOCK_CACERT=self.certs["ca.crt"], DLOCK_CERT=self.certs["client.crt"],
                       DLOCK_KEY=self.certs["client.key"])
        r = self.dlock("run", self.name, "--", "true", urls=urls, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: test_cli.py PATH_TO_DLOCK [unittest options]")
    DLOCK = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
