// SPDX-License-Identifier: BSD-3-Clause
// The peers worker (../shared/peers/SCENARIOS.md, "Worker contract") for
// Apache Curator's InterProcessMutex (Debian's libcurator-recipes-java), so
// that bench/zk-vs-curator.py can run S1 and S3 with it beside dlock's
// ZooKeeper backend on the same member (issue 41). Compiled by that script:
//
//   javac -cp $(JARS) -d DIR bench/java/CuratorMutexWorker.java
//   java -cp DIR:$(JARS) CuratorMutexWorker mode=cycle|contend url=zk://H:P key=K
//        start=EPOCH ttl_ms=10000 [warmup=0.5 duration=5]
//        [target=2000 max_time=30 ctr=F holder=F] lat=F out=F
//
// One CuratorFramework (its session timeout ttl_ms, as dlock's session is
// the lease of its holds) and one InterProcessMutex per process on the path
// "/" + key, reused for every cycle: acquire (a protected ephemeral
// sequential node, the children read, a watch on the predecessor when
// there is one) and release (the delete). retry= is accepted and ignored.
// The JVM's start and the connection come before `start`, outside every
// figure.

import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;

public final class CuratorMutexWorker {
    private static double wall() {
        return System.currentTimeMillis() / 1e3;
    }

    private static void die(String msg) {
        System.err.println("curator-worker: " + msg);
        System.exit(2);
    }

    private static double num(Map<String, String> a, String k, String def) {
        String v = a.getOrDefault(k, def);
        try {
            return Double.parseDouble(v);
        } catch (NumberFormatException e) {
            die(k + "=" + v + ": not a number");
            return 0;
        }
    }

    private static void sleepUntil(double t) throws InterruptedException {
        double d = t - wall();
        if (d > 0)
            Thread.sleep((long) (d * 1e3));
    }

    // The shared 16-byte decimal counter (read, +1, write), as every peer does it.
    private static int increment(RandomAccessFile ctr) throws Exception {
        byte[] buf = new byte[16];
        ctr.seek(0);
        ctr.readFully(buf);
        int c = Integer.parseInt(new String(buf, StandardCharsets.US_ASCII).trim()) + 1;
        ctr.seek(0);
        ctr.write(String.format("%-15d\n", c).getBytes(StandardCharsets.US_ASCII));
        return c;
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> a = new HashMap<>();
        for (String s : argv) {
            int i = s.indexOf('=');
            if (i > 0)
                a.put(s.substring(0, i), s.substring(i + 1));
        }
        String url = a.getOrDefault("url", "");
        if (!url.startsWith("zk://"))
            die("url=" + url + ": expected zk://host:port[,host:port]");
        String connect = url.substring(5);
        String path = "/" + a.getOrDefault("key", "bench");
        int ttlMs = (int) num(a, "ttl_ms", "10000");
        double start = num(a, "start", "0");
        CuratorFramework cf = CuratorFrameworkFactory.newClient(connect, ttlMs, 5000,
                new ExponentialBackoffRetry(10, 3));
        cf.start();
        if (!cf.blockUntilConnected(10, java.util.concurrent.TimeUnit.SECONDS))
            die("no connection to " + connect);
        InterProcessMutex m = new InterProcessMutex(cf, path);
        // prime: one cycle on a private path (the connection, the parents)
        InterProcessMutex pm = new InterProcessMutex(cf, path + "-prime-" + ProcessHandle.current().pid());
        pm.acquire();
        pm.release();

        int n = 0, acqFail = 0, relFail = 0, errors = 0, viol = 0;
        Double tTarget = null;
        List<Long> lat = new ArrayList<>();
        boolean late = wall() > start;
        sleepUntil(start);
        double elapsed;
        if (a.getOrDefault("mode", "cycle").equals("cycle")) {
            double warmup = num(a, "warmup", "0.5"), duration = num(a, "duration", "5");
            while (wall() < start + warmup) {
                m.acquire();
                m.release();
            }
            long t0 = System.nanoTime(), end = t0 + (long) (duration * 1e9);
            while (System.nanoTime() < end) {
                long ta = System.nanoTime();
                try {
                    m.acquire();
                } catch (Exception e) {
                    acqFail++;
                    errors++;
                    continue;
                }
                long dt = System.nanoTime() - ta;
                try {
                    m.release();
                } catch (Exception e) {
                    relFail++;
                }
                lat.add(dt);
                n++;
            }
            elapsed = (System.nanoTime() - t0) / 1e9;
        } else {
            int target = (int) num(a, "target", "2000");
            double maxTime = num(a, "max_time", "30");
            Path holder = Paths.get(a.get("holder"));
            try (RandomAccessFile ctr = new RandomAccessFile(a.get("ctr"), "rw")) {
                while (wall() < start + maxTime) {
                    long ta = System.nanoTime();
                    m.acquire();
                    long dt = System.nanoTime() - ta;
                    boolean own = true;
                    try {
                        Files.createFile(holder);
                    } catch (FileAlreadyExistsException e) {
                        viol++;
                        own = false;
                    }
                    int c = increment(ctr);
                    if (c == target)
                        tTarget = wall();
                    if (own)
                        Files.delete(holder);
                    try {
                        m.release();
                    } catch (Exception e) {
                        relFail++;
                    }
                    lat.add(dt);
                    n++;
                    if (c >= target)
                        break;
                }
            }
            elapsed = wall() - start;
        }
        double tEnd = wall();
        cf.close();
        StringBuilder b = new StringBuilder();
        for (long x : lat)
            b.append(x).append('\n');
        if (a.containsKey("lat"))
            Files.write(Paths.get(a.get("lat")), b.toString().getBytes(StandardCharsets.US_ASCII));
        String json = String.format(java.util.Locale.ROOT,
                "{\"n\": %d, \"elapsed_s\": %.6f, \"acq_fail\": %d, \"giveups\": 0, \"rel_fail\": %d, "
                        + "\"errors\": %d, \"viol\": %d, \"t_target\": %s, \"t_end\": %.6f, \"late\": %s}\n",
                n, elapsed, acqFail, relFail, errors, viol,
                tTarget == null ? "null" : String.format(java.util.Locale.ROOT, "%.6f", tTarget), tEnd,
                late ? "true" : "false");
        if (a.containsKey("out"))
            Files.write(Paths.get(a.get("out")), json.getBytes(StandardCharsets.US_ASCII));
        else
            System.out.print(json);
    }
}
