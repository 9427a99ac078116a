/* SPDX-License-Identifier: BSD-3-Clause */
/* A handle's part on ZooKeeper (l->store): the lock's path, the node the
 * handle has in its line (Curator's InterProcessMutex layout, so that a
 * Curator client and dlock share a lock: <path>/_c_<uuid>-lock-<seq>,
 * the owner the lowest sequence), and the one request of the engine's
 * the handle has in flight. The wait is zk_wait.c's; the hold's release,
 * extend, renewal and cleanup are zk_backend.c's. */
#ifndef DLOCK_ZK_LOCK_H
#define DLOCK_ZK_LOCK_H

#include <stdint.h>

#include "common.h"
#include "kinds.h"
#include "op.h"
#include "zk_session.h"

/* What a node's name holds between "_c_<uuid>-" and its sequence:
 * Curator's lock names, InterProcessMutex's and InterProcessReadWriteLock's
 * reader's and writer's. A node's role in the line is its name's. */
#define DLOCK__ZK_LOCK_NAME "lock-"
#define DLOCK__ZK_READ_NAME "__READ__"
#define DLOCK__ZK_WRITE_NAME "__WRIT__"
enum { DLOCK__ZK_MUTEX, DLOCK__ZK_READ, DLOCK__ZK_WRITE };

typedef struct dlock__zk_lockdata {
    dlock__zk *z;
    char path[DLOCK__ZK_PATH_MAX]; /* the lock's node: "/" + the key, or the key if it is a path */
    /* Where the handle waits in line: path, or a semaphore's path/locks
     * (Curator's InterProcessSemaphoreV2: zk_semaphore.c). */
    char line[DLOCK__ZK_PATH_MAX];
    /* Our node in the line, "" none: its path, its create zxid (the
     * fence) and the session that owns it. */
    char node[DLOCK__ZK_PATH_MAX];
    int64_t czxid;
    int64_t owner_session;
    /* A node whose delete did not get through (a cut leave, a failed
     * release): deleted before the next begin, and by the free, else it
     * stays in line as long as the session. "" none. */
    char owed[DLOCK__ZK_PATH_MAX];
    /* The path (<line>/_c_<uuid>-lock-) of a create whose answer was lost
     * with the connection: its node may be there, first in line for all
     * we know. The next create looks for it first and deletes it
     * (Curator's protected mode finds its node the same way). "" none. */
    char lost[DLOCK__ZK_PATH_MAX];
    /* A semaphore's lease node while it waits for a lease (its czxid and
     * session), "" none: the hold once granted (node then). */
    char lease[DLOCK__ZK_PATH_MAX];
    int64_t lease_czxid, lease_owner;
    /* A release's delete whose answer the connection took is sent again
     * (Curator's guaranteed delete), every 50 ms until the session
     * timeout from the release: left there, the node would keep the lock
     * from everyone until the handle's next acquire or free. */
    dlock__timer again;
    int64_t again_until_ns;
    int again_n;
    dlock__zk_watch *watch; /* the waiter's watch on the node before ours */
    dlock__zk_call call;    /* the engine's request in flight */
    dlock__op *op;
    int step;               /* what call is doing (zk_wait.c, zk_backend.c) */
    int failures;           /* looks failed in a row (their backoff) */
    int parents_made;       /* this step made the lock's ancestors already */
    int trying;             /* the step is a try's (a begin's: 0) */
    int role;               /* DLOCK__ZK_MUTEX, _READ or _WRITE: the handle's kind's */
    int reentered;          /* a counted kind's begin re-entered the hold: the try says so */
} dlock__zk_lockdata;

#define DLOCK__ZK_LD(l) ((dlock__zk_lockdata *)(l)->store)

/* The sequence of a node's name (the 10 digits after one of Curator's lock
 * names), or -1 if it is no lock node; its role in *role (may be NULL). */
int64_t dlock__zk_node_seq(const char *name, int *role);

/* The sequence of a semaphore's lease node (Curator's
 * _c_<uuid>-lease-<10 digits>), or -1 if name is no lease: a lock node
 * in a znode a lock's user named "leases" is none. */
int64_t dlock__zk_lease_seq(const char *name);

/* The role a handle of kind k takes: a reader for the shared kinds, a
 * writer for the exclusive ones, else a mutex's owner. */
int dlock__zk_role(const dlock__kind *k);

/* Whether a node of role `role` keeps one of role `mine` behind it
 * waiting: a reader waits only for writers (and mutex owners) before it,
 * as Curator's readers do; the others wait for every node before them. */
int dlock__zk_blocks(int mine, int role);

/* The lock's node for a key: the key if it is a path ("/locks/a", as
 * Curator's users name theirs), else "/" + the key. 1 if that is a
 * ZooKeeper path (no empty, . or .. segment, no trailing slash, 64 bytes
 * to spare for a node below it), else 0. */
int dlock__zk_lock_path(char *out, size_t cap, const char *key);

