#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""S1 and S3 of the peers benchmark (../shared/peers/SCENARIOS.md) on the
etcd backend beside Redis, in one run, with dlock's peers worker, and etcd's
own Go lock (concurrency.Mutex on a Session, bench/go/etcd_mutex_worker.go)
as a peer on the same etcd member.

Usage: bench/etcd-vs-redis.py [BUILD_DIR] [--rounds N] [--s1-only] [--base BUILD_DIR]

When BUILD_DIR has the etcd backend's gRPC transport
(-DDLOCK_WITH_ETCD_GRPC), the rows etcd-grpc and etcd-session-grpc are
the etcd and etcd-session workers with DLOCK_ETCD_TRANSPORT=grpc.

When BUILD_DIR/bench/etcd-transport-probe was built (bench/CMakeLists.txt
says what it needs), its gRPC and gateway rows run S1 too: Go's Mutex
cycle, the same requests, over each transport (bench/etcd-transport/).

The Go worker is built into BUILD_DIR/bench/etcd-go-worker when it is
missing or older than its source, in GOPATH mode against Debian's etcd 3.4
client (apt-get install golang-go golang-etcd-server-dev); without them its
rows are left out, with a note.

Starts one redis-server and one etcd member (Debian's etcd-server) on free
127.0.0.1 ports in a temp dir, stops exactly those processes at the end.
Redis, etcd and Go's Mutex rounds alternate (N each, default 2), so a
drift of this VM's speed hits all alike. Per round:

  S1  1 worker, acquire + release on one key: 0.5 s warm-up, 5 s measured;
      cycles/s and acquire latency p50/p99
  S3  4 workers, one key, blocking acquire / critical section / release
      until 2000 sections in total or 30 s; sections/s (2000 / time to
      reach it), wait-to-acquire p50/p99 and the longest wait (ms)

The lock TTL is 10 s in both, as in the peers contract. dlock's locks are
plain ones (a lease per acquire on etcd); the row etcd-session is the same
worker with DLOCK_AUTO_RENEW (renew=1: on etcd the client's session, one
lease per TTL, as Go's Mutex on a Session). --base BUILD_DIR adds that row
for another build's worker (etcd-session@base: e.g. main's, a lease per
acquire), and etcd-session-grpc@base when that build has the gRPC
transport. --s1-only leaves S3 out.

After each etcd S1 the requests etcd served per cycle are printed, from its
/metrics (grpc_server_handled_total by method: the HTTP/JSON gateway hands
every request to its gRPC server): Txn, Put, DeleteRange, LeaseGrant and
LeaseRevoke are the writes (Go's Mutex deletes its key with DeleteRange).
"""
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request

from peers_lib import free_port, pct, run_workers, s3, start_etcd, stop, wait_until


def start_servers(tmp):
    rport = free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(rport), "--bind", "127.0.0.1",
                              "--save", "", "--appendonly", "no", "--dir", tmp],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        etcd, log, eurl = start_etcd(tmp)
    except BaseException:
        stop([redis])
        raise
    if not wait_until(lambda: subprocess.run(
            ["redis-cli", "-p", str(rport), "ping"], capture_output=True).stdout.strip() == b"PONG"):
        stop([redis, etcd])
        raise SystemExit("redis-server did not start")
    return (redis, etcd, log), f"redis://127.0.0.1:{rport}", eurl


def stop_servers(procs):
    redis, etcd, log = procs
    stop([redis, etcd])
    log.close()


def go_worker(build):
    """The Go Mutex worker, built when missing or stale; None without Go."""
    here = os.path.dirname(os.path.abspath(__file__))
    src = os.path.join(here, "go", "etcd_mutex_worker.go")
    out = os.path.join(build, "bench", "etcd-go-worker")
    if os.path.exists(out) and os.path.getmtime(out) >= os.path.getmtime(src):
        return out
    env = dict(os.environ, GO111MODULE="off", GOPATH="/usr/share/gocode",
               GOCACHE=os.path.join(tempfile.gettempdir(), "dlock-go-cache"))
    try:
        subprocess.run(["go", "build", "-o", out, src], check=True, env=env)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"note: no Go Mutex peer ({e})", file=sys.stderr)
        return None
    return out


METHODS = ("Txn", "Put", "DeleteRange", "LeaseGrant", "LeaseRevoke", "LeaseKeepAlive", "Range")


def served(url):
    """etcd's count of the requests it served, by gRPC method."""
    if not url.startswith("etcd://"):
        return None
    text = urllib.request.urlopen("http://" + url[len("etcd://"):] + "/metrics").read().decode()
    n = dict.fromkeys(METHODS, 0)
    for line in text.splitlines():
        if line.startswith("grpc_server_handled_total{"):
            for m in METHODS:
                if f'grpc_method="{m}"' in line:
                    n[m] += int(float(line.rsplit(" ", 1)[1]))
    return n


def s1(worker, tmp, url, tag, extra=()):
    before = served(url)
    _, res, lat = run_workers(worker, tmp, url, "cycle", 1, tag,
                              ["warmup=0.5", "duration=5", *extra])
    after = served(url)
    r = res[0]
    if before is not None:
        # the warm-up's and priming cycles are not in r["n"]: a few more
        # cycles than counted, so each figure is a hair high
        per = {m: (after[m] - before[m]) / r["n"] for m in METHODS}
        print(f"{tag}: per cycle " + " ".join(f"{m} {v:.2f}" for m, v in per.items()),
              file=sys.stderr)
    return (r["n"] / r["elapsed_s"], pct(lat, 50) / 1e3, pct(lat, 99) / 1e3,
            r["viol"] + r["errors"], max(lat, default=0) / 1e6)


def grpc_built(build):
    """Whether the build has the etcd backend's gRPC transport."""
    try:
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            return any(line.strip() == "DLOCK_WITH_ETCD_GRPC:BOOL=ON" for line in f)
    except OSError:
        return False


def main():
    build = "build"
    rounds = 2
    args = sys.argv[1:]
    if "-h" in args or "--help" in args:
        print(__doc__)
        return
    base = None
    if "--base" in args:
        i = args.index("--base")
        base = args[i + 1]
        del args[i:i + 2]
    s1_only = "--s1-only" in args
    if s1_only:
        args.remove("--s1-only")
    if "--rounds" in args:
        i = args.index("--rounds")
        rounds = int(args[i + 1])
        del args[i:i + 2]
    if args:
        build = args[0]
    worker = os.path.join(build, "bench", "dlock-bench-worker")
    gow = go_worker(build)
    tmp = tempfile.mkdtemp(prefix="dlock-etcd-bench-")
    procs, rurl, eurl = start_servers(tmp)
    peers = [("redis", worker, rurl, []), ("etcd", worker, eurl, []),
             ("etcd-session", worker, eurl, ["renew=1"])]
    if base:
        bw = os.path.join(base, "bench", "dlock-bench-worker")
        peers.append(("etcd-session@base", bw, eurl, ["renew=1"]))
        if grpc_built(base):  # the base's session lock over gRPC too
            peers.append(("etcd-session-grpc@base", ["env", "DLOCK_ETCD_TRANSPORT=grpc", bw],
                          eurl, ["renew=1"]))
    if grpc_built(build):  # the same worker, its requests over gRPC
        grpc = ["env", "DLOCK_ETCD_TRANSPORT=grpc", worker]
        peers += [("etcd-grpc", grpc, eurl, []), ("etcd-session-grpc", grpc, eurl, ["renew=1"])]
    if gow:
        peers.append(("go-etcd", gow, eurl, []))
    probe = os.path.join(build, "bench", "etcd-transport-probe")
    probes = []
    if os.path.exists(probe):  # S1 only: the same requests as Go's Mutex
        probes = [(f"{t}-probe", probe, eurl, [f"transport={t}"]) for t in ("grpc", "http")]
    rows = []
    try:
        for r in range(rounds):
            for name, w, url, extra in peers:
                rows.append((name, "S1", r, *s1(w, tmp, url, f"{name}-s1-{r}", extra)))
                if not s1_only:
                    rows.append((name, "S3", r, *s3(w, tmp, url, f"{name}-s3-{r}", extra)))
            for name, w, url, extra in probes:
                rows.append((name, "S1", r, *s1(w, tmp, url, f"{name}-s1-{r}", extra)))
    finally:
        stop_servers(procs)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{'backend':17} scen round   rate/s   p50_us   p99_us  max_ms  viol+err")
    for name, sc, r, rate, p50, p99, bad, mx in sorted(rows, key=lambda x: (x[1], x[0], x[2])):
        print(f"{name:17} {sc:4} {r:5} {rate:8.1f} {p50:8.0f} {p99:8.0f} {mx:7.1f} {bad:9}")
    for sc in ("S1",) if s1_only else ("S1", "S3"):
        def med(n):
            v = sorted(x[3] for x in rows if x[0] == n and x[1] == sc)
            return v[len(v) // 2]
        print(f"{sc}: etcd / redis = {med('etcd') / med('redis'):.3f} "
              f"(median rates {med('etcd'):.1f} / {med('redis'):.1f} per s)")
        print(f"{sc}: etcd-session / etcd = {med('etcd-session') / med('etcd'):.3f} "
              f"(median rates {med('etcd-session'):.1f} / {med('etcd'):.1f} per s)")
        if base:
            print(f"{sc}: etcd-session / etcd-session@base = "
                  f"{med('etcd-session') / med('etcd-session@base'):.3f} (median rates "
                  f"{med('etcd-session'):.1f} / {med('etcd-session@base'):.1f} per s)")
        if gow:
            for n in ("etcd", "etcd-session", "etcd-grpc", "etcd-session-grpc",
                      "etcd-session@base", "etcd-session-grpc@base"):
                if not any(x[0] == n for x in rows):
                    continue
                print(f"{sc}: {n} / Go Mutex = {med(n) / med('go-etcd'):.3f} "
                      f"(median rates {med(n):.1f} / {med('go-etcd'):.1f} per s)")
        if gow and probes and sc == "S1":
            for p in ("grpc-probe", "http-probe"):
                print(f"S1: {p} / Go Mutex = {med(p) / med('go-etcd'):.3f} "
                      f"(median rates {med(p):.1f} / {med('go-etcd'):.1f} per s)")


if __name__ == "__main__":
    main()
