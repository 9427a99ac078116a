/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock - distributed locks on Redis, for C.
 *
 * This is the only public header. Everything here is stable API; everything
 * else (src/) is private.
 *
 * Model
 * -----
 * A dlock_client is opened from one or more Redis URLs. With one URL every
 * lock lives on that node. With N > 1 URLs the client runs Redlock: a lock is
 * held when a majority of the N independent masters granted it within the
 * lock's validity. A redis-sentinel:// URL is one node whose primary is
 * found through Sentinel; with the cluster option the URLs are seeds of one
 * Redis Cluster, which is one node too. The lock API is the same in every
 * case; docs/deployment.md says what each mode guarantees.
 *
 * Opened from etcd:// URLs instead, the client keeps its locks in an etcd
 * cluster (etcd v3, the "etcd backend", when built with it): the same API,
 * error codes and guarantees, with exclusion resting on Raft consensus
 * rather than on clocks. docs/backends.md compares the two and lists what
 * differs (notes marked "etcd:" below). A lock NAME there is etcd's own
 * lock on the prefix NAME/ (the key layout of etcd's concurrency.Mutex),
 * so `etcdctl lock NAME` and dlock exclude each other; as in etcd, lock
 * "a"'s line also holds lock "a/b"'s keys (a holder of "a/b" keeps "a"
 * busy, not the reverse). Its shared and exclusive locks are keys
 * NAME/read/<ID> and NAME/write/<ID> in that line (etcd's recipe
 * RWMutex): a writer waits for every older key, a reader only for the
 * older keys that are not readers', so `etcdctl lock NAME` and readers
 * exclude each other too. A lock name that ends in "/read" or "/write"
 * or holds "/read/" is refused there (DLOCK_EINVAL): its keys would be
 * another name's readers' or writers' (no key tells them apart), so a
 * reader of NAME would not wait for a holder of NAME/read.
 *
 * A dlock_lock is a handle for one lock name, created from a client. It is
 * acquired, extended and released through the handle; the handle remembers
 * the owner token, the fencing token and when the lease ends.
 *
 * Errors
 * ------
 * Every function that can fail returns an int: DLOCK_OK (0) or one of the
 * negative DLOCK_E* codes below. dlock_strerror() turns any int into a static
 * string. A lock handle also keeps a detail message for its last failed call
 * (which node, what the server said): dlock_lock_errmsg(). There is no
 * thread-local "last error".
 *
 * Threads
 * -------
 * A dlock_client is safe to share between threads: every function taking a
 * client may be called concurrently (connections come from a per-node pool).
 * A dlock_lock handle is used by one thread at a time, with five exceptions
 * that are safe from any thread at any time: dlock_lock_cancel(),
 * dlock_lock_state_get(), dlock_lock_validity_ms(), dlock_lock_holder_ttl_ms()
 * and dlock_lock_name(). A client made with an event loop is the
 * exception to all of this: it and its handles are used from the loop's
 * thread only, dlock_lock_cancel() too ("Locks on an event loop").
 * Callbacks say which thread runs them. A blocking call (acquire, release,
 * extend, adopt, free) runs on the calling thread and uses about 30 KB of
 * its stack (the records of its requests live there, so it allocates
 * nothing per call and a release or free cannot fail for want of memory).
 *
 * Time
 * ----
 * All durations are milliseconds in int64_t. Validity is computed from the
 * monotonic clock only, counted from the moment the acquire was sent.
 */
#ifndef DLOCK_H
#define DLOCK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @name Version */
/**@{*/
#define DLOCK_VERSION_MAJOR 0
#define DLOCK_VERSION_MINOR 1
#define DLOCK_VERSION_PATCH 0
#define DLOCK_VERSION_STRING "0.1.0"
/** One comparable number: 0xMMmmpp. */
#define DLOCK_VERSION_NUMBER                                                   \
    ((DLOCK_VERSION_MAJOR << 16) | (DLOCK_VERSION_MINOR << 8) |                \
     DLOCK_VERSION_PATCH)
/**@}*/

#if defined(DLOCK_STATIC)
#define DLOCK_EXTERN(type) extern type
#elif defined(__GNUC__) || defined(__clang__)
#define DLOCK_EXTERN(type) extern __attribute__((visibility("default"))) type
#else
#define DLOCK_EXTERN(type) extern type
#endif

/** Pass as @p wait_ms to dlock_lock_acquire() to wait without a deadline. */
#define DLOCK_WAIT_FOREVER ((int64_t)-1)

/** Largest TTL accepted: about 24.8 days, so that any TTL plus slack fits
 *  the 32-bit millisecond arithmetic of every Redis version. */
#define DLOCK_TTL_MAX_MS ((int64_t)2147483647)

/** Longest lock name accepted, in bytes. */
#define DLOCK_NAME_MAX 65536

/** Length of the hexadecimal owner token dlock generates (128 bits). A fair
 *  lock's token after a wait on one node has 16 hex digits more (see
 *  dlock_lock_token()); DLOCK_TOKEN_MAX bounds every token. */
#define DLOCK_TOKEN_HEX_LEN 32

/** Longest token dlock_lock_adopt() accepts, in bytes. */
#define DLOCK_TOKEN_MAX 256

/**
 * Error codes. Every failing call returns one of these; each has a string
 * from dlock_strerror() and a name from dlock_errname().
 *
 * Which Redis errors map to which code:
 *   - NOAUTH, WRONGPASS, NOPERM, "invalid password",
 *     an ACL refusal inside a script ("ERR The user
 *     executing the script ...", "ERR ACL failure in
 *     script")                                        -> DLOCK_EAUTH
 *   - WRONGTYPE                                       -> DLOCK_EWRONGTYPE
 *   - READONLY from a Sentinel-managed primary (it was
 *     demoted; nothing ran)                            -> DLOCK_EIO
 *   - OOM, READONLY, MISCONF, NOREPLICAS, EXECABORT,
 *     NOSCRIPT after the EVAL fallback, any other ERR -> DLOCK_EREFUSED
 *   - a new connection refused at once ("ERR max number of clients
 *     reached", DENIED in protected mode): nothing ran -> DLOCK_EREFUSED
 *   - LOADING, BUSY, MASTERDOWN, TRYAGAIN, CLUSTERDOWN -> DLOCK_EBUSY
 *   - Redis Cluster: the master of the key's slot unreachable (nothing
 *     sent) while another cluster node answers CLUSTER SLOTS (a failover
 *     in flight, before the cluster says CLUSTERDOWN)  -> DLOCK_EBUSY
 *   - a reply of a shape dlock never produces          -> DLOCK_EPROTO
 */
typedef enum dlock_error {
    DLOCK_OK = 0,
    /** The lock is held by another owner (try-once acquire). */
    DLOCK_ENOTACQUIRED = -1,
    /** The wait deadline passed before the lock could be acquired. */
    DLOCK_ETIMEDOUT = -2,
    /** dlock_lock_cancel() interrupted the wait. */
    DLOCK_ECANCELED = -3,
    /** Release/extend: the key holds another owner's token (or count). */
    DLOCK_ENOTOWNER = -4,
    /** Release/extend: the key is gone; the lease had already ended. */
    DLOCK_EEXPIRED = -5,
    /** The watchdog found the lock lost; the handle no longer holds it. */
    DLOCK_ELOST = -6,
    /** Redlock: no majority of nodes could be reached in time (a
     *  majority failed, was silent or refused). A lock held by another
     *  owner with a minority of nodes down is DLOCK_ENOTACQUIRED. */
    DLOCK_ENOQUORUM = -7,
    /** An argument is invalid (NULL, empty, too long, out of range). */
    DLOCK_EINVAL = -8,
    /** The handle does not hold the lock (release before acquire, say). */
    DLOCK_ENOTHELD = -9,
    /** The node could not be reached; the command was not sent. */
    DLOCK_EIO = -10,
    /** The command was sent but no reply came in time, or the connection
     *  broke: the outcome is unknown. Never treated as success. */
    DLOCK_EUNKNOWN = -11,
    /** Authentication failed or the user lacks a permission. */
    DLOCK_EAUTH = -12,
    /** The key holds a value of another type than the lock mode uses. */
    DLOCK_EWRONGTYPE = -13,
    /** The server refused the command (OOM, READONLY, MISCONF, ...). */
    DLOCK_EREFUSED = -14,
    /** The server is temporarily unable to serve (LOADING, BUSY, ...). */
    DLOCK_EBUSY = -15,
    /** Out of memory in the client. */
    DLOCK_ENOMEM = -16,
    /** Not supported by this build or in this configuration
     *  (fair mode over several nodes; etcd:// or zk:// URLs in a build
     *  without that store; on etcd, an
     *  extend to another TTL of a handle whose lease other handles of its
     *  owner share (DLOCK_REENTRANT); on ZooKeeper, the calls
     *  its section of dlock_client_new() names). */
    DLOCK_ENOTSUP = -17,
    /** The server replied with something dlock never expects. */
    DLOCK_EPROTO = -18,
    /** TLS handshake or certificate verification failed: the server's
     *  certificate does not chain to the trusted CAs or does not name the
     *  host, the server refused our client certificate, or it closed the
     *  connection during the handshake. The detail message says which (for
     *  verification: "TLS certificate verification failed: " and OpenSSL's
     *  reason). Nothing was applied. A plain (non-TLS) Redis port
     *  usually answers a handshake with silence: that is DLOCK_EIO, "TLS
     *  handshake timed out", after connect_timeout_ms. On etcd (etcds://)
     *  the reason is curl's ("SSL certificate problem: ...", "no
     *  alternative certificate subject name matches ..."), and a member
     *  that ends a new session before answering (a client certificate it
     *  wanted or refused, under TLS 1.3) is this code too; the other
     *  members are tried first (docs/backends.md, "TLS"). */
    DLOCK_ETLS = -19,
    /** dlock_client_options.min_replicas: fewer replicas than asked
     *  acknowledged the acquire or extend within min_replicas_timeout_ms
     *  (WAIT). An acquire was undone (its key deleted) and fails; an
     *  extend ran on the primary but the handle keeps its old lease. Not
     *  retried by a waiting acquire. */
    DLOCK_ENOREPLICAS = -20
} dlock_error;

/** Static description of any code (unknown codes included); never NULL. */
DLOCK_EXTERN(const char *) dlock_strerror(int code);
/** Static symbolic name such as "DLOCK_ENOTOWNER"; "DLOCK_E?" if unknown. */
DLOCK_EXTERN(const char *) dlock_errname(int code);
/** 1 if @p code says the store could not answer now and the same call may
 *  succeed later with nothing changed: DLOCK_EIO (not reached),
 *  DLOCK_EUNKNOWN (no reply in time), DLOCK_EBUSY (LOADING, BUSY, a node
 *  that restarted too recently to vote) and DLOCK_ENOQUORUM (too few of
 *  those nodes answered). 0 for everything else: DLOCK_OK and the lock's
 *  own answers (DLOCK_ENOTACQUIRED, DLOCK_ETIMEDOUT, DLOCK_ENOTOWNER, ...:
 *  the store did answer), and failures that a retry alone does not mend
 *  (credentials, refusals, wrong types, TLS, bad arguments, memory). A
 *  waiting acquire rides out exactly these node errors; the dlock command
 *  exits 69 (EX_UNAVAILABLE) for them. */
DLOCK_EXTERN(int) dlock_error_is_transient(int code);
/** The library's version string at run time, e.g. "0.1.0". */
DLOCK_EXTERN(const char *) dlock_version(void);

/**
 * Parse a duration: "250ms", "30s", "5m", "1h", "1d", or a plain number of seconds
 * with an optional fraction ("1.5", like flock -w). Rounds to milliseconds.
 *
 * @param out_ms receives the duration in milliseconds; untouched on error.
 * @param text   NUL-terminated text.
 * @return DLOCK_OK, or DLOCK_EINVAL for NULL, empty, negative, malformed or
 *         overflowing input. Thread-safe.
 */
DLOCK_EXTERN(int) dlock_duration_parse(int64_t *out_ms, const char *text);

/* ------------------------------------------------------------------------ */
/** @name Client */
/**@{*/

typedef struct dlock_client dlock_client;

/** Severity of a message passed to a dlock_log_fn. */
typedef enum dlock_log_level {
    /** dlock works on, degraded (for example: polling instead of pub/sub). */
    DLOCK_LOG_WARN = 1
} dlock_log_level;

/**
 * Receives a message the library has for a person, once per condition and
 * client (not per call). So far: "pub/sub refused" when the server refuses
 * SUBSCRIBE (a Redis 7 ACL user without channel rights, `resetchannels`);
 * waiters of that client then poll with backoff up to retry_max_ms for the
 * rest of its life. Runs on whichever library thread noticed (the wake-up
 * thread for pub/sub), possibly with internal locks held: it must not block
 * and must not call into dlock. dlock writes to stderr only just before it
 * aborts, one line starting "dlock: ": on a bug (a failed pthread call) or
 * on misuse it detects and cannot survive (dlock_client_free() while lock
 * handles of the client exist). Everything else goes to a dlock_log_fn or
 * to the handles' detail messages.
 */
typedef void (*dlock_log_fn)(dlock_log_level level, const char *msg, void *arg);

/* ------------------------------------------------------------------------ */
/** @name Observing a client
 *  Hooks that report each event as it happens (dlock_observer) and a
 *  snapshot of counters and latency histograms (dlock_client_stats()).
 *  docs/observing.md names each quantity after OpenTelemetry's
 *  conventions and says how to export them. */
/**@{*/

/** How a hold ended (dlock_hold_event.how). */
typedef enum dlock_hold_end {
    /** dlock_lock_release() let go of the last hold, or dlock_lock_free()
     *  released a held handle (its answer not read); reason is 0. */
    DLOCK_HOLD_RELEASED = 1,
    /** The watchdog found the lock lost (on_lost runs next); reason is
     *  the dlock_lost_reason. */
    DLOCK_HOLD_LOST = 2,
    /** The store said the hold was gone when the handle next asked (an
     *  extend or a re-entry: not ours any more, or its lease had ended,
     *  a release that failed); reason is the dlock error code. */
    DLOCK_HOLD_ENDED = 3,
    /** dlock_lock_forget() dropped it without a word to the store. */
    DLOCK_HOLD_FORGOTTEN = 4
} dlock_hold_end;

/** What a node or the topology did (dlock_node_event.what). */
typedef enum dlock_node_what {
    /** A connection to the node could not be made (refused, unreachable,
     *  TLS or authentication failed) or broke before the reply; error says
     *  which. A cancel of the caller's own is no node event. */
    DLOCK_NODE_CONNECT_FAILED = 1,
    /** The node did not answer within the I/O timeout (or the connect
     *  timeout): a stalled or partitioned node. */
    DLOCK_NODE_TIMEOUT = 2,
    /** The node answered with an error reply that refuses the command
     *  (OOM, READONLY, LOADING, BUSY, an ACL's NOPERM, ...); error is
     *  DLOCK_EREFUSED, DLOCK_EBUSY or DLOCK_EAUTH. */
    DLOCK_NODE_REFUSED = 3,
    /** The Cluster slot map was learned again (after a redirect or a
     *  failed master; the client's first map is no change); node is the
     *  node that answered. */
    DLOCK_NODE_SLOTS_RELEARNED = 4,
    /** Sentinel named another master than the one the client used, and
     *  the client now talks to it; node is the new master. */
    DLOCK_NODE_FAILOVER_FOLLOWED = 5
} dlock_node_what;

/** An acquire, as dlock_observer.acquire_start and .acquire_end see it.
 *  Every event struct starts with its size: fields are only ever added at
 *  the end, and an observer reads a field only if size says it is there. */
typedef struct dlock_acquire_event {
    size_t size;         /**< sizeof the struct the library filled */
    const char *name;    /**< the lock's name, as given (no key_prefix) */
    const char *kind;    /**< "plain", "counted", "fair", "shared", ... */
    const char *backend; /**< "redis", "etcd" or "zookeeper" */
    int64_t wait_ms;     /**< the wait asked for: 0 a try, -1 for ever */
    /** From acquire_start to acquire_end (0 in acquire_start). */
    int64_t duration_ns;
    /** Tries sent: on Redis each attempt (fair mode: each look at the
     *  line), on etcd each read of the line. 0 when none was (a re-entry,
     *  which renews; an acquire refused before its first try). */
    unsigned attempts;
    /** DLOCK_OK, or the code the acquire returns (0 in acquire_start). */
    int result;
} dlock_acquire_event;

/** The end of a hold (dlock_observer.hold_end): once per hold, when the
 *  handle stops holding (not at each release of a counted lock that
 *  still holds). A set of names (dlock_lock_new_multi()) reports each of
 *  its names' holds, never one of its own. */
typedef struct dlock_hold_event {
    size_t size;
    const char *name;
    const char *kind;
    const char *backend;
    int64_t hold_ns;     /**< from the grant to this end */
    dlock_hold_end how;  /**< released, lost, ended or forgotten */
    int reason;          /**< see dlock_hold_end */
} dlock_hold_event;

/** One watchdog renewal round (dlock_observer.renewal_round). */
typedef struct dlock_renewal_event {
    size_t size;
    size_t locks;        /**< locks the round renewed */
    size_t renewed;      /**< confirmed (by a majority on Redlock) */
    size_t failed;       /**< not confirmed this round (no answer, or not ours) */
    size_t lost;         /**< found lost by this round (on_lost follows) */
    int64_t duration_ns; /**< from sending to the last answer */
    /** The least lease left among the round's locks when it was sent:
     *  how close renewal came to the lease's end (negative: past it;
     *  INT64_MAX when no lock's lease end is known). */
    int64_t lease_left_ns;
} dlock_renewal_event;

/** A node error or a topology change (dlock_observer.node_event). */
typedef struct dlock_node_event {
    size_t size;
    dlock_node_what what;
    const char *node; /**< "host:port" (or the unix socket path) */
    int error;        /**< the dlock error code, 0 for a topology change */
} dlock_node_event;

/** A waiting acquire woke up (dlock_observer.wakeup). Reported by every
 *  wait (the engine drives them all): pushed when a message (Redis) or a
 *  watch (etcd, ZooKeeper) woke it. */
typedef struct dlock_wakeup_event {
    size_t size;
    const char *name;
    /** 1: a wake-up message ended its sleep (pushed); 0: a look after a
     *  sleep that no message ended found the lock free. */
    int pushed;
} dlock_wakeup_event;

/** Version 1 has every hook below. */
#define DLOCK_OBSERVER_VERSION 1

/**
 * Callbacks a client calls on each event (dlock_client_options.observer).
 * Any of them may be NULL. The struct is copied by dlock_client_new();
 * what arg points to is not, and must stay valid until
 * dlock_client_free() returns (a hook may run until then).
 * With no observer each event costs one NULL test.
 *
 * Threads: acquire_start, acquire_end and wakeup run on the thread that
 * called the acquire; hold_end on the thread of the call that ended the
 * hold, or, for DLOCK_HOLD_LOST, on the watchdog's thread just before
 * on_lost; renewal_round on the watchdog's thread (on a Cluster, once per
 * master's round); node_event on whichever thread met the
 * node (a caller's, the watchdog's, the wake-up thread). Callbacks may run
 * on several threads at once and must be thread-safe. They run with
 * library mutexes held in some places: a callback must return quickly,
 * must not block, and must not call dlock functions that act on a lock or
 * a client (dlock_client_stats() is allowed). The event and its strings
 * live only for the call.
 */
typedef struct dlock_observer {
    unsigned int version; /**< DLOCK_OBSERVER_VERSION */
    void *arg;            /**< passed to every callback */
    void (*acquire_start)(void *arg, const dlock_acquire_event *ev);
    void (*acquire_end)(void *arg, const dlock_acquire_event *ev);
    void (*hold_end)(void *arg, const dlock_hold_event *ev);
    void (*renewal_round)(void *arg, const dlock_renewal_event *ev);
    void (*node_event)(void *arg, const dlock_node_event *ev);
    void (*wakeup)(void *arg, const dlock_wakeup_event *ev);
} dlock_observer;

/** Buckets of every dlock_histogram. */
#define DLOCK_STATS_BUCKETS 16
/** Their upper bounds in ms, inclusive (the last is +Inf): an initialiser
 *  for `static const double bounds[DLOCK_STATS_BUCKETS - 1]`. */
#define DLOCK_STATS_BOUNDS_MS                                                  \
    {                                                                          \
        1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000, 60000 \
    }

/** A latency histogram: bucket[i] counts values <= bound i of
 *  DLOCK_STATS_BOUNDS_MS and above bound i-1 (not cumulative); the last
 *  bucket counts the rest. */
typedef struct dlock_histogram {
    uint64_t count;
    uint64_t sum_us; /**< sum of the values, in microseconds */
    uint64_t bucket[DLOCK_STATS_BUCKETS];
} dlock_histogram;

/** What dlock_client_stats() fills: totals since the client was made. */
typedef struct dlock_stats {
    size_t size;                 /**< bytes the library filled */
    uint64_t acquires;           /**< acquires ended (dlock.acquires) */
    uint64_t acquires_granted;   /**< of them: DLOCK_OK */
    uint64_t acquires_busy;      /**< of them: DLOCK_ENOTACQUIRED or DLOCK_ETIMEDOUT */
    uint64_t acquires_failed;    /**< of them: any other error */
    uint64_t acquire_attempts;   /**< tries counted (dlock_acquire_event.attempts) */
    uint64_t holds_released;     /**< holds ended: DLOCK_HOLD_RELEASED */
    uint64_t holds_lost;         /**< DLOCK_HOLD_LOST */
    uint64_t holds_ended;        /**< DLOCK_HOLD_ENDED */
    uint64_t holds_forgotten;    /**< DLOCK_HOLD_FORGOTTEN */
    uint64_t renewal_rounds;     /**< watchdog rounds */
    uint64_t renewals;           /**< lock renewals confirmed */
    uint64_t renewal_failures;   /**< lock renewals not confirmed in a round */
    uint64_t node_errors;        /**< connect failures, timeouts, refusals */
    uint64_t topology_changes;   /**< slot maps relearned, failovers followed */
    uint64_t wakeups_pushed;     /**< dlock_wakeup_event with pushed 1 */
    uint64_t wakeups_looked;     /**< pushed 0 */
    dlock_histogram acquire_duration; /**< dlock.acquire.duration, every acquire */
    dlock_histogram hold_duration;    /**< dlock.hold.duration, every hold ended */
    dlock_histogram renewal_duration; /**< dlock.renewal.duration, every round */
} dlock_stats;

/**
 * A snapshot of the client's counters and histograms, kept always (each
 * event costs a few relaxed atomic additions). Each figure is exact, but
 * the snapshot is not taken at one instant: events that end while it is
 * read may be counted in some figures and not yet in others.
 *
 * @param client the client.
 * @param out    receives the figures; out->size is set to the bytes
 *               written.
 * @param size   sizeof(dlock_stats) as the caller knows it: a program
 *               built against an older header gets the fields it knows.
 * @return DLOCK_OK, or DLOCK_EINVAL for a NULL pointer or a size smaller
 *         than the first version's. Thread-safe; may be called from an
 *         observer callback.
 */
DLOCK_EXTERN(int)
dlock_client_stats(const dlock_client *client, dlock_stats *out, size_t size);

/**@}*/

/** @name Event loops
 *  dlock runs its network work on an event loop it does not own: a client
 *  made with dlock_client_options.loop set ("a looped client") does
 *  everything on the application's loop (libuv, libevent, a hand-written
 *  epoll or poll loop), with no thread of its own (zk:// excepted: its
 *  session thread, see dlock_client_new()), and its locks are
 *  taken and let go with the _start verbs (dlock_lock_acquire_start()),
 *  whose callbacks run from the loop. The loop is reached through four
 *  hooks, as hiredis's async context reaches its loop through its `ev`
 *  hooks: watch an fd for reading or writing, and set a timer. An adapter
 *  fills them once for a loop library (`<dlock/libuv.h>` for libuv,
 *  `<dlock/libevent.h>` for libevent 2.1, and `<dlock/poll.h>` for a
 *  hand-written poll() or epoll loop ship with dlock, header-only); the
 *  records they are handed,
 *  dlock_io and dlock_timer, live inside dlock's own objects and are read
 *  through the functions below.
 *
 *  Rules an adapter keeps (dlock relies on them):
 *  - Every hook is called on the loop's thread, never from a callback
 *    of the adapter's own making other than those below.
 *  - dlock_io_ready() and dlock_timer_fire() are called from the loop,
 *    never inside the hook call that set the record up (a timer due now
 *    fires at the loop's next turn).
 *  - A callback may set, change or clear any record, its own included,
 *    and may free the memory a record lives in after clearing it: once
 *    io_clear() or timer_clear() returned, the adapter touches the record
 *    no more (its watcher may live on, as libuv's uv_close() needs, but
 *    must not call back).
 *  - io_set() is called again when the fd or the events of a set record
 *    change; timer_set() again re-arms. dlock never clears a record it
 *    did not set.
 *  - A timer is a one-shot: once fired it is no longer set, and dlock
 *    does not clear it (it may free it inside dlock_timer_fire()), so the
 *    adapter lets go of its watcher for it, and sets the slot to NULL,
 *    before calling dlock_timer_fire().
 *  Each record has one pointer-sized slot for the adapter's own use
 *  (dlock_io_slot(), dlock_timer_slot()): NULL while the record is not
 *  set, and dlock never touches it.
 */
/**@{*/

/** An fd dlock waits on (an adapter's record, see above). */
typedef struct dlock_io dlock_io;
/** A timer of dlock's (an adapter's record, see above). */
typedef struct dlock_timer dlock_timer;

/** dlock_io events: what dlock_io_events() asks for and what
 *  dlock_io_ready() reports. DLOCK_IO_ERROR is reported only (the fd
 *  failed or hung up; a reader still sees DLOCK_IO_READ and reads the end
 *  of the stream). */
enum dlock_io_event {
    DLOCK_IO_READ = 1,
    DLOCK_IO_WRITE = 2,
    DLOCK_IO_ERROR = 4
};

/** Fields are only ever added at the end, each addition bumping this. */
#define DLOCK_LOOP_VERSION 1

/** The hooks an adapter fills (see the rules above). Copied by
 *  dlock_client_new(): only what @p data points to must live as long as
 *  the client. Each hook gets @p data first. */
typedef struct dlock_loop {
    unsigned int version; /**< DLOCK_LOOP_VERSION */
    void *data;           /**< the adapter's, passed to every hook */
    /** Watch dlock_io_fd(io) for dlock_io_events(io) from now on (start,
     *  or the fd or the events changed). DLOCK_OK, or DLOCK_ENOMEM (the
     *  adapter could not allocate its watcher; the request it belongs to
     *  fails with that code). */
    int (*io_set)(void *data, dlock_io *io);
    /** Stop watching it. */
    void (*io_clear)(void *data, dlock_io *io);
    /** Arm (or re-arm) the timer to fire in dlock_timer_delay_ms(t)
     *  milliseconds (0: at the loop's next turn). DLOCK_OK or
     *  DLOCK_ENOMEM, as io_set. A refused timer due now is work dlock
     *  deferred to the next turn, which is then lost (a callback that
     *  never comes): an adapter should keep one in reserve rather than
     *  refuse it (the shipped adapters allocate a watcher per timer and
     *  refuse only when malloc() fails). */
    int (*timer_set)(void *data, dlock_timer *t);
    /** Disarm it. */
    void (*timer_clear)(void *data, dlock_timer *t);
} dlock_loop;

/** The fd to watch. */
DLOCK_EXTERN(int) dlock_io_fd(const dlock_io *io);
/** What to watch it for: DLOCK_IO_READ, DLOCK_IO_WRITE or both. */
DLOCK_EXTERN(unsigned int) dlock_io_events(const dlock_io *io);
/** The adapter, from the loop: these @p events (DLOCK_IO_*) happened on
 *  the fd. dlock may clear or change the record inside. */
DLOCK_EXTERN(void) dlock_io_ready(dlock_io *io, unsigned int events);
/** The adapter's slot in the record (see above). */
DLOCK_EXTERN(void **) dlock_io_slot(dlock_io *io);

/** Milliseconds from now until the timer is due, rounded up, 0 if due
 *  already (read it in timer_set: it changes with the clock). */
DLOCK_EXTERN(uint64_t) dlock_timer_delay_ms(const dlock_timer *t);
/** The adapter, from the loop: the timer is due. One firing per
 *  timer_set(); dlock may set it again inside (it does when the timer
 *  came early by the loop's clock, as libuv's millisecond clock, cached
 *  per turn, makes it). */
DLOCK_EXTERN(void) dlock_timer_fire(dlock_timer *t);
/** The adapter's slot in the record (see above). */
DLOCK_EXTERN(void **) dlock_timer_slot(dlock_timer *t);

/**@}*/

/** Version 1 is dlock 0.1.0's struct (up to wakeups); version 2 added
 *  key_prefix, username, password, on_log, log_arg and the tls* fields;
 *  version 3 min_replicas, min_replicas_timeout_ms and cluster; version 4
 *  observer; version 5 identity and identity_text; version 6 loop. Versions 1 to 5
 *  are still accepted. */
#define DLOCK_CLIENT_OPTIONS_VERSION 6

/** Client options. Initialise with DLOCK_CLIENT_OPTIONS_INIT (or
 *  dlock_client_options_init()) and change what you need.
 *
 *  Versions: fields are only ever added at the end, and each addition bumps
 *  DLOCK_CLIENT_OPTIONS_VERSION. A program built against an older header
 *  passes its older version number; the library reads only the fields that
 *  version had and uses the defaults for the rest (tests/integration/
 *  test_options_abi.c lays out a 0.1.0 struct to check it). */
typedef struct dlock_client_options {
    unsigned int version; /**< DLOCK_CLIENT_OPTIONS_VERSION */
    /** TCP/unix connect timeout, including AUTH and SELECT. Default 1000. */
    int connect_timeout_ms;
    /** How long to wait for a reply after sending. Default 1000. Redlock
     *  acquires use min(io_timeout_ms, ttl/10) per node. An acquire whose
     *  outcome is unknown spends up to this long again sending the release
     *  that undoes it. */
    int io_timeout_ms;
    /** Idle connections kept per node for reuse (etcd: idle HTTP
     *  connections kept for the client's members). Default 4. A looped
     *  client's requests to a single node or a Redlock node share one
     *  connection instead (see dlock_lock_acquire_start()). */
    int pool_size;
    /** Redlock clock-drift factor. Default 0.01 (drift = ttl*f + 2 ms). */
    double drift_factor;
    /** Redlock restart rule: when > 0, a node whose uptime is below this
     *  many ms does not count towards a majority. Set it to your maximum TTL
     *  when nodes run without persistence. Default 0 (off). */
    int64_t min_node_uptime_ms;
    /** Wake waiters with pub/sub on release (1) or only poll (0).
     *  Default 1. With one node (not a Redis Cluster), a release of a
     *  plain, reentrant or writer's lock wakes one waiter (a waiter list
     *  in Redis, docs/waiting.md), not every waiting process; a contended plain lock
     *  stays with a holder that takes it again at once for a 1 ms run and
     *  is then handed to the longest waiter (docs/waiting.md, "Runs and
     *  turns"). A subscribed waiter still looks every 200 ms, so a holder
     *  that publishes nothing (another library's lock on the same key) is
     *  seen within 250 ms of its release. A release whose PUBLISH the
     *  server refuses still succeeds; a refused SUBSCRIBE makes waiters
     *  poll (see on_log). */
    int wakeups;
    /* --- version 2 --- */
    /** Namespace: prepended to every lock name to make its Redis key (the
     *  helper keys and the wake-up channel follow the key), e.g. "lock:"
     *  turns lock "x" into key "lock:x". Copied by dlock_client_new();
     *  at most DLOCK_KEY_PREFIX_MAX bytes. Default NULL (no prefix: the
     *  key is the name). The key layout and the ACL rules a
     *  least-privilege user needs are in docs/design.md. */
    const char *key_prefix;
    /** ACL user for every node, overriding a user in the URLs; NULL keeps
     *  the URLs'. Copied by dlock_client_new(). Default NULL. */
    const char *username;
    /** Password for every node, overriding a password in the URLs; NULL
     *  keeps the URLs'. Keeps the secret out of URL strings (and so out
     *  of `ps` and log lines that print a URL). Copied by
     *  dlock_client_new(). Default NULL. */
    const char *password;
    /** Messages for a person (see dlock_log_fn); NULL drops them.
     *  Default NULL. */
    dlock_log_fn on_log;
    void *log_arg;
    /** TLS for every node, as if each redis:// URL were rediss:// (like
     *  redis-cli --tls), and each etcd:// URL etcds://. unix:// URLs are
     *  refused with it (DLOCK_EINVAL) rather than silently left in plain
     *  text. The tls_* options below apply to Redis and etcd alike.
     *  Default 0. */
    int tls;
    /** PEM file of CA certificates the servers' certificates must chain
     *  to. With neither this nor tls_ca_dir, the system store is used.
     *  The tls_* paths are read by dlock_client_new() (they need not live
     *  longer; on etcd, libcurl reads the files again for each new
     *  connection, so they must stay readable). Default NULL. */
    const char *tls_ca_file;
    /** Directory of hashed CA certificates (c_rehash), like tls_ca_file.
     *  Default NULL. */
    const char *tls_ca_dir;
    /** Client certificate (PEM, may hold a chain) for servers that ask for
     *  one (Redis tls-auth-clients, etcd --client-cert-auth); needs
     *  tls_key_file. Default NULL. */
    const char *tls_cert_file;
    /** Private key (PEM) of tls_cert_file. Default NULL. */
    const char *tls_key_file;
    /** Name sent as SNI and expected in every server's certificate,
     *  instead of each URL's host (useful when connecting by IP address to
     *  a server whose certificate has a name; on etcd the request names it
     *  and the connection still goes to the URL's host). Default NULL. */
    const char *tls_server_name;
    /** 1: do not verify the servers' certificates at all (the traffic is
     *  encrypted but anyone in the path can read or change it). For tests
     *  only. Default 0: the certificate must chain to a trusted CA and
     *  name the host (or IP address) connected to. */
    int tls_insecure;
    /* --- version 3 --- */
    /** Replica acknowledgement: when > 0, every acquire and extend is
     *  followed on the same connection by WAIT min_replicas
     *  min_replicas_timeout_ms, and fewer acknowledgements than
     *  min_replicas fail it with DLOCK_ENOREPLICAS (an acquire is undone
     *  first, so no key is left behind). This narrows, but does not close,
     *  the window in which a failover loses a lock: replication stays
     *  asynchronous, WAIT does not make the write durable, and a replica
     *  that acknowledged need not be the one promoted. Fencing tokens are
     *  the answer to that (docs/deployment.md). Watchdog renewals and
     *  fair-mode acquires do not wait. 0..1000; default 0 (off). Redis
     *  only: with etcd:// or zk:// URLs a value above 0 is DLOCK_EINVAL
     *  (their writes are on a majority of members when answered). */
    int min_replicas;
    /** How long WAIT waits for the acknowledgements, in ms: 1..60000;
     *  default 1000. It adds to the I/O timeout of those commands. */
    int min_replicas_timeout_ms;
    /** 1: the URLs (redis:// or rediss://) are seed nodes of one Redis
     *  Cluster, which acts as a single node (no Redlock across its
     *  masters): each command goes to the master of its key's hash slot,
     *  MOVED and ASK are followed, and the slot map (CLUSTER SLOTS) is
     *  learned again after a redirect or a failed connection, so a waiting
     *  acquire rides out a failover. A master that stalls does not hold up
     *  the others: the map is asked of healthy nodes first (a node
     *  that has not answered in 250 ms gets company, not a failure: each
     *  node asked keeps the whole connect_timeout_ms), and the
     *  watchdog renews each master's locks in rounds of their own, on a
     *  thread per master, none waiting for another (docs/deployment.md).
     *  A lock's helper keys are kept in its
     *  key's slot (layout in docs/deployment.md); wake-ups use sharded
     *  pub/sub (SSUBSCRIBE/SPUBLISH, Redis 7). Default 0. */
    int cluster;
    /* --- version 4 --- */
    /** Callbacks for each event (dlock_observer), copied by
     *  dlock_client_new(); NULL (the default): none, at the cost of one
     *  NULL test per event. */
    const dlock_observer *observer;
    /* --- version 5 --- */
    /** 1: keep the holder's identity beside each lock it holds, so that
     *  dlock_client_identity(), dlock_client_list() and `dlock status`
     *  tell who holds it. The identity is identity_text (or, when that is
     *  NULL, "host=HOST pid=PID prog=PROGRAM") followed by the server's
     *  " since=UNIX_MS" of the grant. On Redis it is a field (the holder's
     *  token, or a reentrant lock's owner id) of the hash KEY NUL "id"
     *  in the lock's slot, written by the
     *  acquire script itself and given the lock's TTL, kept by extend and
     *  the watchdog, removed by release and break; the lock key's value
     *  stays the bare token, so other libraries still see an ordinary
     *  lock. Kept for every kind: a re-entry keeps the first hold's; a
     *  fair hand-over writes the new holder's (its waiter left it in
     *  line); a shared lock or semaphore keeps one field per holder,
     *  removed with its hold (dlock_client_holder_identity()). On etcd it is the value of the waiter key (the key itself
     *  without one; etcd's own lock looks at create revisions only), with
     *  the acquiring host's wall-clock "since" (docs/observing.md). On
     *  Redis it costs one more
     *  key per held lock, and a plain lock's first try becomes a script
     *  instead of a bare SET NX. 0 or 1; default 0 (off). */
    int identity;
    /** The identity text to keep instead of host, pid and program: 1 to
     *  DLOCK_IDENTITY_MAX bytes of printable ASCII (0x20..0x7e). Copied
     *  by dlock_client_new(); only with identity 1 (DLOCK_EINVAL
     *  otherwise). Default NULL. */
    const char *identity_text;
    /* --- version 6 --- */
    /** The application's event loop (see "Event loops"), copied by
     *  dlock_client_new(): the client then runs all its work there, from
     *  the loop's thread, with no thread of its own (zk://: one, its
     *  session's, see dlock_client_new()), and its locks use the
     *  _start verbs. NULL (the default): the blocking verbs, with the
     *  client's own watchdog and wake-up threads. */
    const dlock_loop *loop;
} dlock_client_options;

/** Longest dlock_client_options.identity_text, in bytes. */
#define DLOCK_IDENTITY_MAX 200
/** Longest identity dlock_client_identity() reports: the text and
 *  " since=" with the grant's time in ms, without the NUL. */
#define DLOCK_IDENTITY_READ_MAX (DLOCK_IDENTITY_MAX + 32)

/** Longest dlock_client_options.key_prefix accepted, in bytes. */
#define DLOCK_KEY_PREFIX_MAX 1024

/** The defaults, by field name: a field not named is 0 or NULL, so a new
 *  field never shifts another's default. In C++ (which before C++20 has no
 *  designated initialisers, and whose compilers warn about the fields they
 *  leave out) the macro is a call that returns what
 *  dlock_client_options_init() fills in: the same values. */
#ifdef __cplusplus
#define DLOCK_CLIENT_OPTIONS_INIT dlock__client_options_defaults()
#else
#define DLOCK_CLIENT_OPTIONS_INIT                                              \
    {                                                                          \
        .version = DLOCK_CLIENT_OPTIONS_VERSION, .connect_timeout_ms = 1000,   \
        .io_timeout_ms = 1000, .pool_size = 4, .drift_factor = 0.01,           \
        .wakeups = 1, .min_replicas_timeout_ms = 1000                          \
    }
#endif

/** Fill @p opts with the defaults for @p version (1 to 6: only the fields
 *  that version has are written; version 1, dlock 0.1.0's, ends at
 *  wakeups; version 2 at tls_insecure; version 3 at cluster; version 4 at
 *  observer; version 5 at identity_text). Returns
 *  DLOCK_EINVAL for a NULL pointer or an unknown version. */
DLOCK_EXTERN(int)
dlock_client_options_init(dlock_client_options *opts, unsigned int version);

#ifdef __cplusplus
static inline dlock_client_options dlock__client_options_defaults(void)
{
    dlock_client_options o;
    dlock_client_options_init(&o, DLOCK_CLIENT_OPTIONS_VERSION);
    return o;
}
#endif

/**
 * Create a client for one node (Redis) or several (Redlock), or for an
 * etcd cluster.
 *
 * URLs: redis://[user[:password]@]host[:port][/db],
 * rediss://[user[:password]@]host[:port][/db] (TLS, see the tls* options)
 * unix:///path/to/socket[?db=N][&password=P][&user=U], and
 * redis-sentinel://[user[:password]@]host:port[,host:port...]/MASTERNAME
 * for a primary managed by Redis Sentinel: the sentinels (at most 16, asked
 * without AUTH; the credentials are the primary's) are asked for the
 * primary's address on first use and again after a connection to it failed
 * or it answered READONLY (a failover), and every new connection checks
 * with ROLE that the server is a primary before anything is sent (a wait
 * retries, as after a restart: DLOCK_EIO). A sentinel that knows no master
 * of that name makes DLOCK_EREFUSED; no sentinel answering, DLOCK_EIO.
 * Sentinel URLs are one node each (several are Redlock over independent
 * primaries). Percent-escapes are decoded in user and password. Plain and TLS nodes may be mixed. A TLS
 * node is never used in plain text: a failed handshake or verification is
 * DLOCK_ETLS. Nothing is connected here: connections are made on first use,
 * so a node that is down now does not fail the call (the TLS files are
 * loaded here, though).
 *
 * etcd: etcd://[user:password@]host:port[,host:port...] lists the members
 * the client fails over between; several etcd:// URLs, or bare host:port
 * entries after one, add to the list. etcds:// is the same over TLS
 * (https, with the tls* options as for Redis; so is etcd:// with tls set);
 * etcd:// and etcds:// together are DLOCK_EINVAL (a cluster is TLS on
 * every member or on none). A client is on one backend: etcd://
 * and Redis URLs together are DLOCK_EINVAL. The cluster is one node to
 * dlock_client_node_count() and dlock_client_status(). The options
 * username and password do not apply (DLOCK_EINVAL: credentials go in
 * the URL; a stale token is replaced by a new authentication, and the
 * request sent again), and min_node_uptime_ms and wakeups are ignored; pool_size is how many
 * idle HTTP connections the client keeps (the others close when their
 * request ends). A build
 * without the etcd backend (DLOCK_WITH_ETCD=OFF) refuses etcd:// URLs with
 * DLOCK_ENOTSUP. Requests go to etcd's JSON gateway over HTTP unless the
 * environment has DLOCK_ETCD_TRANSPORT=grpc when the client is made: then
 * they are gRPC calls (gRPC's C core, when the build has it:
 * DLOCK_WITH_ETCD_GRPC), on one HTTP/2 connection per member, and the
 * watches stay on the gateway; such a client runs one more thread (gRPC's
 * completion queue, whose answers reach the client's loop through an
 * eventfd; a blocking call waits in the queue itself while its request
 * is the only thing it waits for), and gRPC's C core runs threads of its
 * own.
 * DLOCK_ETCD_TRANSPORT=gateway, empty or unset: the gateway; another
 * value: DLOCK_EINVAL; grpc in a build without it, or with tls_ca_dir or
 * tls_insecure (gRPC's C core takes neither): DLOCK_ENOTSUP. Over gRPC, TLS
 * with no tls_ca_file trusts gRPC's default roots, not the system store. A client made in a child of fork() of a process
 * that had started gRPC uses the gateway (gRPC's C core does not survive
 * fork()).
 *
 * ZooKeeper: zk://[user:password@]host:port[,host:port...]
 * [/chroot][?session_timeout_ms=N] names an ensemble (bare host:port
 * entries after it continue the list); user:password is digest
 * authentication, the options username and password each overriding the
 * URL's (half a digest, a user or a password alone in the end, is
 * DLOCK_EINVAL, as are tls and min_replicas). Unlike the other
 * stores, the client opens its ZooKeeper session here and waits for it,
 * connect_timeout_ms at most: DLOCK_EIO if no member answers, DLOCK_EAUTH
 * if the credentials are refused. The session's timeout (10 s by default)
 * is the lease of every hold of the client (ttl_ms is not used), so a
 * hold never outlives its client (dlock_lock_forget() leaves it until the
 * client is freed), and adopt is DLOCK_ENOTSUP (a hold is its session's);
 * status, holders, identity, list and break read and delete the lock's
 * nodes (docs/backends.md, "ZooKeeper").
 * Every kind, on Curator's layouts (InterProcessMutex, its
 * InterProcessReadWriteLock for shared and exclusive locks,
 * InterProcessSemaphoreV2 for semaphores; docs/backends.md), and several
 * names at once; there the default lock (no mode flag) is the plain one,
 * InterProcessMutex. lock_delay_ms is DLOCK_ENOTSUP. Not yet kept on ZooKeeper: a
 * request's own io_timeout_ms (the C client's session timeout bounds a
 * request to a stalled member instead), and a cancel's "within
 * milliseconds" with a request in flight to a stalled member (the leave
 * waits for the C client's answer, up to that timeout). With the loop option the client still keeps one thread of its own, its
 * session's (ZooKeeper's C client needs one driver of its handle), which
 * hands every answer and watch event to the loop through an eventfd the
 * loop watches: callbacks run on the loop's thread as for Redis.
 * A build without it (DLOCK_WITH_ZOOKEEPER=OFF) refuses zk:// URLs with
 * DLOCK_ENOTSUP. docs/backends.md, "ZooKeeper".
 *
 * @param out    receives the client; set to NULL on error.
 * @param urls   array of @p n_urls NUL-terminated URLs (1..64 of them).
 * @param opts   options, or NULL for the defaults.
 * @param errbuf optional buffer for a detail message on error (may be NULL).
 * @return DLOCK_OK, DLOCK_EINVAL (bad URL or option, a TLS file that
 *         cannot be loaded, tls with a unix:// URL, or the same node
 *         twice: the same host:port, or names that resolve to a common
 *         address and the same port, such as 127.0.0.1 and localhost; the
 *         message names both URLs; etcd:// with etcds://), DLOCK_ENOTSUP
 *         (etcd:// or zk:// URLs in a build without that store),
 *         DLOCK_EIO and DLOCK_EAUTH (zk:// only, above), DLOCK_ENOMEM.
 *         Thread-safe. Names that resolve apart but reach one server
 *         (127.0.0.1 and [::1], or TCP and its unix socket) are caught once
 *         connected, by the server's run_id: see dlock_lock_acquire().
 */
DLOCK_EXTERN(int)
dlock_client_new(dlock_client **out, const char *const *urls, size_t n_urls,
                 const dlock_client_options *opts, char *errbuf,
                 size_t errbuf_len);

/** Stop background threads (watchdog, subscriber), close every connection
 *  and free the client (on a client made with an event loop: take its
 *  records off the loop, never waiting; what is still ending there, a
 *  freed handle's release or a renewal round, frees the rest when it
 *  ends). Free every lock handle first: a client freed while
 *  handles of it exist (their watchdog records and connections would be
 *  freed under them) is misuse, and dlock prints "dlock:
 *  dlock_client_free() called while N lock handles of this client are not
 *  freed; ...; aborting" on stderr and calls abort(). NULL is accepted.
 *
 *  fork(): a client and its handles belong to the process that made them.
 *  In a child they are inert: every call returns DLOCK_EINVAL (the handle's
 *  message says "used after fork()"), dlock_lock_state_get() reads
 *  DLOCK_STATE_UNLOCKED, and dlock_lock_free() and dlock_client_free()
 *  release nothing, send nothing and never wait (they close the child's
 *  copies of the sockets and free memory). The parent is not affected. A
 *  child that needs locks makes its own client. A child is recognised by
 *  a pthread_atfork() handler, so fork(), and not a raw clone() system
 *  call, must make it. */
DLOCK_EXTERN(void) dlock_client_free(dlock_client *client);

/** Number of nodes (1, or N for Redlock; a Redis Cluster and a
 *  redis-sentinel:// URL count as one node each). */
DLOCK_EXTERN(size_t) dlock_client_node_count(const dlock_client *client);

/** "host:port" or the socket path of node @p i; NULL when out of range.
 *  The string lives as long as the client. */
DLOCK_EXTERN(const char *)
dlock_client_node_name(const dlock_client *client, size_t i);

/** What dlock_client_status() makes of all nodes together. */
typedef enum dlock_status_state {
    /** Too few nodes answered to tell. */
    DLOCK_STATUS_UNKNOWN = 0,
    /** On no node, and a majority answered. */
    DLOCK_STATUS_FREE = 1,
    /** On some nodes, not a majority (a failed or ending Redlock attempt). */
    DLOCK_STATUS_PARTIAL = 2,
    /** On a majority of nodes. */
    DLOCK_STATUS_HELD = 3
} dlock_status_state;

/** The verdict of dlock_client_status() over all nodes. */
typedef struct dlock_lock_status {
    dlock_status_state state;
    size_t nodes;    /**< nodes asked */
    size_t answered; /**< nodes that answered */
    size_t held_on;  /**< nodes where the key exists */
    size_t quorum;   /**< nodes needed for a majority */
} dlock_lock_status;

/** What dlock_client_status() reports for one node. */
typedef struct dlock_node_status {
    /** DLOCK_OK when the node answered; otherwise the error code. */
    int error;
    /** 1 if the lock key exists on this node, else 0. */
    int held;
    /** Remaining TTL of the key in ms; -1 if free or without TTL. */
    int64_t ttl_ms;
    /** Last fencing token granted on this node (0 if none yet; Redis:
     *  the counter, which readers' grants raise too: see
     *  dlock_client_status()). */
    uint64_t fence;
} dlock_node_status;

/**
 * Look at a lock by name without taking it: held or free, remaining TTL and
 * last fencing token, per node, and the verdict over all nodes (the
 * majority rule is the library's, as for an acquire). The client's
 * key_prefix applies, as for dlock_lock_new(). Inputs first, outputs last.
 *
 * Redis: the fence is the name's counter, which a reader's grant
 * (DLOCK_SHARED) raises too, so that for a name its readers hold it is a
 * guard for dlock_client_break() that any later grant, a writer's or a
 * reader's, moves past (readers hold no fence themselves,
 * dlock_lock_fence() is 0). etcd: the fence is the owner's key's create
 * revision; when readers hold, the newest reader's key's (every later
 * grant's fence is larger, a later reader's too), which
 * dlock_client_break() takes as its guard. ZooKeeper likewise: the
 * owner's node's czxid, or the newest reader's or (a semaphore) lease's
 * node's; ttl_ms -1 (the holder's session is its lease).
 *
 * @param n_nodes the length of @p nodes: at least dlock_client_node_count().
 * @param nodes   receives one entry per node.
 * @param summary receives the verdict; may be NULL.
 * @return DLOCK_OK if at least one node answered (per-node errors are in
 *         nodes[i].error), DLOCK_EINVAL, DLOCK_ENOMEM, the error of the only
 *         node, or DLOCK_ENOQUORUM when none of several nodes answered.
 *         The summary is filled whenever the nodes were asked.
 */
DLOCK_EXTERN(int)
dlock_client_status(dlock_client *client, const char *name, size_t n_nodes,
                    dlock_node_status *nodes, dlock_lock_status *summary);

/** How a lock name is held, for dlock_client_holders(). */
typedef enum dlock_hold_mode {
    DLOCK_HOLD_FREE = 0,      /**< no key */
    DLOCK_HOLD_EXCLUSIVE = 1, /**< one holder: a plain or exclusive lock */
    DLOCK_HOLD_SHARED = 2,    /**< shared holders (DLOCK_SHARED) */
    DLOCK_HOLD_SEMAPHORE = 3, /**< permit holders (dlock_semaphore_new()) */
    DLOCK_HOLD_OTHER = 4,     /**< a reentrant lock (holders not listed) */
    /** Not a lock dlock writes: a list, set or stream, or a hash or sorted
     *  set without a TTL (every dlock hash and sorted set has one). An
     *  acquire on it fails with DLOCK_EWRONGTYPE. count is 0; out[0] (when
     *  max_out >= 1) holds the key's Redis type ("list", ...) as its token
     *  and the key's TTL in ms (-1: none) as its ttl_ms. */
    DLOCK_HOLD_FOREIGN = 5
} dlock_hold_mode;

/** One holder listed by dlock_client_holders(). */
typedef struct dlock_holder {
    char token[DLOCK_TOKEN_MAX + 1]; /**< its owner token (cut to fit) */
    int64_t ttl_ms;                  /**< what is left of its lease */
} dlock_holder;

/** What dlock_client_holders() found on the node. */
typedef struct dlock_holders_info {
    dlock_hold_mode mode;
    unsigned permits;          /**< a semaphore's N, else 0 */
    size_t count;              /**< live holders (may exceed what was listed) */
    int64_t writer_waiting_ms; /**< TTL of the writer-waiting mark, -1 none */
} dlock_holders_info;

/**
 * List who holds lock @p name on node @p node (0 with a single node): the
 * mode, each live holder's token and remaining lease (expired shares and
 * permits are not counted), a semaphore's N, and whether a writer waits.
 * Read-only. The client's key_prefix applies.
 *
 * etcd: the cluster is node 0; the holders are the readers before the
 * oldest key of the line that is not a reader's (DLOCK_HOLD_SHARED, each
 * token the reader's dlock_lock_token()), or that key alone
 * (DLOCK_HOLD_EXCLUSIVE: a writer, a plain lock, `etcdctl lock`); each
 * ttl_ms is its lease's, read one lease at a time. N is not stored there:
 * a semaphore's name reads as its oldest key's. ZooKeeper: each token is
 * the holder's node's name, ttl_ms -1; a semaphore's holders are its
 * lease nodes (<path>/leases: DLOCK_HOLD_SEMAPHORE, permits 0, as N is
 * stored nowhere there; a lease asked for while all are taken counts
 * too, as Curator counts it).
 *
 * @param out     receives up to @p max_out holders (may be NULL with 0).
 * @return DLOCK_OK, DLOCK_EINVAL (NULL, bad name, node out of range), or
 *         the node's error.
 */
DLOCK_EXTERN(int)
dlock_client_holders(dlock_client *client, const char *name, size_t node,
                     dlock_holders_info *info, dlock_holder *out, size_t max_out);

/**
 * The identity the holder of @p name keeps beside it on node @p node (0
 * with a single node), when the holder's client has
 * dlock_client_options.identity on: "host=HOST pid=PID prog=PROGRAM
 * since=UNIX_MS" (or its identity_text, then " since=UNIX_MS"), since
 * being the server's time of the grant (on etcd the acquiring host's
 * clock). Read-only; the client's key_prefix applies; the calling client
 * need not keep identities itself. A shared lock's or semaphore's live
 * holders' identities are joined with "; " in the order their leases end
 * (the first 8, then "+N more"); dlock_client_holder_identity() reads one
 * of them. On etcd the cluster is node 0 and the holders' keys are read:
 * the owner's, or the readers' (oldest first, as their leases' ends are
 * not read) when readers hold. On ZooKeeper the identity is the holder's
 * node's data (written at its create when the holder's client keeps
 * identities; Curator's recipes write their client's IP address there)
 * followed by " since=" and the node's ctime (the server's clock when
 * the holder got in line); a node without data reads as "".
 *
 * @param buf receives the identity, NUL-terminated and cut to fit: ""
 *            when the name is free on that node or its holder keeps none
 *            (identity off, another library).
 * @param len the size of @p buf, at least 1 (DLOCK_IDENTITY_READ_MAX + 1
 *            holds any one identity dlock writes; several holders' need
 *            more, or come cut).
 * @return DLOCK_OK, DLOCK_EINVAL (NULL, bad name, node out of range, no
 *         buffer), or the node's error. Thread-safe.
 */
DLOCK_EXTERN(int)
dlock_client_identity(dlock_client *client, const char *name, size_t node, char *buf,
                      size_t len);

/**
 * The identity one holder of @p name keeps on node @p node (0 with a
 * single node): @p token is a holder's token as dlock_client_holders()
 * lists it (a shared lock's reader, a semaphore's permit, an exclusive or
 * fair lock's holder) or a reentrant lock's owner id. What
 * dlock_client_identity() joins for several holders, one at a time. Same
 * text as dlock_client_identity(); read-only; the client's key_prefix
 * applies; the calling client need not keep identities itself. One HGET
 * on Redis; on ZooKeeper the node named @p token (or the lease of that
 * name) is read.
 *
 * @param buf receives the identity, NUL-terminated and cut to fit: "" when
 *            the token keeps none there (no such holder, identity off, a
 *            lease that ended).
 * @param len the size of @p buf, at least 1.
 * @return DLOCK_OK, DLOCK_EINVAL (NULL or empty token, NULL, bad name, node
 *         out of range, no buffer), DLOCK_ENOTSUP (an etcd:// client:
 *         dlock_client_identity() reads its holders', a writer's or
 *         every reader's joined), DLOCK_EREFUSED (the
 *         server refused HGET: an ACL, a foreign key), or the node's
 *         error. Thread-safe.
 */
DLOCK_EXTERN(int)
dlock_client_holder_identity(dlock_client *client, const char *name, size_t node,
                             const char *token, char *buf, size_t len);

/**
 * How long lock @p name's lock-delay (dlock_lock_options.lock_delay_ms,
 * docs/lock-delay.md) still keeps new holders out on node @p node (0 with
 * a single node, and on etcd: the cluster is one node): a hold that ended
 * without a release (its lease ran out) keeps the name for its delay past
 * its lease's end. Read-only; the client's key_prefix applies. `dlock
 * status` shows it as "delayed". On etcd the time left is the longest
 * left of the dead holders' companion leases, which etcd reports in
 * whole seconds rounded down: up to 999 ms are added (docs/backends.md,
 * "Lock-delay on etcd").
 *
 * @param left_ms receives the ms left of the latest such delay on the
 *                node, or 0 when none is pending (no hold ended without a
 *                release within its delay; a live hold's is not pending).
 * @return DLOCK_OK, DLOCK_EINVAL (NULL, bad name, node out of range),
 *         DLOCK_ENOTSUP (a zk:// client), or the node's error.
 *         Thread-safe.
 */
DLOCK_EXTERN(int)
dlock_client_lock_delay(dlock_client *client, const char *name, size_t node, int64_t *left_ms);

/** What dlock_client_break() did. */
typedef struct dlock_break_result {
    /** Holds removed: the most on any node (1 for a plain, fair,
     *  exclusive or reentrant lock; the live holders of a shared lock or a
     *  semaphore; 0 when the name was free). */
    size_t removed;
    dlock_hold_mode mode;  /**< what the name was (DLOCK_HOLD_FREE: free) */
    /** The highest fencing token given for the name so far (0: none;
     *  Redis: the counter, readers' grants included, as
     *  dlock_client_status() shows it). Every later grant's is larger:
     *  breaking never moves it back. */
    uint64_t fence;
    size_t removed_on;     /**< nodes where a hold was removed */
    size_t answered;       /**< nodes that answered */
    size_t nodes;          /**< nodes asked */
    size_t quorum;         /**< nodes needed for a majority */
} dlock_break_result;

/**
 * Break a lock: remove every hold of @p name, whoever holds it, for a
 * holder that is gone for good (a host that will not come back, a process
 * stuck past its TTL with auto-renew). An administrator's call: the
 * holder is not asked, so use it only when no holder may still be working
 * on what the lock protects (docs/deployment.md, "Breaking a stuck lock").
 *
 * Only the holds go. The fencing counter stays (the next holder's fence is
 * larger than every one given before), and the waiters keep their places
 * (the waiter list, the fair queue, a waiting writer's mark); every waiter
 * is woken to look at once. A broken holder finds its hold gone at its
 * next renewal, extend or release: its handle turns DLOCK_STATE_LOST and
 * its on_lost runs (DLOCK_LOST_NOT_OWNER). On Redis one script per node
 * (break.lua: TYPE, ZCOUNT, DEL, PUBLISH; a waiter's turn, the lock handed
 * to the head of the line and not yet taken, is not a hold and stays), on
 * every node of a Redlock; on
 * etcd the holders' keys as dlock_client_holders() finds them (the oldest
 * under the name, or every reader before the oldest other key, up to 128
 * in one transaction) are deleted if they are still theirs, so the next
 * waiter in line takes the lock. A break is no release: the broken
 * holder's lock-delay stands (it may still be writing; docs/lock-delay.md),
 * on etcd until its companion lease lapses (TTL + delay after the holder's
 * last renewal at most).
 *
 * @param fence  0: break whoever holds the name. Else the fencing token
 *               of the holder the caller looked at (dlock_client_status()'s
 *               fence): break only if no grant came since, so that a holder
 *               that took the lock meanwhile is not broken by mistake. A
 *               lock without a fencing counter (DLOCK_NO_FENCE) has fence 0
 *               and cannot be guarded this way. Status's fence of a name
 *               its readers hold guards them too, so that a writer that
 *               came later is not broken: on Redis the counter their
 *               grants raised (a reader that came later fails the guard
 *               as well; readers of a DLOCK_NO_FENCE handle raise none),
 *               on etcd the newest reader's key's create revision (a
 *               reader that came later, or the newest that left, fails
 *               it).
 * @param result receives what was removed; may be NULL. Filled whenever
 *               the nodes were asked.
 * @return DLOCK_OK when the only node, or a majority of several, answered
 *         (also when the name was free: result->removed is 0);
 *         DLOCK_EINVAL (NULL client or name, a name of 0 or more than
 *         DLOCK_NAME_MAX bytes, a forked child's client); DLOCK_ENOMEM;
 *         DLOCK_EWRONGTYPE when the key is not a lock dlock writes (a list,
 *         a set, ...: nothing removed); DLOCK_ENOTOWNER when @p fence is
 *         not 0 and a grant came since (on a Redlock every node's counter
 *         is looked at first, and a grant seen on any node breaks
 *         nothing; only one that lands between that look and the break
 *         leaves result->removed_on > 0); the
 *         error of the only node; or
 *         DLOCK_ENOQUORUM when fewer than a majority of several nodes
 *         answered (holds may have been removed from those that did);
 *         DLOCK_EAUTH (ZooKeeper: an ACL forbids deleting a holder's node).
 *
 * ZooKeeper: the holders' nodes are deleted by name, one request each (a
 * node's name is never given to another create, so only the holders read
 * go, never one that came since): the owner's, every reader before the
 * first writer, or a semaphore's lease nodes; the next in line is woken by
 * its watch as by a release. The guard is the newest holder's node's
 * czxid, as dlock_client_status() reports it (a reader's and a lease's
 * too): a holder that came since is newer, with a larger one, and the
 * break is refused (DLOCK_ENOTOWNER); a writer waiting behind the readers
 * is no holder and stays.
 */
DLOCK_EXTERN(int)
dlock_client_break(dlock_client *client, const char *name, uint64_t fence,
                   dlock_break_result *result);

/** The version of dlock_list_entry this header describes: 2 added
 *  identity. */
#define DLOCK_LIST_ENTRY_VERSION 2

/** One lock name found by dlock_client_list(). The library owns the entry
 *  and fills it for the length of one callback: fields may be added at the
 *  end in a later version (with a new DLOCK_LIST_ENTRY_VERSION), so a
 *  caller reads the fields its version has and never copies the struct by
 *  value into storage of its own size. */
typedef struct dlock_list_entry {
    unsigned version;      /**< DLOCK_LIST_ENTRY_VERSION of the library */
    const char *name;      /**< the lock name, without the key_prefix */
    /** DLOCK_STATUS_HELD on a majority of the nodes, else
     *  DLOCK_STATUS_PARTIAL (held on some nodes only). */
    dlock_status_state state;
    dlock_hold_mode mode;  /**< as dlock_client_holders() says */
    unsigned permits;      /**< a semaphore's N, else 0 */
    size_t holders;        /**< live holders (1 for a plain or reentrant lock) */
    /** The shortest remaining TTL in ms among the nodes holding it; -1
     *  when it has none. */
    int64_t ttl_ms;
    /** Waiters known to the servers: the waiter list plus the fair queue
     *  (the most over the nodes). */
    size_t waiters;
    uint64_t fence;        /**< last fencing token granted (the highest; as
                                dlock_client_status() says, readers too) */
    size_t held_on;        /**< nodes where the name is held */
    size_t nodes;          /**< nodes of the client */
    size_t quorum;         /**< nodes needed for a majority */
    /* --- version 2 --- */
    /** The holder's identity (dlock_client_identity(): the first node's
     *  that keeps one; several holders' joined with "; "), or NULL when
     *  none is kept; valid for the callback only. Read it only when
     *  entry->version >= 2. */
    const char *identity;
} dlock_list_entry;

/** Called by dlock_client_list() once per lock name, on the calling
 *  thread; return 0 to go on, nonzero to stop the listing. */
typedef int (*dlock_list_fn)(void *arg, const dlock_list_entry *entry);

/**
 * List the held lock names that match @p pattern, read-only, calling
 * @p cb once per name in byte order of the name. The pattern is a Redis
 * glob (`*`, `?`, `[...]`, `\` escapes) on the name; the client's
 * key_prefix is put before it (escaped), so only the client's locks are
 * seen. On Redis each node is walked with `SCAN MATCH ... COUNT 1000`;
 * each batch of keys is then read in one pipelined round trip (status.lua,
 * holders.lua and the length of the waiter list and fair queue per name),
 * so the cost is O(keys under the prefix) with about 2 round trips per
 * 1,000 keys, and never a round trip per key. A lock's helper keys
 * (`KEY` NUL `fence`, `q`, `wq`, ...) are not listed as names: what they
 * hold (fence, waiters) is reported with their lock. Keys that are not
 * locks dlock writes (DLOCK_HOLD_FOREIGN) are skipped, but a plain string
 * under the prefix looks like an exclusive lock and is listed. With
 * several nodes (Redlock) every node is listed and the names are merged:
 * entry->state says whether a majority holds the name. On a Redis
 * Cluster every master is walked in turn (each SCAN and its batches go to
 * that master; a key whose slot moves during the walk may be missed or
 * seen twice, and a walk whose master lost the slot it was routed by
 * ends with DLOCK_EBUSY). On etcd the keys
 * under the prefix are read in ranges of 1,000 (with their values) from
 * the pattern's literal start (its bytes before the first wildcard) and
 * each name is matched with fnmatch(3); the oldest key of a name is its
 * holder (mode DLOCK_HOLD_EXCLUSIVE, one holder, its create revision the
 * fence, its value the identity),
 * the others its waiters, and one lease look per name gives ttl_ms. A
 * key NAME/LEASE (dlock's and `etcdctl lock`'s alike) is listed under the
 * NAME before its last '/' (lock "a/b"'s keys under "a/b", although "a"'s
 * line holds them too). LEASE is etcd's int64 lease ID in hex as Go's %x
 * writes it ('-' before a negative one's magnitude) or as unsigned. Another
 * key under NAME/ (no lease in hex after the '/', upper-case hex, trailing
 * bytes) is still a place in NAME's line, which an acquire waits for: it
 * counts as NAME's holder when it is the oldest key there, else as a
 * waiter; a name whose keys are all such is not listed. The
 * names are gathered before the first callback (memory O(names)); a lock
 * taken or released during the walk may or may not be seen, as with SCAN.
 *
 * @param pattern the glob on names; NULL or "*" for every name.
 * @param cb      called once per name (not while any lock is held by the
 *                call: it may call any function of this client).
 * @return DLOCK_OK; DLOCK_EINVAL (NULL client or callback, an empty
 *         pattern or one longer than DLOCK_NAME_MAX, a forked child's
 *         client); DLOCK_ENOMEM; DLOCK_ECANCELED when @p cb stopped it;
 *         DLOCK_EBUSY when a Cluster's slot map moved the master being
 *         walked meanwhile (list again; no callback then); the
 *         error of the only node; or DLOCK_ENOQUORUM when fewer than a
 *         majority of several nodes could be listed (no callback then);
 *         DLOCK_EIO on a zk:// client whose tree below the prefix has
 *         more than 100,000 znodes (no callback then).
 *
 * ZooKeeper: the tree below the prefix's path (the pattern's literal
 * start up to its last '/' narrows where the walk begins) is read with
 * getChildren, one request per znode; a znode whose children are lock
 * nodes (Curator's _c_<uuid>-lock-, -__READ__, -__WRIT__), or whose
 * "leases" child holds a semaphore's lease nodes (_c_<uuid>-lease-; one
 * request more), is a name, listed without its leading '/', its holders
 * and fence read as dlock_client_status() reads them (one to four
 * requests more per name), ttl_ms -1, its identity the oldest holder's
 * node's data. A "leases" or "locks" znode that is no semaphore's is
 * walked as any other (a lock may be named "q/leases"). A znode this
 * client may not read (ZNOAUTH) is skipped with what is below it. The
 * names are gathered before the first callback.
 */
DLOCK_EXTERN(int)
dlock_client_list(dlock_client *client, const char *pattern, dlock_list_fn cb, void *arg);

/**@}*/

/* ------------------------------------------------------------------------ */
/** @name Locks */
/**@{*/

typedef struct dlock_lock dlock_lock;

/** Lock mode and behaviour flags for dlock_lock_options.flags. */
enum dlock_lock_flags {
    /** Counted reentrancy: the same owner (client x thread; on a client
     *  made with an event loop, client x handle, as the loop's tasks share
     *  its thread) may acquire again; each acquire needs a release. Stored as a hash. The owner's
     *  handles share one key, so a re-entry, release, renewal or extend
     *  through one handle never shortens the key's TTL (another handle
     *  may count on a longer lease); each handle's validity still counts
     *  from its own operations. The thread of "client x thread" is never
     *  another thread's: a thread that ends leaves its holds to their
     *  handles, not to the next thread. A hold whose lease ended is not
     *  re-entered: the owner's next acquire gets a new hold (on etcd too,
     *  where the lease is the hold). On etcd every re-entry sends one
     *  keep-alive of the lease to find that out; with a wait it rides out
     *  DLOCK_EBUSY, DLOCK_EIO and DLOCK_EUNKNOWN like any waiting acquire
     *  (retried with retry_min_ms..retry_max_ms backoff until the
     *  deadline or a cancel), and a try-once re-entry returns them at
     *  once. */
    DLOCK_REENTRANT = 1u << 0,
    /** The client's watchdog renews the lease every renew_interval_ms
     *  until release; on_lost is called if a renewal fails. */
    DLOCK_AUTO_RENEW = 1u << 1,
    /** Waiters are served in arrival order (single node only). A waiter
     *  handed the lock by a release takes it on the release's message,
     *  with no call of its own: until the client's watchdog sets the full
     *  TTL (a third of the way into the claim), the lease is the claim
     *  lease, 4 refresh periods from the waiter's last look (refresh =
     *  ttl_ms / 4 within 50..1000 ms: at most 4 s), which
     *  dlock_lock_validity_ms() reports; if the claim is gone by then,
     *  the handle is lost (on_lost). See docs/waiting.md. */
    DLOCK_FAIR = 1u << 2,
    /** Do not keep a fencing counter for this name (saves one key per
     *  name for high-cardinality names such as order ids).
     *  dlock_lock_fence() is 0. A plain lock's first try is then a bare
     *  SET NX PX (SET NX PX GET on Redis 7, with PTTL behind it; no
     *  script; not on a Redis Cluster or with min_replicas): the fastest
     *  acquire (docs/design.md, "Scripts"). */
    DLOCK_NO_FENCE = 1u << 3,
    /** Read-write lock, shared side: many shared holders at once, each
     *  with a lease of its own (a crashed holder's share ends with its own
     *  lease), never beside an exclusive holder, and not granted while a
     *  writer waits (writer preference: see docs/primitives.md). Stored as
     *  a sorted set of holders' tokens scored by lease end. No fencing
     *  token (dlock_lock_fence() is 0), but each grant raises the name's
     *  fencing counter (unless DLOCK_NO_FENCE), which guards a
     *  dlock_client_break() of the readers (dlock_client_status()); a
     *  writer's fence skips the readers' numbers. Works on several nodes. With
     *  DLOCK_REENTRANT the owner (client x thread) may acquire again, also
     *  while a writer waits (it holds already); each acquire needs a
     *  release and the share ends at the last (docs/primitives.md). Not
     *  combined with DLOCK_FAIR (DLOCK_ENOTSUP). etcd: a key
     *  NAME/read/<ID> (etcd's recipe RWMutex) that waits for the last
     *  older key that is not a reader's (a waiting writer's too: no mark is
     *  needed); no fence either. */
    DLOCK_SHARED = 1u << 4,
    /** Read-write lock, exclusive side: held exactly like a plain lock
     *  (same value, fencing, renewal), but shared holders keep it out, and
     *  while it waits for them it leaves a short "writer waiting" mark
     *  that new shared holders respect (a try-once acquire, wait_ms 0,
     *  does not wait and leaves none). A plain lock (no mode flag) on a
     *  name with shared holders fails with DLOCK_EWRONGTYPE: writers of a
     *  read-write lock use this flag (`dlock run` does by default). With
     *  DLOCK_REENTRANT the owner (client x thread) re-enters through its
     *  handle (the fencing token stays the first hold's; N acquires, N
     *  releases); an upgrade or downgrade between reentrant handles of one
     *  owner is DLOCK_EINVAL at once, never a wait for itself. Not combined
     *  with DLOCK_FAIR (DLOCK_ENOTSUP). etcd: a key NAME/write/<ID> that
     *  waits for every older key, as a plain lock's; its fence is the
     *  key's create revision. A plain lock there excludes readers too
     *  (`dlock run` takes it by default on etcd); its key is another
     *  (NAME/<ID>), so an owner's reentrant plain lock and its reentrant
     *  reader or writer of one name refuse each other (DLOCK_EINVAL, as an
     *  upgrade), as on Redis (DLOCK_EWRONGTYPE there). */
    DLOCK_EXCLUSIVE = 1u << 5
};

/** Why a lock was lost, passed to dlock_lost_fn. */
typedef enum dlock_lost_reason {
    /** The key held another owner's token, or was gone. */
    DLOCK_LOST_NOT_OWNER = 1,
    /** Renewal could not reach a majority before the validity ended. */
    DLOCK_LOST_NO_QUORUM = 2
} dlock_lost_reason;

/**
 * Called once when the watchdog finds an auto-renewed lock lost. Runs on the
 * client's watchdog thread, after the handle's state became
 * DLOCK_STATE_LOST; renewals of every other lock wait while it runs, so it
 * must not block for long.
 *
 * It may call, on this lock: dlock_lock_release() (returns DLOCK_ELOST and
 * leaves the handle unlocked; a later release from the owner's thread then
 * returns DLOCK_ENOTHELD), dlock_lock_forget(), dlock_lock_state_get(),
 * dlock_lock_validity_ms(), dlock_lock_name(), dlock_lock_errmsg(); and
 * dlock_lock_cancel() on any lock. It must not call dlock_lock_free() or
 * dlock_client_free() (the watchdog still uses the handle and would wait for
 * itself), nor acquire or extend the lock, and it must not release the lock
 * while another thread is inside a call on the same handle. A release here
 * of another lock, or of a multi-name set, whose renewal is in a round
 * still in flight (on a cluster: another master's) does not wait for that
 * round, which runs on this thread: the round lets the lock go and never
 * reports on it; a renewal of it still on the wire finds the key released
 * (or another owner's) and changes nothing (a key being put back on a
 * Redlock node that had lost it, if already sent, stays there until the
 * lock's TTL ends). A release on any other thread
 * waits for the round instead.
 *
 * On a client made with an event loop it runs on the loop, and may call
 * any function on any lock of the client: dlock_lock_release_start() or
 * dlock_lock_free() on this one (a free then ends its pending request, if
 * any, as dlock_lock_free() says).
 */
typedef void (*dlock_lost_fn)(dlock_lock *lock, dlock_lost_reason reason,
                              void *arg);

#define DLOCK_LOCK_OPTIONS_VERSION 2

/** Longest dlock_lock_options.lock_delay_ms: one hour. */
#define DLOCK_LOCK_DELAY_MAX_MS 3600000

/** Lock options. Initialise with DLOCK_LOCK_OPTIONS_INIT. As for client
 *  options, `version` is the DLOCK_LOCK_OPTIONS_VERSION the caller was
 *  built with: the library accepts 1 to the current one and reads only the
 *  fields that version had, keeping the defaults for later ones (new
 *  fields are only ever added at the end). */
typedef struct dlock_lock_options {
    unsigned int version; /**< DLOCK_LOCK_OPTIONS_VERSION */
    /** Lease length. 1..DLOCK_TTL_MAX_MS; default 30000. */
    int64_t ttl_ms;
    /** Bitwise OR of enum dlock_lock_flags. Default 0 (plain mode: a plain
     *  string value with a PX TTL, compatible with redsync, go-zero,
     *  node-redlock and redis-py locks on the same key). */
    unsigned int flags;
    /** Watchdog period; 0 means ttl_ms / 3 (of the extend's TTL after a
     *  dlock_lock_extend(), see there). */
    int64_t renew_interval_ms;
    /** Waiting acquire: the first retry sleeps a random time up to
     *  retry_min_ms, doubling to retry_max_ms; never longer than the
     *  holder's remaining TTL. A release wakes waiters sooner (see
     *  dlock_client_options.wakeups). Defaults 10 and 200; 1..60000. */
    int64_t retry_min_ms;
    int64_t retry_max_ms;
    /** Called, on the client's watchdog thread (see dlock_lost_fn), when an auto-renewed lock
     *  is lost, or a DLOCK_FAIR lock whose hand-over the watchdog could
     *  not confirm before its claim ended (DLOCK_LOST_NOT_OWNER: the claim
     *  was gone; DLOCK_LOST_NO_QUORUM: no answer in time); may be NULL. */
    dlock_lost_fn on_lost;
    void *on_lost_arg;
    /* --- version 2 --- */
    /** Lock-delay (docs/lock-delay.md), as Chubby and Consul have it: when
     *  a hold of this handle ends without a release (its lease ran out:
     *  the holder crashed, was cut off, or lost its renewals), the name
     *  stays unavailable for this many ms past the lease's end, so writes
     *  the dead holder still had in flight land before a new holder
     *  starts. A release frees the name at once. A waiting acquire sleeps
     *  until the delay ends (no polling); a try-once acquire returns
     *  DLOCK_ENOTACQUIRED. The delay is kept beside the lock in the store
     *  and respected by every handle that sets lock_delay_ms (every
     *  handle of a name should set the same value: one with 0 neither
     *  leaves nor respects a delay, and costs nothing more than before).
     *  It answers the problem fencing tokens answer, without the storage
     *  checking tokens, but only as well as the delay covers the longest
     *  write in flight (docs/lock-delay.md compares them). Every kind on
     *  every Redis deployment and on etcd (there a companion key on a
     *  lease of TTL + delay, kept alive with the hold: docs/backends.md,
     *  "Lock-delay on etcd"; etcd counts whole seconds, so the delay is
     *  rounded up to one, and on an auto-renewed lock's session a third
     *  of the TTL more); ZooKeeper: DLOCK_ENOTSUP for now. What ends a
     *  hold cleanly: dlock_lock_release() of a live hold (also through a
     *  handle that adopted its token with a delay set, as `dlock release`
     *  does), and a free of a held handle. What does not: a lease that ran
     *  out (a release after that frees nothing), dlock_lock_forget() (the
     *  hold lapses by its TTL), dlock_client_break() (the broken holder
     *  may still be writing: the delay stands). dlock_lock_extend() of a
     *  handle with a delay moves the delay with the new lease; an adopted
     *  handle keeps the token's delay alive only if it sets lock_delay_ms
     *  too. 0 (the default) is off; 0..DLOCK_LOCK_DELAY_MAX_MS. */
    int64_t lock_delay_ms;
} dlock_lock_options;

/** The defaults, by field name (see DLOCK_CLIENT_OPTIONS_INIT). */
#ifdef __cplusplus
#define DLOCK_LOCK_OPTIONS_INIT dlock__lock_options_defaults()
#else
#define DLOCK_LOCK_OPTIONS_INIT                                                \
    {                                                                          \
        .version = DLOCK_LOCK_OPTIONS_VERSION, .ttl_ms = 30000,                \
        .retry_min_ms = 10, .retry_max_ms = 200                                \
    }
#endif

/** Fill @p opts with the defaults for @p version (1..DLOCK_LOCK_OPTIONS_VERSION:
 *  only the fields that version has are written; version 1, dlock 0.1.0's,
 *  ends at on_lost_arg; version 2 added lock_delay_ms). DLOCK_EINVAL for NULL or
 *  an unknown version. */
DLOCK_EXTERN(int)
dlock_lock_options_init(dlock_lock_options *opts, unsigned int version);

#ifdef __cplusplus
static inline dlock_lock_options dlock__lock_options_defaults(void)
{
    dlock_lock_options o;
    dlock_lock_options_init(&o, DLOCK_LOCK_OPTIONS_VERSION);
    return o;
}
#endif

/**
 * Create a handle for the lock called @p name. Takes nothing in Redis.
 *
 * @param out    receives the handle; NULL on error.
 * @param client the client; must outlive the handle.
 * @param name   1..DLOCK_NAME_MAX bytes, NUL-terminated.
 * @param opts   options or NULL for the defaults.
 * @return DLOCK_OK, DLOCK_EINVAL (NULL, empty or long name, TTL out of
 *         range, unknown flags or version, retry bounds, renew_interval_ms
 *         not below the TTL, lock_delay_ms below 0 or above
 *         DLOCK_LOCK_DELAY_MAX_MS, DLOCK_SHARED with DLOCK_EXCLUSIVE; on
 *         zk://, a key that is no ZooKeeper path: an empty, "." or ".."
 *         segment, a trailing "/", or longer than the backend's path
 *         limit; on etcd://, a name that ends in "/read" or "/write" or
 *         holds "/read/": another name's reader's or writer's keys),
 *         DLOCK_ENOTSUP (DLOCK_FAIR on several nodes or with
 *         DLOCK_REENTRANT, DLOCK_SHARED or DLOCK_EXCLUSIVE; a semaphore
 *         over several nodes; lock_delay_ms on ZooKeeper),
 *         DLOCK_ENOMEM.
 */
DLOCK_EXTERN(int)
dlock_lock_new(dlock_lock **out, dlock_client *client, const char *name,
               const dlock_lock_options *opts);

/** Most permits a semaphore may have. */
#define DLOCK_PERMITS_MAX 1000000u

/**
 * Create a handle for one permit of the semaphore called @p name: at most
 * @p permits holders of the name at once, each with a lease of its own
 * (ttl_ms) and its own token, renewed with DLOCK_AUTO_RENEW like a lock; a
 * holder that dies gives its permit back when its lease ends. Acquire,
 * release, extend, free, cancel and the getters work as for a lock;
 * release of a permit this handle does not hold in the store (another
 * token, or never granted) is DLOCK_ENOTOWNER. No fencing token.
 *
 * Every user of a name must give the same @p permits: the first holder
 * stores N with the holders, and an acquire that finds another N stored is
 * refused with DLOCK_EINVAL ("the semaphore's stored number of permits
 * differs from this handle's") while any
 * permit is held (the key, N with it, goes with the last lease).
 *
 * etcd: the permits are the N oldest keys of the name's line (its lock's
 * layout, NAME/<lease>), each holder's key with a lease of its own; a
 * waiter looks again whenever a key of the line is deleted. N is not
 * stored there, so nothing refuses a different N: every user must give
 * the same. A lock or `etcdctl lock` of the same name is a key in that
 * line and takes a permit while among the first N (docs/primitives.md).
 *
 * @param permits 1..DLOCK_PERMITS_MAX.
 * @param opts    as for dlock_lock_new(); flags may hold DLOCK_AUTO_RENEW
 *                and DLOCK_NO_FENCE only (a mode flag: DLOCK_EINVAL).
 * @return DLOCK_OK, DLOCK_EINVAL (as dlock_lock_new(), 0 or too many
 *         permits, a mode flag), DLOCK_ENOTSUP (several nodes: permits
 *         counted per node do not add up over a majority, see
 *         docs/primitives.md), DLOCK_ENOMEM.
 */
DLOCK_EXTERN(int)
dlock_semaphore_new(dlock_lock **out, dlock_client *client, const char *name,
                    unsigned permits, const dlock_lock_options *opts);

/** Most names a multi-name lock may take. */
#define DLOCK_MULTI_MAX 1024

/**
 * Create one handle for several lock names taken together: an acquire
 * holds every name or none (what it took is released before it returns a
 * failure), and a release gives back all of them. The names are taken in
 * one fixed order (bytewise sorted), so two callers taking {a, b} and
 * {b, a} cannot deadlock. Each name is a lock of the kind @p opts asks for
 * (plain, DLOCK_EXCLUSIVE, DLOCK_SHARED, DLOCK_REENTRANT: not DLOCK_FAIR)
 * with its own key, token and fencing counter; on several nodes each name
 * is a Redlock lock.
 *
 * One validity for the set: dlock_lock_validity_ms() is the least of the
 * names' (an acquire whose first names' leases ran out while it waited for
 * the later ones gives them all back and tries again). DLOCK_AUTO_RENEW
 * renews every name (in the one watchdog's batches); the loss of any name
 * makes the set lost (on_lost runs once, with this handle). extend pushes
 * every name's lease out. dlock_lock_name() is the sorted names separated
 * by spaces; dlock_lock_token() and dlock_lock_fence() are the first
 * name's. dlock_lock_adopt() is refused (DLOCK_EINVAL).
 *
 * @param names   @p n_names NUL-terminated names, each as for
 *                dlock_lock_new(), no two equal.
 * @param n_names 1..DLOCK_MULTI_MAX.
 * @return DLOCK_OK, DLOCK_EINVAL (NULL, no names, an empty, long or
 *         repeated name, bad options), DLOCK_ENOTSUP (DLOCK_FAIR, or a
 *         kind the client's nodes do not support), DLOCK_ENOMEM.
 */
DLOCK_EXTERN(int)
dlock_lock_new_multi(dlock_lock **out, dlock_client *client, const char *const *names,
                     size_t n_names, const dlock_lock_options *opts);

/** Release the lock if this handle holds it (best effort, errors ignored;
 *  see dlock_lock_forget() to keep it), stop its renewal and free the
 *  handle. NULL is accepted. On a client made with an event loop it does
 *  not wait: a pending request's callback runs inside it with
 *  DLOCK_ECANCELED, and the release finishes on the loop ("Locks on an
 *  event loop"). */
DLOCK_EXTERN(void) dlock_lock_free(dlock_lock *lock);

/**
 * Acquire the lock. A handle the watchdog found lost starts over: it first
 * takes its old token out of the store should it still be there (as
 * dlock_lock_release() does), then acquires as an unlocked one would.
 *
 * @param wait_ms 0: try once. > 0: retry until this many ms have passed.
 *                DLOCK_WAIT_FOREVER: retry until acquired or cancelled.
 * @return DLOCK_OK (held; see dlock_lock_token(), dlock_lock_fence()),
 *         DLOCK_ENOTACQUIRED (wait_ms == 0 and held by another owner;
 *         with several nodes: some node said so and the failing nodes are
 *         a minority),
 *         DLOCK_ETIMEDOUT (still held by another owner at the deadline),
 *         DLOCK_ECANCELED, DLOCK_EINVAL (negative wait other than
 *         DLOCK_WAIT_FOREVER; the handle already holds a non-reentrant lock;
 *         two of the client's URLs turned out to reach one server, by its
 *         run_id: nothing is granted and the message names both URLs),
 *         or a node error: DLOCK_EIO, DLOCK_EUNKNOWN, DLOCK_EAUTH,
 *         DLOCK_EWRONGTYPE, DLOCK_EREFUSED, DLOCK_EBUSY, DLOCK_ETLS,
 *         DLOCK_EPROTO (single node), DLOCK_ENOREPLICAS (single node with
 *         min_replicas), DLOCK_ENOQUORUM (several nodes), DLOCK_ENOMEM.
 *         Node errors end a wait at once except DLOCK_EBUSY, DLOCK_EIO and
 *         DLOCK_EUNKNOWN (with several nodes: when every failing node
 *         failed that way), which are retried until the deadline: a wait
 *         rides out a node restart. Try once first (wait_ms == 0) to fail
 *         fast on an unreachable node. When an
 *         attempt's outcome is unknown, dlock sends a release for it before
 *         returning or retrying.
 */
DLOCK_EXTERN(int) dlock_lock_acquire(dlock_lock *lock, int64_t wait_ms);

/**
 * Release the lock. Only deletes the key if it still holds our token.
 * In reentrant mode, decrements the hold count and deletes at zero.
 *
 * @return DLOCK_OK, DLOCK_ENOTHELD (this handle holds nothing),
 *         DLOCK_ENOTOWNER (another owner's token is there now),
 *         DLOCK_EEXPIRED (the key was gone), DLOCK_ELOST (the watchdog
 *         found it lost, in a round that ended before or during this call:
 *         a release never answers DLOCK_EEXPIRED for a loss that on_lost
 *         reports; the release still takes our token out should a renewal
 *         that reached a stalled node late have kept it there, except in
 *         DLOCK_REENTRANT mode, whose token is the owner's), or a node
 *         error. After any return but DLOCK_OK with
 *         holds left (reentrant), the handle holds nothing and nothing of
 *         it is renewed any more: a failed release of one of several
 *         counted holds drops them all from the handle, and the count left
 *         in Redis ends with its TTL.
 *         A release that may not have run on a node (no reply, or an
 *         error such as OOM) is sent again before the handle's next
 *         acquire and on dlock_lock_free(), so a node that answers again
 *         does not keep the key (or a fair line) until its TTL. Sending it
 *         again is safe: release compares the token, and a counted
 *         release carries an operation number applied at most once.
 *         On etcd, a release that no member answered (DLOCK_EUNKNOWN,
 *         DLOCK_EIO, DLOCK_EBUSY, DLOCK_ETIMEDOUT: a leader election,
 *         say) returns that code and leaves the handle unlocked, and the
 *         client sends its revoke (or its session key's delete) again in
 *         the background, with a backoff, until etcd answers or the lease
 *         has ended anyway, so the next waiter does not wait for the
 *         lease's TTL; so does a failed or cancelled wait's leave with
 *         such a code (or cut by a cancel, DLOCK_ECANCELED) once its key
 *         may exist. dlock_client_free() drops what is still owed
 *         (docs/backends.md).
 */
DLOCK_EXTERN(int) dlock_lock_release(dlock_lock *lock);

/**
 * Extend the lease: set its TTL to @p ttl_ms from now, only if still ours.
 * With several nodes, a majority must confirm within the remaining validity.
 * With DLOCK_AUTO_RENEW, a successful extend also sets the TTL the watchdog
 * renews to for the rest of this hold (its rounds come every third of it,
 * or every renew_interval_ms when that is set and below the new TTL): an
 * extend is never undone by the next round. ttl_ms 0 returns to the handle's TTL; a new hold starts
 * from the handle's TTL. With DLOCK_REENTRANT the key keeps at least
 * @p ttl_ms (a shorter extend does not cut other handles' leases); the
 * handle's validity is @p ttl_ms from now.
 *
 * @param ttl_ms new TTL, 1..DLOCK_TTL_MAX_MS, or 0 for the handle's TTL.
 * @return DLOCK_OK, DLOCK_EINVAL, DLOCK_ENOTHELD, DLOCK_ENOTOWNER,
 *         DLOCK_EEXPIRED, DLOCK_ELOST, or a node error. With several nodes,
 *         DLOCK_ENOTOWNER and DLOCK_EEXPIRED (after which the handle holds
 *         nothing) need a majority saying so; short of a majority either
 *         way it is DLOCK_ENOQUORUM and the handle keeps its lease.
 *         etcd: a lease keeps the TTL it was granted (whole seconds, and
 *         at least etcd's minimum lease, 2 s by default, to which etcd
 *         raises a shorter one): 0 always renews it to that TTL, and so
 *         does a @p ttl_ms that rounds up to it (or, when etcd raised the
 *         grant, is at most it); another moves the key to a new lease of
 *         @p ttl_ms (the fence, the token and the place in line stay; the
 *         old lease is revoked), or is DLOCK_ENOTSUP, nothing sent, when
 *         the owner's other handles share the lease (DLOCK_REENTRANT).
 *         A failed move leaves the hold on the old lease.
 */
DLOCK_EXTERN(int) dlock_lock_extend(dlock_lock *lock, int64_t ttl_ms);

/**
 * Make this handle act on a lock acquired elsewhere (for example by
 * `dlock acquire` in another process), given its owner token. After it,
 * dlock_lock_release() and dlock_lock_extend() use @p token. The token is
 * not checked with the server: one that holds nothing shows at that
 * release or extend (DLOCK_EEXPIRED, DLOCK_ENOTOWNER). The validity is
 * unknown until an extend succeeds.
 *
 * Kinds: a plain lock, DLOCK_FAIR, DLOCK_EXCLUSIVE (the token is the write
 * hold), DLOCK_SHARED (the token is one reader's share: release and extend
 * act on that share alone) and a semaphore (one holder's permit). Refused
 * with DLOCK_EINVAL, the handle unchanged: DLOCK_REENTRANT in any mode
 * (re-entry is counted per owner, client x thread, which a token from
 * elsewhere does not carry) and a multi-name handle (one token per name).
 * etcd: the token is a lease ID (16 hex digits) and names the key; the
 * key's lease is read (an extend to a new TTL moves the key to another),
 * see docs/backends.md. A DLOCK_AUTO_RENEW hold's token (on the client's
 * session) may have 16 hex digits more, the hold's fence: the hold is
 * over once its key is gone or made again (a later hold of the session
 * takes a released key again), release DLOCK_EEXPIRED, extend
 * DLOCK_ENOTOWNER.
 *
 * @return DLOCK_OK, DLOCK_ENOMEM (nothing adopted; a release this handle
 *         still owes a node is kept for its next adopt or its free),
 *         DLOCK_EINVAL (NULL, empty, over DLOCK_TOKEN_MAX bytes,
 *         not a lease ID, or one and a fence, on etcd, a "turn:" value on Redis, which is a
 *         waiting acquire's turn and no holder's token (docs/waiting.md,
 *         "Runs and turns"), a reentrant or multi-name handle, or a handle
 *         that holds a lock already), DLOCK_ENOTSUP (a zk:// client: a
 *         hold there is its session's, which no other client can take
 *         over).
 */
DLOCK_EXTERN(int) dlock_lock_adopt(dlock_lock *lock, const char *token);

/**
 * Make the handle forget the lock without releasing it: renewal stops and
 * nothing is sent; the key lives in Redis until its TTL runs out (or another
 * process releases it with the token, see dlock_lock_adopt()). For handing a
 * lock over to another process, as `dlock acquire` does.
 *
 * @return DLOCK_OK, DLOCK_EINVAL (NULL), DLOCK_ENOTHELD (nothing held),
 *         DLOCK_EBUSY (a client made with an event loop: a request of the
 *         handle is pending).
 */
DLOCK_EXTERN(int) dlock_lock_forget(dlock_lock *lock);

/** Interrupt a dlock_lock_acquire() waiting on @p lock in another thread
 *  (on a client made with an event loop, a pending
 *  dlock_lock_acquire_start(), from the loop's thread: its callback then
 *  gets DLOCK_ECANCELED):
 *  it returns DLOCK_ECANCELED within milliseconds, also when an attempt is
 *  on the wire to a stalled node (the attempt's undo is then queued behind
 *  it on the same connection and not waited for, so the node runs it right
 *  after the attempt when it answers again), or a resend of an earlier
 *  release or undo whose outcome was unknown (it stays pending for the
 *  next acquire or free). In fair mode, leaving the line after a cancel
 *  waits 100 ms at most; if the node has not answered by then, the release
 *  by the handle's token is queued behind the leave, so a lock handed to
 *  the waiter meanwhile is passed on as soon as the node answers (the
 *  handle's next acquire or free repeats both); a cancel during the leave
 *  that the wait's deadline started (or during its cleanup) ends it at
 *  once, both then queued behind it the same way.
 *  On etcd every exchange of the acquire watches the cancel (the leave
 *  after the wait's deadline too), and the lease revoke that undoes the
 *  attempt then takes at most 0.1 s, shared by the members; a revoke that
 *  does not make it is owed: the handle's next acquire sends it again
 *  first (within 0.1 s; cut again, it stays owed), or its free does;
 *  until then, or should the handle hold the lock when freed, the
 *  waiter's lease ends with its TTL (its key never holds the lock for
 *  anyone, but keeps its place in line: one TTL from its last keep-alive,
 *  or from a new leader's election when the leader changed;
 *  docs/backends.md). A cancel with no acquire in progress
 *  makes the next waiting acquire return at once; a cancel that came during a waiting acquire is used up by it,
 *  also when the acquire ended otherwise (a try answered meanwhile, a
 *  leave after the deadline). Thread-safe, except on a looped client
 *  (from the loop's thread only: it sets the loop's timers);
 *  async-signal-safe it is not. */
DLOCK_EXTERN(void) dlock_lock_cancel(dlock_lock *lock);

/** What a handle knows of its lock. */
typedef enum dlock_lock_state {
    DLOCK_STATE_UNLOCKED = 0, /**< not held through this handle */
    DLOCK_STATE_HELD = 1,     /**< held (lease may still run out) */
    DLOCK_STATE_LOST = 2      /**< the watchdog found it lost */
} dlock_lock_state;

/** Thread-safe. */
DLOCK_EXTERN(dlock_lock_state) dlock_lock_state_get(dlock_lock *lock);

/** Remaining validity in ms from the monotonic clock (0 if not held or
 *  already run out, -1 if unknown after dlock_lock_adopt()). For Redlock it
 *  is TTL minus time since sending minus drift. Thread-safe. */
DLOCK_EXTERN(int64_t) dlock_lock_validity_ms(dlock_lock *lock);

/** The owner token, or NULL when the handle holds nothing. Valid until
 *  the next call on the handle. On Redis DLOCK_TOKEN_HEX_LEN hex digits,
 *  except a fair lock's that waited on one node: 16 more, which name the
 *  client's wake-up channel (docs/waiting.md, "Addressed wake-ups"); on
 *  etcd the key's ID (16 hex digits); on ZooKeeper the hold's node name
 *  (_c_UUID-lock-SEQUENCE, Curator's). On etcd a DLOCK_AUTO_RENEW hold's
 *  key, released cleanly, is taken again by a later hold of that name on
 *  the client's session (as Go's Mutex reuses its session's key), so such
 *  a hold's token has 16 hex digits more, its fence: a token names one
 *  hold, and one kept for dlock_lock_adopt() never names a later hold. */
DLOCK_EXTERN(const char *) dlock_lock_token(const dlock_lock *lock);

/** The fencing token of the current hold: grows with every grant of this
 *  name. 0 when not held or with DLOCK_NO_FENCE. */
DLOCK_EXTERN(uint64_t) dlock_lock_fence(const dlock_lock *lock);

/** The lock name given at creation (without the client's key_prefix). */
DLOCK_EXTERN(const char *) dlock_lock_name(const dlock_lock *lock);

/** Hold count in reentrant mode (1 in plain mode when held, else 0). */
DLOCK_EXTERN(unsigned) dlock_lock_hold_count(const dlock_lock *lock);

/** Remaining TTL of what kept the last acquire out (during a wait: the
 *  latest look), in ms; -1 if unknown: the other owner's lease; for a
 *  shared request a waiting writer's mark; for a writer kept out by
 *  shared holders the last share's lease; for a full semaphore the time
 *  until its first lease ends. dlock_client_holders() tells which of
 *  these it is (the dlock command names it). Thread-safe: a
 *  progress reporter may read it while another thread waits. */
DLOCK_EXTERN(int64_t) dlock_lock_holder_ttl_ms(const dlock_lock *lock);

/** Detail message of the last failed call on this handle (names the node
 *  and quotes the server), or "" after a success. Valid until the next
 *  call on the handle. */
DLOCK_EXTERN(const char *) dlock_lock_errmsg(const dlock_lock *lock);

/**@}*/

/* ------------------------------------------------------------------------ */
/** @name Elections
 *  One leader among candidates, built on a DLOCK_FAIR lock of the
 *  election's name (docs/elections.md): a candidate campaigns by waiting
 *  in line for that lock (standbys are served in arrival order), leads
 *  while it holds it (renewed by the client's watchdog), and resigns by
 *  releasing it. Each term's fencing token is the lock's fence: it
 *  strictly grows from term to term. Beside the lock the leader keeps a
 *  value (its address, say) that anyone may read (dlock_election_leader())
 *  or follow (dlock_election_observe()).
 *
 *  Stores: Redis wherever DLOCK_FAIR is served (one node, a Cluster, a
 *  Sentinel-managed primary); a Redlock, which keeps no line (each node's
 *  order could differ): there the term is a DLOCK_AUTO_RENEW lock without
 *  DLOCK_FAIR, so standbys contend rather than queue first come, first
 *  served (a dead leader is still replaced within its lease, a resign
 *  frees the term at once), the value is written to a majority (a
 *  proclaim that reached fewer is DLOCK_ENOQUORUM, yet may be read while
 *  a node that took it answers; a node restarted empty gets the value
 *  back with the term's key), the leader is the holder of a majority,
 *  and the fence grows only while the nodes keep their counters (run
 *  them with persistence) (docs/elections.md, "Redlock"); and etcd, where
 *  dlock uses the layout of etcd's own election (clientv3/concurrency:
 *  keys NAME/LEASE with the value as the key's value), so that
 *  `etcdctl elect` and dlock elect against and observe each other; and
 *  ZooKeeper, where dlock uses the layout of Curator's LeaderSelector
 *  (its InterProcessMutex line, each candidate's node holding its value
 *  as the participant id), so that a LeaderSelector and dlock elect
 *  against and see each other; there the session's timeout is the term's
 *  lease (ttl_ms is not used) and the fence is the node's czxid. Not on
 *  a client made with an event loop (DLOCK_EINVAL): the election's calls
 *  block.
 *
 *  Threading: as for a lock handle. One thread at a time calls
 *  dlock_election_campaign(), _proclaim(), _resign() and _free() on a
 *  handle; dlock_election_leader() and dlock_election_observe() may run on
 *  other threads meanwhile (each observe call on its own thread), and
 *  dlock_election_cancel() from any thread. on_lost runs on the client's
 *  watchdog thread, as a lock's (dlock_lost_fn; its lock argument is
 *  dlock_election_lock()). */
/**@{*/

typedef struct dlock_election dlock_election;

#define DLOCK_ELECTION_OPTIONS_VERSION 1

/** Longest value a candidate may proclaim, in bytes (without the NUL). */
#define DLOCK_ELECTION_VALUE_MAX 65536

/** Election options. Initialise with DLOCK_ELECTION_OPTIONS_INIT; versioned
 *  as dlock_lock_options. The term's lock is a DLOCK_FAIR |
 *  DLOCK_AUTO_RENEW lock with these fields (on a Redlock DLOCK_AUTO_RENEW
 *  only). */
typedef struct dlock_election_options {
    unsigned int version; /**< DLOCK_ELECTION_OPTIONS_VERSION */
    /** A term's lease: a leader that dies (or stalls) is replaced within
     *  it. 1..DLOCK_TTL_MAX_MS (etcd: whole seconds, rounded up;
     *  ZooKeeper: not used, the client's session timeout is the lease);
     *  default 30000. */
    int64_t ttl_ms;
    /** Watchdog period; 0 means ttl_ms / 3. */
    int64_t renew_interval_ms;
    /** A standby's backoff bounds while it waits (as for a lock);
     *  defaults 10 and 200; 1..60000. */
    int64_t retry_min_ms;
    int64_t retry_max_ms;
    /** Called once when the watchdog finds the term lost (the lease ran
     *  out or another owner holds the lock): the leader must stop acting
     *  as one. See dlock_lost_fn; may be NULL. */
    dlock_lost_fn on_lost;
    void *on_lost_arg;
    /** Lock-delay of a term that ends without a resign (docs/lock-delay.md):
     *  after a leader killed or cut off, no candidate with a delay leads
     *  until this long past its lease's end; a resign frees the term at
     *  once. 0 (the default) none; Redis and etcd (ZooKeeper:
     *  DLOCK_ENOTSUP). */
    int64_t lock_delay_ms;
} dlock_election_options;

/** The defaults, by field name (see DLOCK_CLIENT_OPTIONS_INIT). */
#ifdef __cplusplus
#define DLOCK_ELECTION_OPTIONS_INIT dlock__election_options_defaults()
#else
#define DLOCK_ELECTION_OPTIONS_INIT                                            \
    {                                                                          \
        .version = DLOCK_ELECTION_OPTIONS_VERSION, .ttl_ms = 30000,            \
        .retry_min_ms = 10, .retry_max_ms = 200                                \
    }
#endif

/** Fill @p opts with the defaults for @p version
 *  (1..DLOCK_ELECTION_OPTIONS_VERSION). DLOCK_EINVAL for NULL or an unknown
 *  version. */
DLOCK_EXTERN(int)
dlock_election_options_init(dlock_election_options *opts, unsigned int version);

#ifdef __cplusplus
static inline dlock_election_options dlock__election_options_defaults(void)
{
    dlock_election_options o;
    dlock_election_options_init(&o, DLOCK_ELECTION_OPTIONS_VERSION);
    return o;
}
#endif

/**
 * Create a handle for the election called @p name. Takes nothing in the
 * store.
 *
 * @param out    receives the handle; NULL on error.
 * @param client the client; must outlive the handle.
 * @param name   1..DLOCK_NAME_MAX bytes, NUL-terminated: the name of the
 *               term's lock (the client's key_prefix applies; on etcd the
 *               keys are NAME/LEASE, as etcdctl's; on ZooKeeper a path,
 *               or "/" + NAME, as for a lock).
 * @param opts   options or NULL for the defaults.
 * On a looped client the election's verbs are
 * dlock_election_campaign_start() and dlock_election_resign_start().
 *
 * @return DLOCK_OK, DLOCK_EINVAL (NULL out, client or name, an empty or
 *         long name, an option out of range, an unknown version),
 *         DLOCK_ENOTSUP (lock_delay_ms on ZooKeeper),
 *         DLOCK_ENOMEM. Thread-safe.
 */
DLOCK_EXTERN(int)
dlock_election_new(dlock_election **out, dlock_client *client, const char *name,
                   const dlock_election_options *opts);

/** Free the handle; resigns first if it leads (best effort). NULL is a
 *  no-op. Not while another thread is inside a call on the handle. */
DLOCK_EXTERN(void) dlock_election_free(dlock_election *e);

/**
 * Campaign: wait in line (on a Redlock: contend) until this handle leads,
 * then publish @p value as the leader's. Returns once the value is visible
 * to dlock_election_leader() (on Redis it is written right after the
 * grant, stamped with the term, and on a Redlock counts once a majority
 * wrote it; on etcd it is the key's value from its creation).
 *
 * @param value   0..DLOCK_ELECTION_VALUE_MAX bytes, NUL-terminated.
 * @param wait_ms 0 (try once), a maximum wait, or DLOCK_WAIT_FOREVER.
 * @return DLOCK_OK (leading: dlock_election_fence() is the term's fence),
 *         DLOCK_EINVAL (NULL handle or value, a value over
 *         DLOCK_ELECTION_VALUE_MAX, a negative wait_ms other than
 *         DLOCK_WAIT_FOREVER, a handle that leads already, a looped
 *         client: dlock_election_campaign_start()),
 *         DLOCK_ENOTACQUIRED (try once: another candidate leads),
 *         DLOCK_ETIMEDOUT, DLOCK_ECANCELED (dlock_election_cancel()), or a
 *         node error as dlock_lock_acquire() returns. A term whose value
 *         could not be written is resigned before the error returns.
 */
DLOCK_EXTERN(int)
dlock_election_campaign(dlock_election *e, const char *value, int64_t wait_ms);

/**
 * Proclaim: replace the leader's value, only while this handle leads (the
 * store checks that the term is still ours: Redis compares the holder's
 * token in a script, etcd the key's create revision in a transaction).
 *
 * @return DLOCK_OK, DLOCK_EINVAL (NULL handle or value, a value over
 *         DLOCK_ELECTION_VALUE_MAX, a looped client), DLOCK_ENOTHELD (not leading),
 *         DLOCK_ENOTOWNER or DLOCK_EEXPIRED (the term ended in the store,
 *         on a Redlock on a majority of the nodes: nothing written, or
 *         not where it counts; on_lost runs first, once, as when the
 *         watchdog finds the loss, and the handle leads no more: it is
 *         let go), or a node error (a Redlock: DLOCK_ENOQUORUM, written
 *         on no majority either way; the term is kept).
 */
DLOCK_EXTERN(int) dlock_election_proclaim(dlock_election *e, const char *value);

/**
 * Resign: end this handle's term (release its lock), handing the lead to
 * the next standby in line at once (on a Redlock: waking the standbys,
 * one of which takes it).
 *
 * @return as dlock_lock_release(): DLOCK_OK, DLOCK_EINVAL (a looped
 *         client: dlock_election_resign_start()), DLOCK_ENOTHELD (not leading),
 *         DLOCK_ELOST, DLOCK_ENOTOWNER, DLOCK_EEXPIRED, or a node error;
 *         the handle leads no more after any of them.
 */
DLOCK_EXTERN(int) dlock_election_resign(dlock_election *e);

/**
 * Read the current leader: its term's fence and its value. Nobody leads
 * (DLOCK_OK, *fence 0, @p value "") while the lock is free and during a
 * new term's first moments on Redis, before its leader wrote its value: a
 * term's fence is never shown with an earlier term's value.
 *
 * @param fence     receives the leader's fence, 0 if nobody leads.
 * @param value     receives the value, NUL-terminated, cut to
 *                  @p value_len - 1 bytes; may be NULL with value_len 0.
 * @param value_len the size of @p value.
 * @param full_len  if not NULL, receives the value's whole length (more
 *                  than @p value_len - 1: it was cut).
 * On a Redlock the leader is the holder of a majority of the nodes, its
 * value from a node stamped with its term.
 *
 * @return DLOCK_OK, DLOCK_EINVAL (NULL handle or fence, NULL value with
 *         value_len > 0), or a node error; on a Redlock
 *         DLOCK_ENOQUORUM (*fence 0) when the nodes that answered cannot
 *         tell who leads (fewer than a majority answered, or a holder
 *         short of a majority that the silent nodes could complete).
 *         Thread-safe.
 */
DLOCK_EXTERN(int)
dlock_election_leader(dlock_election *e, uint64_t *fence, char *value, size_t value_len,
                      size_t *full_len);

/** Called by dlock_election_observe() with the leader: first the current
 *  one, then at every change (a new term, a proclaim, nobody leading:
 *  fence 0 and value ""). Runs on the observing thread. Return 0 to go on
 *  observing, anything else to stop (observe then returns DLOCK_OK). */
typedef int (*dlock_leader_fn)(void *arg, uint64_t fence, const char *value,
                               size_t value_len);

/**
 * Observe the election: call @p cb with the leader now and at every
 * change, in order, until @p cb returns non-zero, @p wait_ms passes, or
 * dlock_election_cancel(). Changes are pushed by the store, not polled:
 * on Redis the election's wake-up channel (a resign's release message, a
 * leader's value write), plus one look when the leader's lease would end
 * (a leader that died publishes nothing); on etcd a watch on the
 * election's prefix. Changes that come faster than a look may be
 * merged: the callback sees every leader that was current at one of its
 * looks, never one out of order. A transient node error (see
 * dlock_error_is_transient()) is ridden out, with backoff.
 *
 * @return DLOCK_OK (the callback stopped it), DLOCK_ETIMEDOUT,
 *         DLOCK_ECANCELED, DLOCK_EINVAL (NULL handle or cb, a negative
 *         wait_ms other than DLOCK_WAIT_FOREVER, a looped client), or a
 *         node error that is not transient.
 */
DLOCK_EXTERN(int)
dlock_election_observe(dlock_election *e, int64_t wait_ms, dlock_leader_fn cb, void *arg);

/** Interrupt a dlock_election_campaign() or dlock_election_observe()
 *  waiting on @p e in another thread, or that has just been called there
 *  (on a looped client: a pending dlock_election_campaign_start(), from
 *  the loop's thread):
 *  it returns DLOCK_ECANCELED (an observe then calls its callback no
 *  more). A cancel with neither in progress makes the next campaign
 *  return at once (as dlock_lock_cancel()); one that met only an observe
 *  does not. Thread-safe. */
DLOCK_EXTERN(void) dlock_election_cancel(dlock_election *e);

/** This handle's term's fence while it leads, else 0. */
DLOCK_EXTERN(uint64_t) dlock_election_fence(const dlock_election *e);

/** The term's lock: its state (dlock_lock_state_get()), validity, token,
 *  name and detail message. Owned by the election; do not free it, nor
 *  acquire or release it directly. */
DLOCK_EXTERN(dlock_lock *) dlock_election_lock(dlock_election *e);

/** The callback of dlock_election_campaign_start() and
 *  dlock_election_resign_start(): @p rc is what the blocking call returns
 *  (the term lock's message says why, dlock_lock_errmsg()). */
typedef void (*dlock_election_done_fn)(dlock_election *election, int rc, void *arg);

/**
 * dlock_election_campaign() on a looped client (dlock_client_options.loop;
 * "Locks on an event loop" says how a looped client's requests run):
 * wait in line on the loop and publish @p value; @p cb(e, rc, arg)
 * follows from the loop, never inside this call, once the value is
 * visible (on Redis the value's write is one more request on the loop
 * after the grant; a term whose value could not be written is resigned
 * before cb hears the error). A looped client's election takes its other
 * verbs so: dlock_election_resign_start(); dlock_election_leader() blocks
 * the calling thread for its round trip, as the inspection calls do;
 * dlock_election_campaign(), dlock_election_proclaim(),
 * dlock_election_resign() and dlock_election_observe() are DLOCK_EINVAL
 * there (a blocking observe needs a thread and a client of its own).
 * dlock_election_cancel() ends a pending campaign's wait (cb gets
 * DLOCK_ECANCELED); dlock_election_free() with one pending calls cb with
 * DLOCK_ECANCELED inside it and lets the term go on the loop, as
 * dlock_lock_free() does. On Redis, observers hear of a looped leader's
 * dlock_election_resign_start() at once, but of a term let go by
 * dlock_election_free() only from the next leader's value write, or at
 * the term's lease end when the next standby in line is stopped or dead:
 * resign first where that matters.
 *
 * @return DLOCK_OK (started), or without a callback: DLOCK_EINVAL (NULL
 *         handle, value or cb, a client with no loop, a value over
 *         DLOCK_ELECTION_VALUE_MAX, a handle that leads already),
 *         DLOCK_EBUSY (a campaign or resign of the handle is pending),
 *         DLOCK_ENOMEM. A bad wait_ms comes through cb, as for
 *         dlock_lock_acquire_start().
 */
DLOCK_EXTERN(int)
dlock_election_campaign_start(dlock_election *e, const char *value, int64_t wait_ms,
                              dlock_election_done_fn cb, void *arg);

/** dlock_election_resign() on a looped client: @p cb(e, rc, arg) follows
 *  from the loop with what the blocking call returns.
 *  @return DLOCK_OK (started), or without a callback: DLOCK_EINVAL (NULL
 *          handle or cb, a client with no loop), DLOCK_EBUSY (a campaign or
 *          resign is pending), DLOCK_ENOMEM. */
DLOCK_EXTERN(int)
dlock_election_resign_start(dlock_election *e, dlock_election_done_fn cb, void *arg);

/**@}*/

/** @name Locks on an event loop
 *  On a looped client (dlock_client_options.loop) a lock is taken, let go
 *  and extended with these verbs: each starts a request and returns at
 *  once; the callback runs once, from the loop, with the code the blocking
 *  verb would have returned (and the handle's message set the same way).
 *  It never runs inside the call that started it, even when the answer is
 *  known at once (an argument the blocking verb would refuse: that code,
 *  from the loop's next turn).
 *
 *  Threading: a looped client and its handles are used from the loop's
 *  thread only, callbacks included (dlock makes no thread for it: the
 *  watchdog's renewals, the wake-up subscriptions and on_lost run on the
 *  loop too; a zk:// client alone keeps its ZooKeeper session's thread,
 *  which never runs a callback). From a callback any call may be made, on any lock of the
 *  client, the callback's own included (start its next request, free
 *  it). One request at a time per handle: a start while one is pending
 *  returns DLOCK_EBUSY. The blocking verbs (dlock_lock_acquire(),
 *  dlock_lock_release(), dlock_lock_extend(), dlock_lock_adopt()) return
 *  DLOCK_EINVAL on a looped client: they would block the loop. The
 *  inspection calls (dlock_client_status() and the like) still block the
 *  calling thread for their round trips.
 *
 *  Connections: the requests of every lock of a looped client share one
 *  connection per Redis node (one node, each Redlock node, a Sentinel
 *  primary), pipelined: what the loop's turn queued goes out in one write
 *  and the replies come back in order, as hiredis's async context does.
 *  A Cluster's masters still take a pooled connection per request, as do
 *  requests that wait for replicas (min_replicas: a WAIT holds up its
 *  connection). Each request keeps its own I/O timeout; one that times out
 *  moves later requests to a new connection, as does a connection that
 *  owes replies and has read none for 100 ms (a stalled path), so no
 *  request waits behind a silent one for long. A request's commands still
 *  queued when it times out or is cancelled may yet run (the connection
 *  sends them when it can): it reports DLOCK_EUNKNOWN, never "not sent",
 *  and an acquire's undo goes behind them. With nobody waiting the
 *  connection is off the loop, so the loop can end while the client lives.
 *  A waiting acquire also holds one eventfd (its cancel) while it waits.
 *
 *  dlock_lock_cancel() ends a pending acquire: its callback gets
 *  DLOCK_ECANCELED (or what it got meanwhile). A pending release or extend
 *  is not cut; it ends within the I/O timeout.
 *
 *  dlock_lock_free() on a looped client does not wait: a pending
 *  request's callback runs inside it, with DLOCK_ECANCELED; the handle is
 *  then gone for the caller, and dlock finishes on the loop what the
 *  blocking free does (the pending request's end, then the release of a
 *  lock still held). dlock_client_free() likewise returns at once and
 *  ends the client's work on the loop (a renewal round in flight, those
 *  handles' ends) before the last of its memory goes: keep turning the
 *  loop until it has no more of dlock's records, as after libuv's
 *  uv_close(). */
/**@{*/

/** The callback of a _start verb: @p rc is what the blocking verb returns. */
typedef void (*dlock_done_fn)(dlock_lock *lock, int rc, void *arg);

/** dlock_lock_acquire() on a looped client: @p cb(lock, rc, arg) follows
 *  from the loop.
 *  @return DLOCK_OK (started), or without a callback: DLOCK_EINVAL (NULL
 *          lock or cb, a client with no loop, a handle used after fork()),
 *          DLOCK_EBUSY (a request of this handle is pending),
 *          DLOCK_ENOMEM. */
DLOCK_EXTERN(int)
dlock_lock_acquire_start(dlock_lock *lock, int64_t wait_ms, dlock_done_fn cb, void *arg);

/** dlock_lock_release() on a looped client; returns as
 *  dlock_lock_acquire_start(). */
DLOCK_EXTERN(int)
dlock_lock_release_start(dlock_lock *lock, dlock_done_fn cb, void *arg);

/** dlock_lock_extend() on a looped client; returns as
 *  dlock_lock_acquire_start(). */
DLOCK_EXTERN(int)
dlock_lock_extend_start(dlock_lock *lock, int64_t ttl_ms, dlock_done_fn cb, void *arg);

/** Whether a request of @p lock is pending (1) or not (0; also for NULL). */
DLOCK_EXTERN(int) dlock_lock_pending(const dlock_lock *lock);

/**@}*/

#ifdef __cplusplus
}
#endif

#endif /* DLOCK_H */