/* Who holds the lock at path, read as every look without a handle reads
 * it (zk_inspect.c): a line's owner (the node with the lowest sequence),
 * or its readers before the first writer, or a semaphore's leases
 * (<path>/leases, when the path holds no lock node but has that child). */
typedef struct dlock__zk_holding {
    dlock_hold_mode mode;          /* FREE, EXCLUSIVE, SHARED or SEMAPHORE */
    size_t count;                  /* holders: names[0..count), oldest first */
    size_t waiters;                /* the line's other nodes (a semaphore's locks line) */
    uint64_t fence;                /* the newest holder's czxid (the guard); 0 when free */
    char dir[DLOCK__ZK_PATH_MAX];  /* the holders' parent: path or <path>/leases */
    char **names;                  /* every child read (owned), the holders first */
    size_t n_names;
    char *data;                    /* the oldest holder's node data (owned), or NULL */
    size_t data_len;
    int64_t ctime_ms;              /* its node's create time (the server's clock) */
} dlock__zk_holding;

/* Read h for the lock at path (a ZooKeeper path): DLOCK_OK (free: count
 * 0), or the error of a call. dlock__zk_holding_clear() frees it either way. */
int dlock__zk_holding_read(dlock__zk *z, const char *path, dlock__zk_holding *h);
void dlock__zk_holding_clear(dlock__zk_holding *h);
/* A node's data as an identity: the data, " since=" and its ctime, cut
 * to len (a node without data: ""). */
void dlock__zk_identity_text(const char *data, size_t dlen, int64_t ctime_ms, char *buf,
                             size_t len);

/* dlock_client_status(), _holders(), _identity() and _holder_identity()
 * (zk_inspect.c); _break() and _list() (zk_ops.c). */
int dlock__zk_identity(dlock_client *c, const char *key, size_t klen, size_t node, char *buf,
                       size_t len);
int dlock__zk_holder_identity(dlock_client *c, const char *key, size_t klen, size_t node,
                              const char *token, size_t tlen, char *buf, size_t len);
int dlock__zk_break_holds(dlock_client *c, const char *key, size_t klen, uint64_t fence,
                          dlock_break_result *out);
int dlock__zk_list(dlock_client *c, const char *pattern, dlock_list_fn cb, void *arg);
int dlock__zk_status(dlock_client *c, const char *key, size_t klen, dlock_node_status *out,
                     dlock_lock_status *summary);
int dlock__zk_holders(dlock_client *c, const char *key, size_t klen, size_t node,
                      dlock_holders_info *info, dlock_holder *out, size_t max_out);

/* zk_wait.c's steps, for zk_semaphore.c: start a call of the wait's
 * (step: one of zk_semaphore.c's, DLOCK__ZK_SEM_STEP and up, is handed to
 * dlock__zk_sem_done), answer the engine's request, or back off after a
 * failure. */
#define DLOCK__ZK_SEM_STEP 100
int dlock__zk_wait_call(dlock_lock *l, int step, int what, const char *path);
void dlock__zk_wait_answer(dlock_lock *l, int code, unsigned flags, int64_t look_ms);
void dlock__zk_wait_failed(dlock_lock *l, int zrc);
/* A try-once not first: its node goes, and it is refused. */
void dlock__zk_wait_give_up(dlock_lock *l);
/* The waiter's watch fired (on the wait's loop: the watch's hop). */
void dlock__zk_wait_woken(void *arg);

/* A semaphore (zk_semaphore.c): first in its locks line, on to the
 * lease; a call of its steps answered; the lease of a wait that ends
 * deleted (1: started; then a refusal answered, or, refuse 0, the
 * engine's code stands). */
void dlock__zk_sem_first(dlock_lock *l);
void dlock__zk_sem_done(dlock_lock *l, dlock__zk_call *c);
int dlock__zk_sem_leave(dlock_lock *l, int refuse);

int dlock__zk_wait_begin(dlock_lock *l, dlock__op *op);
int dlock__zk_wait_try(dlock_lock *l, dlock__op *op);
int dlock__zk_wait_watch(dlock_lock *l);
int dlock__zk_wait_watch_ready(dlock_lock *l, int64_t until_ns);
void dlock__zk_wait_unwatch(dlock_lock *l);
int dlock__zk_wait_leave(dlock_lock *l, int64_t timeout_ms, dlock__op *op);
int dlock__zk_wait_handed(dlock_lock *l);

/* An election's calls (zk_elect.c; backend.h, "elections"): Curator's
 * LeaderSelector layout, the term lock's node holding the value. */
struct dlock__leader;
struct dlock__elect_watch;
int dlock__zk_elect_write(dlock_lock *l, const char *value, size_t len);
int dlock__zk_elect_read(dlock_client *c, const char *key, size_t klen,
                         struct dlock__leader *out);
int dlock__zk_elect_watch(dlock_client *c, const char *key, size_t klen,
                          struct dlock__elect_watch *w);
void dlock__zk_elect_unwatch(dlock_client *c, struct dlock__elect_watch *w);

#endif
