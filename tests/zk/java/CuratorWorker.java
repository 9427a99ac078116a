// SPDX-License-Identifier: BSD-3-Clause
// The Java side of dlock's Curator interop tests (tests/zk/test_zk_curator.c):
// Apache Curator's own recipes (Debian's libcurator-recipes-java) on the same
// ZooKeeper paths as dlock, driven line by line on stdin so that the JVM's
// start (seconds) stays out of every timing the test asserts.
//
// Usage: java -cp CLASSES:JARS CuratorWorker HOST:PORT[,...]
// It connects, says "ready", then answers one line per command:
//
//   acquire PATH TIMEOUT_MS      InterProcessMutex.acquire: "got T_NS CZXID" | "timeout T_NS"
//   queue PATH TIMEOUT_MS N      the same on a thread of its own; "queued" once PATH has N
//                                nodes in line (ours among them), then "got ..." | "timeout ..."
//   release PATH                 "released T_NS", T_NS taken before the delete is sent
//   children PATH                "children N": the nodes in PATH's line
//   contend PATH ROUNDS HOLD_MS HISTORY SLOT THREADS
//                                THREADS threads, each with a lock of its own, slots SLOT
//                                and up, ROUNDS times: acquire, an ENTER record, HOLD_MS,
//                                an EXIT record, release, in the chaos history file
//                                HISTORY (tests/chaos/history.h); "contended ERRORS"
//   rw read|write VERB PATH ...  the same verbs on an InterProcessReadWriteLock's read or
//                                write lock: "rw read acquire PATH TIMEOUT_MS", ...
//   sem N VERB PATH ...          the same on an InterProcessSemaphoreV2 of N leases, a
//                                lease each: "sem 2 acquire PATH TIMEOUT_MS", ...
//   select PATH ID N             a LeaderSelector of participant id ID on PATH, started;
//                                "selecting" once PATH has N nodes in line, then, when it
//                                leads, "leading T_NS CZXID" (it leads until abdicate)
//   abdicate PATH                its takeLeadership returns: "abdicated T_NS", T_NS taken
//                                before; the selector is closed
//   leader PATH                  LeaderSelector.getLeader(): "leader [ID] IS_LEADER"
//   quit
//
// T_NS is System.nanoTime(), CLOCK_MONOTONIC on Linux: the C side's clock.
// CZXID is the held node's create zxid, dlock's fence for the same node.

import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import java.util.concurrent.CountDownLatch;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.RetryOneTime;
import org.apache.zookeeper.data.Stat;

public final class CuratorWorker {
    // InterProcessMutex's node path is protected: a subclass reads it.
    static final class Mutex extends InterProcessMutex {
        Mutex(CuratorFramework c, String path) {
            super(c, path);
        }

        String node() {
            return getLockPath();
        }
    }

