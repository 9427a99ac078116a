#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""S1 and S3 of the peers benchmark (../shared/peers/SCENARIOS.md) on
dlock's ZooKeeper backend beside Apache Curator's InterProcessMutex (the
Java worker bench/java/CuratorMutexWorker.java, Debian's
libcurator-recipes-java) on the same member, and beside dlock's etcd
backend on one etcd member, in one run (issue 41).

Usage: bench/zk-vs-curator.py [BUILD_DIR] [--rounds N]

Starts one ZooKeeper member (Debian's zookeeper, as it ships: tickTime
2 s, forced syncs to its log on disk) and one etcd member on free loopback
ports in a temp dir and stops exactly those processes at the end. The
Java worker is compiled into the temp dir with javac; without java, javac
or the jars (apt-get install default-jdk-headless libcurator-recipes-java)
its rows are left out, with a note. Rounds alternate peer by peer (N each,
default 2), so a drift of this VM's speed hits all alike:

  S1  1 worker, acquire + release on one key: 0.5 s warm-up, 5 s measured
  S3  4 workers, one key, until 2000 sections in total or 30 s: sections/s,
      the wait to acquire (p50, p99) and the longest wait

Every worker's lease is 10 s: dlock's zk:// session timeout (its default)
and Curator's session timeout, the etcd lock's TTL.
"""
import os
import shutil
import subprocess
import sys
import tempfile

from peers_lib import report, s1, s3, start_etcd, start_zk, stop

JARS = [f"/usr/share/java/{j}.jar" for j in (
    "curator-recipes", "curator-framework", "curator-client", "zookeeper", "zookeeper-jute",
    "guava", "slf4j-api", "slf4j-nop")]


def curator_worker(tmp):
    """The java argv of the compiled Curator worker, or None."""
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "java", "CuratorMutexWorker.java")
    missing = [p for p in ["/usr/bin/java", "/usr/bin/javac", *JARS] if not os.path.exists(p)]
    if missing:
        print(f"note: no Curator peer (missing {', '.join(missing)})", file=sys.stderr)
        return None
    cp = ":".join(JARS)
    out = os.path.join(tmp, "classes")
    subprocess.run(["javac", "-cp", cp, "-d", out, src], check=True)
    return ["java", "-Xmx256m", "-cp", f"{out}:{cp}", "CuratorMutexWorker"]


def main():
    build, rounds = "build", 2
    args = sys.argv[1:]
    if "--rounds" in args:
        i = args.index("--rounds")
        rounds = int(args[i + 1])
        del args[i:i + 2]
    if args:
        build = args[0]
    worker = [os.path.join(build, "bench", "dlock-bench-worker")]
    tmp = tempfile.mkdtemp(prefix="dlock-zk-bench-")
    procs, logs = [], []
    try:
        zk, zlog, zurl = start_zk(tmp)
        procs.append(zk), logs.append(zlog)
        etcd, elog, eurl = start_etcd(tmp)
        procs.append(etcd), logs.append(elog)
        peers = [("dlock-zk", worker, zurl), ("dlock-etcd", worker, eurl)]
        cw = curator_worker(tmp)
        if cw:
            peers.append(("curator", cw, zurl))
        rows = []
        for r in range(rounds):
            for name, w, url in peers:
                rows.append((name, "S1", r, *s1(w, tmp, url, f"{name}-s1-{r}")))
                rows.append((name, "S3", r, *s3(w, tmp, url, f"{name}-s3-{r}")))
    finally:
        stop(procs)
        for f in logs:
            f.close()
        shutil.rmtree(tmp, ignore_errors=True)
    pairs = [("dlock-zk", "dlock-etcd")]
    if cw:
        pairs.insert(0, ("dlock-zk", "curator"))
    report(rows, pairs)


if __name__ == "__main__":
    main()
