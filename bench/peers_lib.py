# SPDX-License-Identifier: BSD-3-Clause
"""What the consensus-store benchmarks share (bench/etcd-vs-redis.py,
bench/zk-vs-curator.py): free ports, the servers
they start, S1 and S3 of the peers contract (../shared/peers/SCENARIOS.md,
"Worker contract") with any worker that keeps it, and percentiles.

Every server is started on a free loopback port in the caller's temp dir
and stopped by its Popen handle (by pid)."""
import json
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    """A loopback port below the ephemeral range (scripts/free-port)."""
    out = subprocess.run([sys.executable, os.path.join(HERE, "..", "scripts", "free-port")],
                         check=True, capture_output=True, text=True)
    return int(out.stdout)


def wait_until(cond, timeout=20.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return False


def pct(samples, p):
    if not samples:
        return float("nan")
    s = sorted(samples)
    return s[max(0, min(len(s) - 1, int(round(p / 100.0 * len(s) + 0.5)) - 1))]


def start_etcd(tmp):
    """One etcd member (Debian's etcd-server), its data on disk: (Popen,
    log file, etcd:// URL)."""
    eport, pport = free_port(), free_port()
    log = open(os.path.join(tmp, "etcd.log"), "w")
    etcd = subprocess.Popen(
        ["etcd", "--name", "m0", "--data-dir", os.path.join(tmp, "etcd"),
         "--listen-client-urls", f"http://127.0.0.1:{eport}",
         "--advertise-client-urls", f"http://127.0.0.1:{eport}",
         "--listen-peer-urls", f"http://127.0.0.1:{pport}",
         "--initial-advertise-peer-urls", f"http://127.0.0.1:{pport}",
         "--initial-cluster", f"m0=http://127.0.0.1:{pport}",
         "--logger", "zap", "--log-level", "warn"], stdout=log, stderr=log)
    if not wait_until(lambda: subprocess.run(
            ["etcdctl", f"--endpoints=127.0.0.1:{eport}", "endpoint", "health"],
            capture_output=True).returncode == 0):
        raise SystemExit("etcd did not start")
    return etcd, log, f"etcd://127.0.0.1:{eport}"


def zk_ruok(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"ruok")
            return s.recv(4) == b"imok"
    except OSError:
        return False


def start_zk(tmp):
    """One ZooKeeper member (Debian's zookeeper package), standalone, as
    it ships: tickTime 2000 ms, data and its transaction log on disk with
    forced syncs. (Popen, log file, zk:// URL)."""
    port = free_port()
    data = os.path.join(tmp, "zk")
    os.makedirs(data, exist_ok=True)
    conf = os.path.join(tmp, "zoo.cfg")
    with open(conf, "w") as f:
        f.write(f"tickTime=2000\ndataDir={data}\nclientPort={port}\n"
                "clientPortAddress=127.0.0.1\nmaxSessionTimeout=60000\n"
                "admin.enableServer=false\n4lw.commands.whitelist=ruok\n")
    log = open(os.path.join(tmp, "zk.log"), "w")
    zk = subprocess.Popen(
        ["java", "-Xmx256m", "-cp", "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar",
         f"-Dzookeeper.log.dir={tmp}", "-Dzookeeper.root.logger=WARN,CONSOLE",
         "org.apache.zookeeper.server.ZooKeeperServerMain", conf], stdout=log, stderr=log)
    if not wait_until(lambda: zk_ruok(port), 60):
        zk.kill()
        raise SystemExit(f"ZooKeeper did not start (see {tmp}/zk.log)")
    return zk, log, f"zk://127.0.0.1:{port}"


def stop(procs):
    """Terminate each Popen (SIGKILL a straggler after 10 s)."""
    for p in procs:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def run_workers(worker, tmp, url, mode, n, tag, extra):
    """n workers (worker: a program, or an argv list to which the args are
    added) in mode on one key, started together 1.5 s from now (4 s for a
    JVM): (start, results, latency samples in ns)."""
    worker = [worker] if isinstance(worker, str) else worker
    start = time.time() + (4.0 if os.path.basename(worker[0]) == "java" else 1.5)
    key = f"bench-{tag}-{os.getpid()}"
    procs, outs, lats = [], [], []
    ctr, holder = os.path.join(tmp, f"{tag}.ctr"), f"/dev/shm/dlock-bench-{tag}-{os.getpid()}"
    with open(ctr, "w") as f:
        f.write("0".ljust(15) + "\n")
    for i in range(n):
        out, lat = os.path.join(tmp, f"{tag}.{i}.out"), os.path.join(tmp, f"{tag}.{i}.lat")
        args = [*worker, f"mode={mode}", f"url={url}", f"key={key}", f"start={start:.6f}",
                "ttl_ms=10000", f"out={out}", f"lat={lat}", *extra]
        if mode == "contend":
            args += [f"ctr={ctr}", f"holder={holder}", "target=2000", "max_time=30"]
        procs.append(subprocess.Popen(args))
        outs.append(out)
        lats.append(lat)
    for p in procs:
        if p.wait() != 0:
            raise SystemExit(f"{tag}: a worker failed")
    res = [json.load(open(o)) for o in outs]
    samples = [int(x) for lat in lats for x in open(lat).read().split()]
    return start, res, samples


def s1(worker, tmp, url, tag, extra=()):
    """One worker acquiring and releasing: (cycles/s, p50 µs, p99 µs,
    violations + errors, longest ms)."""
    _, res, lat = run_workers(worker, tmp, url, "cycle", 1, tag,
                              ["warmup=0.5", "duration=5", *extra])
    r = res[0]
    return (r["n"] / r["elapsed_s"], pct(lat, 50) / 1e3, pct(lat, 99) / 1e3,
            r["viol"] + r["errors"], max(lat, default=0) / 1e6)


def s3(worker, tmp, url, tag, extra=()):
    """Four workers on one key until 2000 sections: (sections/s, wait p50
    µs, p99 µs, violations + errors, longest wait ms)."""
    start, res, lat = run_workers(worker, tmp, url, "contend", 4, tag, ["retry=default", *extra])
    tt = [r["t_target"] for r in res if r["t_target"] is not None]
    total = sum(r["n"] for r in res)
    rate = 2000 / (min(tt) - start) if tt else total / (max(r["t_end"] for r in res) - start)
    return (rate, pct(lat, 50) / 1e3, pct(lat, 99) / 1e3,
            sum(r["viol"] + r["errors"] for r in res), max(lat, default=0) / 1e6)


def report(rows, pairs):
    """Print the rows (name, scenario, round, rate, p50, p99, bad, max) and,
    for each (a, b) in pairs, the ratio of a's median rate to b's."""
    print("peer          scen round   rate/s   p50_us   p99_us  max_ms  viol+err")
    for name, sc, r, rate, p50, p99, bad, mx in sorted(rows, key=lambda x: (x[1], x[0], x[2])):
        print(f"{name:13} {sc:4} {r:5} {rate:8.1f} {p50:8.0f} {p99:8.0f} {mx:7.1f} {bad:9}")
    for sc in sorted({x[1] for x in rows}):
        def med(n):
            v = sorted(x[3] for x in rows if x[0] == n and x[1] == sc)
            return v[len(v) // 2] if v else float("nan")
        for a, b in pairs:
            print(f"{sc}: {a} / {b} = {med(a) / med(b):.3f} "
                  f"(median rates {med(a):.1f} / {med(b):.1f} per s)")
