/* SPDX-License-Identifier: BSD-3-Clause */
/* The lock handle's internals, shared by the lock-path modules (lock.c,
 * attempt.c, release.c, wait.c, fair.c, redis_backend.c). The background
 * threads never see this struct: the watchdog works on the embedded
 * renewal record and the wake-up thread on the waiter record, and only the
 * lock path changes a handle's state (through the helpers below). */
#ifndef DLOCK_HANDLE_H
#define DLOCK_HANDLE_H

#include <pthread.h>
#include <stdatomic.h>

#include "common.h"
#include "error.h"
#include "keys.h"
#include "wakeup.h"
#include "watchdog.h"

struct dlock__kind;
struct dlock__backend;
struct dlock__set;

/* Someone above a handle that follows it: a set of names follows each of
 * its names (set.c). `moved` is called on the watchdog's thread, outside
 * the handle's mutex, when a renewal round moved the handle's validity
 * (lost 0, from engine.c) or found it lost (lost: its dlock_lost_reason,
 * from dlock__lock_renew_lost()). It may take its own mutex and then the
 * handle's (that order, never the other). fn NULL: nobody. */
typedef struct dlock__watch {
    void (*moved)(void *arg, int lost);
    void *arg;
} dlock__watch;

struct dlock_lock {
    dlock_client *client;
    dlock_lock_options opts;
    const struct dlock__kind *kind;       /* fixed at dlock_lock_new (kinds.h) */
    const struct dlock__backend *backend; /* the store's operations (backend.h) */
    char ttl_s[24]; /* opts.ttl_ms in decimal, formatted once */
    size_t ttl_s_len;
    char *name; /* the Redis key: client key_prefix + the name given */
    size_t name_len;
    size_t prefix_len; /* dlock_lock_name() is name + prefix_len */
    char *fence_key; /* NULL with DLOCK_NO_FENCE */
    size_t fence_len;
    char *channel; /* wake-up channel: "dlock:wake:" + key */
    size_t channel_len;
    /* Inbox kinds on one node (kinds.h): this client's own wake-up channel
     * for the name, channel NUL tag, made by the first wait (wait.c).
     * NULL: none (yet). */
    char *inbox;
    size_t inbox_len;
    char *queue_key; /* fair mode: the waiters' list */
    size_t queue_len;
    char *live_prefix; /* fair mode: prefix of the waiters' liveness keys */
    size_t live_prefix_len;
    char *wq_key; /* wake_one kinds on one node: the waiter list (NULL: none) */
    size_t wq_len;
    char *wr_key; /* with wq_key, kinds with runs: the lock's run (NULL: none) */
    size_t wr_len;
    /* Its holder id in a run (lib/waitq.lua): client id "." hid, unique
     * across processes (a forked child makes a client of its own). */
    char run_id[DLOCK_TOKEN_HEX_LEN + 32];
    size_t run_id_len;
    /* The holder identity (kinds.h, ident): its hash KEY NUL "id", the
     * argument that goes last (NUL "id:" text; lib/ident.lua), the same
     * with no text for extend and release; all NULL when the client
     * keeps no identity. */
    char *id_key;
    size_t id_len;
    char *id_arg;
    size_t id_arg_len;
    char *id_mode; /* renew_batch.lua's mode, with the delay's part too (redis_lock.c) */
    /* The lock-delay (lib/delay.lua): its marks KEY NUL "delay" and the
     * argument NUL "dl:" ms, both sent last but the identity's; NULL and
     * 0 without a delay. */
    char *delay_key;
    size_t delay_len;
    char delay_arg[32];
    size_t delay_arg_len;
    char *aux_key; /* the kind's helper key for its acquire (kinds.h), or NULL */
    size_t aux_len;
    char aux_arg[24]; /* the kind's extra acquire argument ("" none) */
    size_t aux_arg_len;
    unsigned permits; /* semaphore: N */
    /* The handle of a set of names (dlock_lock_new_multi()): its names'
     * handles (set.c), to which the public verbs hand it; NULL for a
     * handle of one name. Such a handle has no kind and no backend. */
    struct dlock__set *set;
    /* A looped client's handle: its pending request and callback
     * (async.c); NULL on a client without a loop and for a set's names. */
    struct dlock__async *async;
    dlock__watch watch; /* who follows this handle (a name's set), if any */