    // A lock of the worker's and the one thread that takes and gives it:
    // Curator's locks belong to the thread that acquired them.
    static final class Held {
        final InterProcessLock lock;
        final ExecutorService thread = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r);
            t.setDaemon(true);
            return t;
        });

        Held(InterProcessLock lock) {
            this.lock = lock;
        }
    }

    // A semaphore's lease as a lock: taken, given back.
    static final class SemLock implements InterProcessLock {
        final InterProcessSemaphoreV2 sem;
        volatile Lease lease;

        SemLock(CuratorFramework c, String path, int n) {
            sem = new InterProcessSemaphoreV2(c, path, n);
        }

        @Override
        public void acquire() throws Exception {
            lease = sem.acquire();
        }

        @Override
        public boolean acquire(long time, TimeUnit unit) throws Exception {
            lease = sem.acquire(time, unit);
            return lease != null;
        }

        @Override
        public void release() throws Exception {
            lease.close();
            lease = null;
        }

        @Override
        public boolean isAcquiredInThisProcess() {
            return lease != null;
        }
    }

    // A LeaderSelector that leads until told to abdicate.
    static final class Selector extends LeaderSelectorListenerAdapter {
        final String path;
        final CountDownLatch selecting = new CountDownLatch(1); // "selecting" said
        final CountDownLatch abdicate = new CountDownLatch(1);
        final CountDownLatch done = new CountDownLatch(1);
        LeaderSelector selector;

        Selector(String path) {
            this.path = path;
        }

        @Override
        public void takeLeadership(CuratorFramework c) throws Exception {
            try {
                long t = System.nanoTime();
                // Our node is the first in line: its czxid is the term's fence.
                List<String> kids = c.getChildren().forPath(path);
                kids.sort(Comparator.comparing(k -> k.substring(k.lastIndexOf("lock-") + 5)));
                Stat st = c.checkExists().forPath(path + "/" + kids.get(0));
                long czxid = st == null ? -1 : st.getCzxid();
                selecting.await(); // its answer first, then this line
                say("leading " + t + " " + czxid);
                abdicate.await();
            } finally {
                done.countDown();
            }
        }
    }

    private static CuratorFramework client;
    private static final Map<String, Held> locks = new HashMap<>();
    private static final Map<String, Selector> selectors = new HashMap<>();

    private static String select(String path, String id, int n) throws Exception {
        Selector s = new Selector(path);
        s.selector = new LeaderSelector(client, path, s);
        s.selector.setId(id);
        synchronized (selectors) {
            selectors.put(path, s);
        }
        s.selector.start();
        long end = System.nanoTime() + 10000 * 1000000L;
        while (children(path) < n && System.nanoTime() < end)
            Thread.sleep(5);
        say("selecting");
        s.selecting.countDown();
        return null;
    }

    private static String abdicate(String path) throws Exception {
        Selector s;
        synchronized (selectors) {
            s = selectors.remove(path);
        }
        long t = System.nanoTime();
        s.abdicate.countDown();
        s.done.await(10, TimeUnit.SECONDS);
        s.selector.close();
        return "abdicated " + t;
    }

    private static String leader(String path) throws Exception {
        LeaderSelector l = new LeaderSelector(client, path, new LeaderSelectorListenerAdapter() {
            @Override
            public void takeLeadership(CuratorFramework c) {
            }
        });
        Participant p = l.getLeader();
        return "leader [" + p.getId() + "] " + p.isLeader();
    }

    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static InterProcessLock newLock(String kind, String path) {
        if (kind.equals("mutex"))
            return new Mutex(client, path);
        if (kind.startsWith("sem:"))
            return new SemLock(client, path, Integer.parseInt(kind.substring(4)));
        InterProcessReadWriteLock rw = new InterProcessReadWriteLock(client, path);
        return kind.equals("read") ? rw.readLock() : rw.writeLock();
    }

    private static synchronized Held lockOf(String kind, String path) {
        return locks.computeIfAbsent(kind + " " + path, k -> new Held(newLock(kind, path)));
    }

    // The held node's czxid (the mutex names its node); 0 for a read or
    // write lock, whose node Curator keeps to itself (the history's check
    // skips a fence of 0).
    private static long czxid(InterProcessLock l) throws Exception {
        if (!(l instanceof Mutex))
            return 0;
        Stat st = client.checkExists().forPath(((Mutex) l).node());
        return st == null ? -1 : st.getCzxid();
    }

    private static String acquire(InterProcessLock l, long timeoutMs) throws Exception {
        if (!l.acquire(timeoutMs, TimeUnit.MILLISECONDS))
            return "timeout " + System.nanoTime();
        long t = System.nanoTime();
        return "got " + t + " " + czxid(l);
    }

    private static int children(String path) throws Exception {
        if (client.checkExists().forPath(path) == null)
            return 0;
        return client.getChildren().forPath(path).size();
    }

    private static void queue(Held h, String path, long timeoutMs, int n) throws Exception {
        h.thread.submit(() -> {
            try {
                say(acquire(h.lock, timeoutMs));
            } catch (Exception e) {
                say("error " + e);
            }
        });
        long end = System.nanoTime() + timeoutMs * 1000000L;
        while (children(path) < n && System.nanoTime() < end)
            Thread.sleep(5);
        say("queued");
    }

    // One chaos_rec (tests/chaos/history.h), 64 bytes, one write each.
    private static void note(FileOutputStream out, int type, int slot, int cs, long fence,
                             long a) throws Exception {
        ByteBuffer b = ByteBuffer.allocate(64).order(ByteOrder.LITTLE_ENDIAN);
        b.putInt(0x64436831).putShort((short) type).putShort((short) slot);
        b.putInt(1000 + slot).putInt(cs).putLong(System.nanoTime()).putLong(fence);
        b.putLong(a).putLong(0).putInt((int) ProcessHandle.current().pid());
        out.write(b.array());
    }

    // kind: the history's (0 exclusive, 1 shared, 2 a permit)
    private static int contendOne(InterProcessLock l, int rounds, long holdMs, String history,
                                  int slot, int kind) throws Exception {
        int errors = 0;
        try (FileOutputStream out = new FileOutputStream(history, true)) {
            for (int cs = 0; cs < rounds; cs++) {
                if (!l.acquire(30000, TimeUnit.MILLISECONDS)) {
                    errors++;
                    continue;
                }
                note(out, 1, slot, cs, czxid(l), kind); /* ENTER */
                Thread.sleep(holdMs);
                note(out, 2, slot, cs, 0, 0);                        /* EXIT */
                l.release();
            }
        }
        return errors;
    }

    // Each thread its own lock on path (a Curator lock is reentrant per
    // thread: one lock shared by threads would be held by one of them).
    private static int contend(String kind, String path, int rounds, long holdMs,
                               String history, int slot, int threads) throws Exception {
        AtomicInteger errors = new AtomicInteger();
        Thread[] t = new Thread[threads];
        for (int i = 0; i < threads; i++) {
            InterProcessLock l = newLock(kind, path);
            int s = slot + i;
            t[i] = new Thread(() -> {
                try {
                    int k = kind.equals("read") ? 1 : kind.startsWith("sem:") ? 2 : 0;
                    errors.addAndGet(contendOne(l, rounds, holdMs, history, s, k));
                } catch (Exception e) {
                    System.err.println("contend: " + e);
                    errors.incrementAndGet();
                }
            });
            t[i].start();
        }
        for (Thread x : t)
            x.join();
        return errors.get();
    }

    private static String run(String[] w) throws Exception {
        String kind = "mutex";
        int at = 0;
        if (w[0].equals("rw")) {
            kind = w[1];
            at = 2;
        } else if (w[0].equals("sem")) {
            kind = "sem:" + w[1];
            at = 2;
        }
        String verb = w[at], path = w.length > at + 1 ? w[at + 1] : "";
        switch (verb) {
        case "acquire": {
            Held h = lockOf(kind, path);
            long ms = Long.parseLong(w[at + 2]);
            return h.thread.submit(() -> acquire(h.lock, ms)).get();
        }
        case "queue":
            queue(lockOf(kind, path), path, Long.parseLong(w[at + 2]), Integer.parseInt(w[at + 3]));
            return null;
        case "release": {
            Held h = lockOf(kind, path);
            return h.thread.submit(() -> {
                long t = System.nanoTime();
                h.lock.release();
                return "released " + t;
            }).get();
        }
        case "children":
            return "children " + children(path);
        case "select":
            return select(path, w[at + 2], Integer.parseInt(w[at + 3]));
        case "abdicate":
            return abdicate(path);
        case "leader":
            return leader(path);
        case "contend":
            return "contended " + contend(kind, path, Integer.parseInt(w[at + 2]),
                                          Long.parseLong(w[at + 3]), w[at + 4],
                                          Integer.parseInt(w[at + 5]), Integer.parseInt(w[at + 6]));
        default:
            return "error unknown command " + verb;
        }
    }

    public static void main(String[] args) throws Exception {
        client = CuratorFrameworkFactory.newClient(args[0], 10000, 10000, new RetryOneTime(100));
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            say("error not connected");
            System.exit(1);
        }
        say("ready");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split("\\s+");
            if (w[0].equals("quit"))
                break;
            try {
                String answer = run(w);
                if (answer != null)
                    say(answer);
            } catch (Exception e) {
                say("error " + e.toString().replace('\n', ' '));
            }
        }
        client.close();
        System.exit(0);
    }
}
