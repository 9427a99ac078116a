# SPDX-License-Identifier: BSD-3-Clause
"""The order-dedup example service (examples/uv_dedup.c, event_dedup.c):
one redis-server, TWO instances of the service, and every order id sent to
both at once from several connections. Each id must be answered DONE
exactly once and DUP every other time. The broken control (--no-lock, the
same service without the lock) must process some id twice: that is what
shows the lock, and not the timing, keeps the orders single.

    test_dedup.py SERVICE_BINARY
"""
import os
import socket
import subprocess
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
from cli_support import RedisServer, free_port, start_process, stop_process  # noqa: E402

BINARY = None
IDS = 40         # order ids per run
CONNS = 3        # connections to each service
SENDS = 2        # times each connection's share of ids is sent


def connectable(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


def client(port, lines, replies, errors):
    """Send lines on one connection at once, then read one answer per line."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall("".join(f"{line}\n" for line in lines).encode())
            buf = b""
            while buf.count(b"\n") < len(lines):
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
            replies.extend(buf.decode().split())
    except OSError as e:
        errors.append(e)


class Dedup(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmpdir = tempfile.TemporaryDirectory()
        cls.redis = RedisServer(cls.tmpdir.name)

    @classmethod
    def tearDownClass(cls):
        cls.redis.stop()
        cls.tmpdir.cleanup()

    def services(self, *extra):
        procs = []
        for _ in range(2):
            port = [0]

            def argv():
                port[0] = free_port()
                return [BINARY, str(port[0]), "127.0.0.1", str(self.redis.port), *extra]
            procs.append((start_process(argv, lambda: connectable(port[0]),
                                        f"{BINARY} did not start"), port[0]))
            self.addCleanup(stop_process, procs[-1][0])
        return [p for _, p in procs]

    def run_orders(self, prefix, *extra):
        """Every id to both services, CONNS connections each: answers by id."""
        self.redis.cli("DEL", "dedup:processed")
        ports = self.services(*extra)
        ids = [f"{prefix}{i}" for i in range(IDS)]
        replies, errors, threads = [], [], []
        for port in ports:
            for c in range(CONNS):
                # Each connection starts elsewhere in the ids, so that
                # connections meet on an id at different moments.
                start = c * IDS // CONNS
                lines = [f"ORDER {i}" for i in ids[start:] + ids[:start]] * SENDS
                threads.append(threading.Thread(target=client,
                                                args=(port, lines, replies, errors)))
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(errors, [])
        answers = {i: [] for i in ids}
        for word, ident in zip(replies[::2], replies[1::2]):
            answers[ident].append(word)
        sends = len(ports) * CONNS * SENDS
        for i in ids:
            self.assertEqual(len(answers[i]), sends, f"{i}: {answers[i]}")
        return answers

    def test_each_order_is_processed_once(self):
        answers = self.run_orders("a")
        for ident, words in answers.items():
            self.assertEqual(words.count("DONE"), 1, f"{ident}: {words}")
            self.assertEqual(words.count("DUP"), len(words) - 1, f"{ident}: {words}")
        self.assertEqual(int(self.redis.cli("SCARD", "dedup:processed")), IDS)

    def test_without_the_lock_some_order_is_processed_twice(self):
        answers = self.run_orders("b", "--no-lock")
        twice = [i for i, words in answers.items() if words.count("DONE") > 1]
        print(f"\n--no-lock: {len(twice)} of {IDS} orders processed more than once")
        self.assertNotEqual(twice, [], "the control processed no order twice")


if __name__ == "__main__":
    BINARY = sys.argv.pop(1)
    unittest.main()