    /* mu guards everything below that another thread may touch: state,
     * valid_until_ns, canceled, and the waiter record's thread fields. */
    pthread_mutex_t mu;
    pthread_cond_t cond; /* waiting acquire sleeps here */
    dlock_lock_state state;
    int canceled;
    /* A waiting acquire's cancel eventfd, in both entries ({-1, -1}
     * otherwise): cancel adds 1 so that a round trip in flight stops at
     * once, not after the I/O timeout. Made and closed by the acquiring
     * thread; written under mu. */
    int cancel_fd[2];
    /* The eventfd that wakes a waiting acquire's loop (dlock__lock_wake_fd):
     * made on the first wait that needs one, kept for the next, closed
     * when the handle is freed (in a fork child too: its copy). -1: none. */
    int wake_fd;
    int64_t valid_until_ns; /* INT64_MIN: unknown (adopted) */
    /* The lease end of the hold the running acquire took (dlock__lock_granted). */
    int64_t granted_until_ns;
    /* What the wake-up thread hands back to a waiting acquire (woken, and
     * in fair mode a hand-over to our token); its mu is ours. */
    dlock__waiter waiter;

    /* Touched only by the thread using the handle. */
    /* The owner token: token_inline for dlock's own tokens and reentrant
     * owner ids, the heap only for a longer token given to adopt(). */
    char *token;
    size_t token_len;
    char token_inline[64];
    uint64_t fence;
    unsigned holds;
    /* Reentrant mode: an attempt whose outcome stayed unknown on the nodes
     * flagged in undo_nodes, and whose undo (reentrant_undo.lua with its
     * attempt number undo_seq) has not been answered there yet. No newer
     * attempt is sent before it is: the undo relies on that. */
    uint64_t undo_seq;
    int undo_pending;
    uint8_t undo_nodes[DLOCK__MAX_NODES];
    /* Reentrant mode: the release operation being sent, number rel_seq,
     * and, while rel_pending, the nodes in rel_nodes that have not
     * answered it: it is sent again (applied at most once) before this
     * handle's next acquire. A release started while one is owed carries
     * it: the releases since the one numbered rel_base (a run, which ends
     * when no node owes it) drop rel_total holds, as many as the run's
     * releases, and the holds the handle dropped locally after one of
     * them failed (reentrant_release.lua; dlock__release_op()). */
    uint64_t rel_seq, rel_base;
    unsigned rel_total;
    int rel_pending;
    uint8_t rel_nodes[DLOCK__MAX_NODES];
    /* A release still owed by the nodes in owed_nodes when adopt changed
     * the token: the old token (heap), kept for its resends by the next
     * adopt and the free (redis_backend.c). NULL: none. */
    char *owed_token;
    size_t owed_len;
    uint8_t owed_nodes[DLOCK__MAX_NODES];
    /* Reentrant mode: this handle's id among its owner's handles (the
     * scripts keep their operation numbers per handle), and whether an
     * operation of its current holds had an unknown outcome (then its
     * bookkeeping stays in the hash until the key goes). */
    char hid[24];
    /* The owner of a counted (reentrant) hold, besides the client: on a
     * looped client the handle (there is no thread to tell tasks of one
     * loop apart), this number; 0: the calling thread (dlock__thread_no). */
    unsigned long owner_no;
    size_t hid_len;
    int in_doubt;
    int touched; /* sent an acquire: its bookkeeping may be in the key */
    /* Fair mode: an acquire ended with an unknown outcome, and the cleanup
     * by its token (leave the line; release, handing over, if it was
     * granted) has not been answered yet. The token is kept for it. */
    int fair_cleanup_pending;
    /* Fair mode's wait (fair.c), from its begin to its end: its liveness
     * refresh and the liveness key's life its looks ask for; when its
     * last look was sent and whether a hand-over may still be taken on
     * its message (dlock__fair_handed); whether a look went out (a line to
     * leave). */
    struct {
        int64_t refresh_ms, t_look;
        int on_message, in_line;
        char live_ttl[24];
    } fair;
    /* Fair mode: the acquire took a hand-over on its message, so the lock
     * has only its claim lease; the watchdog sets the full TTL this many ms
     * from now (one renewal), unless the holder lets go first. 0: none. */
    int64_t confirm_ms;
    _Atomic int64_t holder_ttl_ms; /* read by any thread (progress reports) */
    int split_vote; /* the last attempt met a split vote, not one holder */
    int delayed;    /* the last attempt was refused by a lock-delay only */
    /* The acquire in progress tries once (wait_ms 0): a writer that does
     * not wait leaves no writer-waiting mark (kinds.h, DLOCK__AUX_MARK_MS). */
    int try_once;
    int64_t look_ms; /* the last attempt's look hint (acquire.lua), -1 none */
    /* A subscribed waiting acquire's id in the waiter list (wait.c); its
     * attempts note it there. Empty (length 0) otherwise. 32 random hex
     * digits, then with an inbox the 16 of its tag (keys.h). */
    char wait_id[DLOCK_TOKEN_HEX_LEN + DLOCK__INBOX_TAG_LEN + 1];
    size_t wait_id_len;
    dlock__errbuf err;
    /* An election's term lock (election.c): the value its next grant
     * writes, on a store whose grant writes it (backend.h,
     * elect_value_at_grant: etcd's key value); NULL for every other
     * handle. The election's, valid while it campaigns. */
    const char *elect_value;
    size_t elect_value_len;
    int is_term; /* an election's term lock (election.c sets it) */
    /* Observing (observe.h): the running acquire's start and tries, the
     * hold's grant (read by the watchdog's thread when it is lost). */
    int64_t obs_start_ns;
    unsigned obs_attempts;
    _Atomic int64_t obs_held_ns;
    /* The backend's own part of the handle, which only it reads (etcd's
     * range and shared hold; NULL for Redis, whose fields are above). */
    void *store;

