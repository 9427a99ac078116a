#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""dlock elect and dlock leader against a real redis-server (the harness of
test_cli.py; docs/elections.md).

Usage: test_cli_elect.py PATH_TO_DLOCK [unittest options]

The program run while leading gets the term's fence and the value; a
standby leads when the leader's program ends, and within the lease when
the leader's dlock is SIGKILLed; `leader --watch` prints every change in
order; `elect --again` keeps campaigning, and the terms of two such
candidates never overlap (each program logs "in"/"out" under an flock(2))
while their fences grow; usage errors exit 64. On a Redlock of three
(ElectRedlock): elect and leader as on one node, the value on every node,
a standby that takes over at the end of the leader's program, and
`leader` exit 69 when two of the three nodes do not answer.
"""
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import unittest

import test_cli
from cli_support import MoreRedisServers, free_port, wait_until
from test_cli import DlockTest

# Log "in FENCE", stay, log "out FENCE": the log shows every term.
TERM = ('flock "$LOG.lock" sh -c \'echo "in $0 $1" >> "$LOG"\' "$DLOCK_FENCE" '
        '"$DLOCK_LEADER_VALUE"; sleep "$HOLD"; '
        'flock "$LOG.lock" sh -c \'echo "out $0" >> "$LOG"\' "$DLOCK_FENCE"')


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return f.read().split()
    except OSError:
        return []


def count_lines(path):
    try:
        with open(path) as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


class Elect(DlockTest):
    def leader(self):
        r = self.dlock("leader", self.name)
        return r.returncode, r.stdout.strip()

    def test_program_gets_the_fence_and_value_and_the_lead_ends_with_it(self):
        r = self.dlock("elect", self.name, "--value", "host-a:80", "--", "sh", "-c",
                       'echo "$DLOCK_FENCE $DLOCK_LEADER_VALUE"; exit 3')
        self.assertEqual(r.returncode, 3, r.stderr)
        fence, value = r.stdout.split()
        self.assertGreater(int(fence), 0)
        self.assertEqual(value, "host-a:80")
        self.assertEqual(self.leader(), (1, "0"))  # nobody leads: exit 1

    def test_leader_shows_the_running_leader_and_a_standby_takes_over(self):
        a = self.spawn("elect", self.name, "--value", "a", "--", "sleep", "2")
        self.assertTrue(wait_until(lambda: self.leader()[0] == 0, 10))
        code, out = self.leader()
        fence_a, value = out.split()
        self.assertEqual(value, "a")
        r = self.dlock("leader", "--json", self.name)
        self.assertEqual(json.loads(r.stdout),
                         {"name": self.name, "leader": True, "fence": int(fence_a), "value": "a"})
        r = self.dlock("elect", "-n", self.name, "--", "true")
        self.assertEqual(r.returncode, 1, r.stderr)
        start = time.monotonic()
        r = self.dlock("elect", self.name, "--value", "b", "--", "sh", "-c", 'echo "$DLOCK_FENCE"')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreater(int(r.stdout), int(fence_a))
        self.assertLess(time.monotonic() - start, 5)  # at a's resign, not a lease later
        a.communicate(timeout=10)
        self.assertEqual(a.returncode, 0)

    def test_a_killed_leader_is_replaced_within_its_lease(self):
        a = self.spawn("elect", "-t", "2s", self.name, "--value", "a", "--", "sleep", "60")
        self.assertTrue(wait_until(lambda: self.leader()[0] == 0, 10))
        time.sleep(0.8)  # renewed at least once
        killed = time.monotonic()
        os.kill(a.pid, signal.SIGKILL)  # dlock itself: nothing resigns
        a.wait()
        r = self.dlock("elect", "-t", "2s", self.name, "--value", "b", "--", "true")
        took = time.monotonic() - killed
        self.assertEqual(r.returncode, 0, r.stderr)
        print(f"# takeover after SIGKILL of dlock elect (-t 2s): {took:.2f}s", file=sys.stderr)
        self.assertLess(took, 2.0 + 1.5)

    def test_watch_prints_every_change_in_order(self):
        w = self.spawn("leader", "--watch", "--json", self.name)
        lines = []

        got = queue.Queue()
        threading.Thread(target=lambda: [got.put(x) for x in w.stdout], daemon=True).start()

        def seen(n, within=20):
            # A deadline, not a bare readline: a change the watcher never
            # prints must fail the test, not hang it until ctest's timeout
            # (a reader thread: select() on a buffered pipe misses the
            # lines already in its buffer).
            end = time.monotonic() + within
            while len(lines) < n:
                try:
                    lines.append(json.loads(got.get(timeout=max(end - time.monotonic(), 0.01))))
                except queue.Empty:
                    return False
            return True

        self.assertTrue(seen(1))
        a = self.spawn("elect", self.name, "--value", "a", "--", "sleep", "1")
        self.assertTrue(seen(2))
        # b leads 0.3 s: a term shorter than one look may be merged into
        # the next (docs/elections.md), and a loaded machine stretches a look.
        r = self.dlock("elect", self.name, "--value", "b", "--", "sleep", "0.3")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(seen(4))
        a.communicate(timeout=10)
        w.send_signal(signal.SIGTERM)
        w.communicate(timeout=10)
        self.assertEqual([(x["leader"], x["value"]) for x in lines],
                         [(False, ""), (True, "a"), (True, "b"), (False, "")])
        self.assertLess(lines[1]["fence"], lines[2]["fence"])

    def test_again_campaigns_after_each_term_and_terms_never_overlap(self):
        log = self.path("log")
        env = self.env(LOG=log, HOLD="0.2")
        ps = [self.spawn_env(env, "elect", "--again", self.name, "--value", v, "-c", TERM)
              for v in ("a", "b")]
        self.assertTrue(wait_until(lambda: count_lines(log) >= 16, 30))
        for p in ps:
            p.send_signal(signal.SIGTERM)
        for p in ps:
            p.communicate(timeout=20)
            self.assertEqual(p.returncode, 128 + signal.SIGTERM)
        inside, last, who = 0, 0, set()
        with open(log) as f:
            for line in f:
                parts = line.split()
                if parts[0] == "in":
                    inside += 1
                    self.assertEqual(inside, 1, "two terms at once")
                    self.assertGreater(int(parts[1]), last)
                    last = int(parts[1])
                    who.add(parts[2])
                else:
                    inside -= 1
        self.assertEqual(who, {"a", "b"})

    def spawn_env(self, env, *args):
        p = subprocess.Popen(self.args(*args), text=True, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        self.children.append(p)
        return p

    def test_leader_cron_example_runs_on_one_host_and_moves_when_it_dies(self):
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                              "examples", "leader-cron.sh")
        log = self.path("log")
        env = self.env(PATH=os.path.dirname(test_cli.DLOCK) + ":" + os.environ["PATH"],
                       DLOCK_REDIS=self.redis.url, NAME=self.name, INTERVAL="0.1", TTL="1s")
        job = ["sh", "-c", f'echo "$DLOCK_FENCE" >> {log}']
        ps = [subprocess.Popen([script, *job], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True) for _ in range(2)]
        self.children += ps
        self.assertTrue(wait_until(lambda: count_lines(log) >= 5, 20))
        code, out = self.leader()
        first = int(out.split()[0])
        # The leader's dlock (the script execs it) is the one with a child:
        # the guardian of the job loop. SIGKILL it: nothing resigns.
        lead = [p for p in ps if children(p.pid)]
        self.assertEqual(len(lead), 1)
        before = count_lines(log)
        lead[0].kill()
        lead[0].wait()
        self.assertTrue(wait_until(lambda: count_lines(log) >= before + 5, 20))
        with open(log) as f:
            fences = [int(x) for x in f]
        self.assertEqual(fences, sorted(fences))  # never an older term after a newer one
        self.assertEqual(fences[0], first)
        self.assertGreater(fences[-1], first)  # the standby's term
        other = next(p for p in ps if p is not lead[0])
        other.send_signal(signal.SIGTERM)
        other.communicate(timeout=20)
        self.assertEqual(other.returncode, 128 + signal.SIGTERM)

    def test_usage_errors(self):
        for args in (("elect",), ("elect", self.name), ("elect", self.name, "x", "--", "true"),
                     ("leader",), ("leader", self.name, "x")):
            r = self.dlock(*args)
            self.assertEqual(r.returncode, 64, (args, r.stderr))


class ElectRedlock(MoreRedisServers, DlockTest):
    def urls(self):
        return [self.redis.url, *(s.url for s in self.more)]

    def leader(self, urls=None):
        r = self.dlock("leader", self.name, urls=urls or self.urls())
        return r.returncode, r.stdout.strip()

    def test_elect_and_leader_over_three_nodes(self):
        a = self.spawn("elect", self.name, "--value", "a", "--", "sleep", "2", urls=self.urls())
        self.assertTrue(wait_until(lambda: self.leader()[0] == 0, 10))
        fence_a, value = self.leader()[1].split()
        self.assertEqual(value, "a")
        # The value hash is KEY NUL "value": named in Lua (no NUL in argv).
        get = "return redis.call('HGET', KEYS[1] .. '\\0value', 'v')"
        held = [s.cli("EVAL", get, "1", self.name) for s in (self.redis, *self.more)]
        self.assertGreaterEqual(held.count("a"), 2, held)  # written on a majority at least
        start = time.monotonic()
        r = self.dlock("elect", self.name, "--value", "b", "--", "sh", "-c",
                       'echo "$DLOCK_FENCE $DLOCK_LEADER_VALUE"', urls=self.urls())
        self.assertEqual(r.returncode, 0, r.stderr)
        fence_b, value = r.stdout.split()
        self.assertEqual(value, "b")
        self.assertGreater(int(fence_b), int(fence_a))
        self.assertLess(time.monotonic() - start, 5)  # at a's end, not a lease later
        a.communicate(timeout=10)
        self.assertEqual(a.returncode, 0)
        self.assertEqual(self.leader(), (1, "0"))  # nobody leads: exit 1

    def test_leader_exits_69_when_too_few_nodes_answer(self):
        dead = [f"redis://127.0.0.1:{free_port()}" for _ in range(2)]
        r = self.dlock("leader", self.name, urls=[self.redis.url, *dead])
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertEqual(self.leader(urls=[self.redis.url, self.more[0].url, dead[0]]),
                         (1, "0"))  # one of three down: it answers


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: test_cli_elect.py PATH_TO_DLOCK [unittest options]")
    test_cli.DLOCK = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
