#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""How late etcd's watch events reach dlock's waiters under contention.

Runs S3 (four dlock-bench-worker processes on one name, 2000 sections)
against one etcd member of its own, each worker under strace, then
matches every watch stream's event with the transaction that deleted the
watched key: the time from that delete's send to the event's arrival.
A hand-over held up by etcd's watch catch-up (docs/backends.md, "The
longest wait") shows as an event 60-100 ms late.

Usage: bench/etcd-watch-lag.py [BUILD_DIR] [worker args, e.g. renew=1]

Needs strace. Starts etcd on free 127.0.0.1 ports in a temp dir and stops
it by pid.
"""
import base64
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers_lib import start_etcd, stop  # noqa: E402

CALL = re.compile(r'(\d+)\s+(\d+):(\d+):(\d+\.\d+) (sendto|recvfrom)\((\d+), "(.*)"(?:\.\.\.)?, \d+,')


def run(build, extra, tmp, url):
    worker = os.path.join(build, "bench", "dlock-bench-worker")
    start = time.time() + 1.5
    key = f"bench-lag-{os.getpid()}"
    ctr = os.path.join(tmp, "ctr")
    with open(ctr, "w") as f:
        f.write("0".ljust(15) + "\n")
    procs = []
    for i in range(4):
        args = ["strace", "-f", "-tt", "-s", "3000", "-o", os.path.join(tmp, f"trace{i}"),
                worker, "mode=contend", f"url={url}", f"key={key}", f"start={start:.6f}",
                "ttl_ms=10000", f"out={tmp}/out{i}", f"lat={tmp}/lat{i}", f"ctr={ctr}",
                f"holder=/dev/shm/dlock-bench-lag-{os.getpid()}", "target=2000", "max_time=30",
                "retry=default", *extra]
        procs.append(subprocess.Popen(args))
    for p in procs:
        if p.wait() != 0:
            raise SystemExit("a worker failed")


def calls(tmp):
    out = []
    for i in range(4):
        for line in open(os.path.join(tmp, f"trace{i}"), errors="replace"):
            m = CALL.match(line)
            if m:
                t = int(m.group(2)) * 3600 + int(m.group(3)) * 60 + float(m.group(4))
                data = bytes(m.group(7), "latin1").decode("unicode_escape", errors="replace")
                out.append((t, i, m.group(5), int(m.group(6)), data))
    return sorted(out)


def lags(events):
    watching, deleted, found = {}, {}, []
    for t, w, op, fd, data in events:
        if op == "sendto":
            try:
                body = json.loads(data.split("\r\n\r\n", 1)[-1])
            except ValueError:
                continue
            if data.startswith("POST /v3/watch"):
                watching[(w, fd)] = base64.b64decode(body["create_request"]["key"])
            elif data.startswith("POST /v3/kv/txn"):
                for step in body.get("success", []):
                    if "request_delete_range" in step:
                        deleted[base64.b64decode(step["request_delete_range"]["key"])] = t
        elif (w, fd) in watching and '"events"' in data:
            k = watching.pop((w, fd))
            if k in deleted:
                found.append((t - deleted[k]) * 1000)
    return found


def main():
    args = sys.argv[1:]
    if "-h" in args or "--help" in args:
        print(__doc__)
        return
    build = args[0] if args else "build"
    tmp = tempfile.mkdtemp(prefix="dlock-watch-lag-")
    etcd, _log, url = start_etcd(tmp)
    try:
        run(build, args[1:], tmp, url)
        found = lags(calls(tmp))
    finally:
        stop([etcd])
    shutil.rmtree(tmp, ignore_errors=True)
    late = sorted(x for x in found if x > 20)
    print(f"{len(found)} deletion events matched; median {statistics.median(found):.2f} ms "
          f"from the delete's send to the event")
    print(f"{len(late)} later than 20 ms: " + ", ".join(f"{x:.0f}" for x in late[-20:]))


if __name__ == "__main__":
    main()