    /* The watchdog's record of this lock (auto-renew). Its ttl_ms is the
     * TTL the watchdog renews to: opts.ttl_ms, or the TTL of the last
     * successful extend of this hold; the handle's thread writes it only
     * while the record is not registered. */
    dlock__renewal renewal;
};

/* The kind this client's store serves for these flags (and permits, as
 * below), or NULL (DLOCK_ENOTSUP): a kind the store does not keep, or a
 * single-node kind (DLOCK_FAIR: its line is one node's) on a client of
 * several masters (Redlock). election.c asks it whether the store has a
 * fair line for its terms. */
const struct dlock__kind *dlock__lock_kind_served(const dlock_client *client, unsigned flags,
                                                  unsigned permits);

/* dlock_lock_new() for a kind chosen by the caller: a semaphore of
 * `permits` (> 0) or, with 0, the kind the flags say (create.c). Options
 * are checked here, once for every kind. */
int dlock__lock_create(dlock_lock **out, dlock_client *client, const char *name,
                       const dlock_lock_options *opts, unsigned permits);
/* dlock_lock_free()'s memory side (the store's is dlock__engine_let_go()'s,
 * not in a fork child): the handle and all it owns. */
void dlock__lock_destroy(dlock_lock *l);

/* State, under l->mu; the engine writes it (fsm.h). */
dlock_lock_state dlock__lock_get_state(dlock_lock *l);
/* A backend's acquire took a hold whose lease ends at until_ns (the
 * monotonic clock; INT64_MIN unknown): the engine makes the handle HELD
 * with it when the acquire returns DLOCK_OK. The handle's thread only. */
void dlock__lock_granted(dlock_lock *l, int64_t until_ns);
/* The cancel that stopped a round trip in flight is used up. */
void dlock__lock_take_cancel(dlock_lock *l);
/* 1 if a dlock_lock_cancel() came that no wait has used yet: it is used up
 * now (the flag, and the pipe's bytes). */
int dlock__lock_use_cancel(dlock_lock *l);
/* What every backend's acquire does before its first attempt: consume a
 * dlock_lock_cancel() that came before a waiting acquire (DLOCK_ECANCELED),
 * and start the client's watchdog for an auto-renewed lock (DLOCK_ENOMEM if
 * its thread cannot be had). Sets the handle's message on failure. */
int dlock__lock_begin_acquire(dlock_lock *l, int64_t wait_ms);
/* Sleep on the handle's condition variable until a cancel, a hand-over,
 * a wake-up message (the waiter record's count moved past `woken`) or
 * wake_at_ns; consumes nothing (the caller reads and clears the cancel). */
void dlock__lock_sleep_until(dlock_lock *l, unsigned woken, int64_t wake_at_ns);
/* A store's own watch saw what a waiter in line waits for (etcd's stream,
 * ZooKeeper's watch on the node before ours): its sleep ends as on a
 * release message (the waiter record's count moves, its loop is woken).
 * Any thread; takes the handle's mutex. */
void dlock__lock_waiter_wake(dlock_lock *l);
/* The end of the handle's lease for the watchdog's schedule (a renewal
 * record's `lease_end` hook, for every backend): INT64_MAX while it is
 * unknown (after an adopt, until an extend). `owner` is the dlock_lock. */
int64_t dlock__lock_renew_lease_end(void *owner);
/* A waiting acquire's cancel eventfd: dlock_lock_cancel() adds 1 to it
 * through cancel_fd[1], the wait polls cancel_fd[0] (the same fd). Returns
 * it, or -1
 * for a try-once or when out of descriptors (a cancel then still ends the
 * wait, after the round trip in flight). Closed by close_cancel, which
 * after a waiting acquire (wait_ms not 0) also uses up a cancel that came
 * during it but did not end it (a try that was answered, a leave after
 * the deadline): the cancel was for that acquire, not the next. */
int dlock__lock_open_cancel(dlock_lock *l, int64_t wait_ms);
/* The handle's wake-up eventfd for its waits' loops (made on first use,
 * non-blocking, close-on-exec), or -1 when out of descriptors. Used by
 * the acquiring thread only; other threads write it through the loop. */
int dlock__lock_wake_fd(dlock_lock *l);
void dlock__lock_close_cancel(dlock_lock *l, int64_t wait_ms);
/* Point the token back at the inline buffer (dropping a long adopted one,
 * which leaves the handle with the empty token). */
void dlock__lock_inline_token(dlock_lock *l);
/* A fresh random token (plain and fair kinds). */
int dlock__lock_new_token(dlock_lock *l);
/* The calling thread's number, given on its first call and never given
 * to another thread of the process: the thread half of a counted hold's
 * owner (client x thread), on every backend. Not pthread_self(): glibc
 * hands a finished thread's pthread_t to the next thread, which would then
 * re-enter holds it never took. */
unsigned long dlock__thread_no(void);
/* A verb's argument checks (the blocking verbs' and the _start verbs'):
 * DLOCK_OK, or DLOCK_EINVAL with the handle's message set. */
int dlock__lock_check_wait_ms(dlock_lock *l, int64_t wait_ms);
/* ttl_ms: 0 (the lock's TTL) or 1..DLOCK_TTL_MAX_MS. */
int dlock__lock_check_ttl_ms(dlock_lock *l, int64_t ttl_ms);
/* The owner's number of l's counted holds: dlock__thread_no(), or on a
 * looped client l's own (owner_no). */
unsigned long dlock__lock_owner_no(const dlock_lock *l);
/* Counted kinds: the owner id of the calling thread (client x thread), or
 * of the handle (client x handle) on a looped client. */
void dlock__lock_owner_id(dlock_lock *l);
/* A reentrant reader's token (kinds.h, reenter): OWNER#RANDOM. */
int dlock__lock_owner_token(dlock_lock *l);
/* The next operation number of the calling thread (counted kinds: the
 * scripts record the newest number per handle, so an undo names the
 * attempt it takes back and a lost release can be sent again). */
uint64_t dlock__lock_next_op_no(void);

#endif
