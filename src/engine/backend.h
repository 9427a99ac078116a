/* SPDX-License-Identifier: BSD-3-Clause */
/* The seam between the engine (engine.c: one lock's state machine, the
 * same for every store) and the store the locks live in. A backend is one
 * table of operations, chosen once when the client is created (client.c,
 * by the URL scheme) and copied into each of its handles: Redis (one node,
 * Redlock, Cluster, Sentinel, TLS: redis_backend.c) and etcd
 * (etcd_backend.c). The engine decides every state change (unlocked /
 * held / lost), the watchdog registration, the lost path and cancel; a
 * backend takes and gives back holds in its store and reports what
 * happened. docs/design.md, "Engine", draws the states. */
#ifndef DLOCK_BACKEND_H
#define DLOCK_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "op.h"
#include "renewal.h"

struct dlock__errbuf;

struct dlock__kind;
struct dlock__leader;
struct dlock__elect_watch;

/* A cancel must end a wait at once: the best-effort step that takes a
 * cancelled waiter out of a list or line (leave below: wq_leave.lua;
 * fair_leave.lua; etcd's revoke, or a session key's delete) gets this long, in ms, and otherwise its
 * entry lapses by itself or, in fair mode and on etcd, the handle's next
 * acquire or free cleans up. */
#define DLOCK__CANCEL_LEAVE_MS 100

typedef struct dlock__backend {
    const char *name;

    /* ---- clients ------------------------------------------------------ */
    /* Does this store serve these URLs (its scheme)? backends.c asks each
     * backend in turn; Redis, the last, serves the rest (and its URL
     * parser says what is wrong with them). */
    int (*wants)(const char *const *urls, size_t n_urls);
    /* The store's part of a new client (its nodes, its transport): the
     * URLs, and the options that are this store's (checked here, with a
     * message in err). c->quorum is set. close() frees it, also after a
     * failed open; forked: in a child of fork(), memory and descriptors
     * only, sending nothing. */
    int (*open)(dlock_client *c, const char *const *urls, size_t n_urls,
                const dlock_client_options *opts, char *err, size_t err_len);
    void (*close)(dlock_client *c, int forked);
    size_t (*node_count)(const dlock_client *c);
    const char *(*node_name)(const dlock_client *c, size_t i);
    /* Read-only looks (key: the client's prefix + the name). n_out >=
     * node_count. holders and list may be NULL: DLOCK_ENOTSUP. */
    int (*status)(dlock_client *c, const char *key, size_t klen, dlock_node_status *out,
                  dlock_lock_status *summary);
    int (*holders)(dlock_client *c, const char *key, size_t klen, size_t node,
                   dlock_holders_info *info, dlock_holder *out, size_t max_out);
    int (*list)(dlock_client *c, const char *pattern, dlock_list_fn cb, void *arg);
    /* dlock_client_identity() on one node: buf (len >= 1) gets the
     * holder's identity or ""; NULL: DLOCK_ENOTSUP. */
    int (*identity)(dlock_client *c, const char *key, size_t klen, size_t node, char *buf,
                    size_t len);
    /* dlock_client_holder_identity() on one node: the identity kept for
     * holder token (tlen bytes), or ""; NULL: DLOCK_ENOTSUP. */
    int (*holder_identity)(dlock_client *c, const char *key, size_t klen, size_t node,
                           const char *token, size_t tlen, char *buf, size_t len);
    /* dlock_client_lock_delay() on one node: *left_ms, the ms a
     * lock-delay still keeps new holders out (0: none pending); NULL:
     * DLOCK_ENOTSUP. */
    int (*lock_delay)(dlock_client *c, const char *key, size_t klen, size_t node,
                      int64_t *left_ms);
    /* dlock_client_break(): remove every hold of the lock at key, leaving
     * its fence and its waiters, and wake them; out filled whenever the
     * nodes were asked (dlock.h says what it holds and returns). */
    int (*break_holds)(dlock_client *c, const char *key, size_t klen, uint64_t fence,
                       dlock_break_result *out);

    /* ---- facts -------------------------------------------------------- */
    /* An extend asked after the handle's own estimate of the lease ran out
     * is still sent, and its answer believed: etcd (a keep-alive of an
     * ended lease is refused, and an ended lease never comes back). 0 for
     * Redis: a key that expired may have been taken and given back since,
     * so a late confirmation proves nothing. */
    int late_answer_counts;
    /* A set of names (set.c) may be made on this store (1), or
     * dlock_lock_new_multi() says DLOCK_ENOTSUP. Every store now: the set
     * drives each name through the engine, whatever its wait. */
    int sets;
    /* Handles with a lock-delay (dlock_lock_options.lock_delay_ms) may be
     * made on this store (1), or dlock_lock_new() says DLOCK_ENOTSUP. */
    int lock_delays;
    /* Every wait here is a place in line, whatever the kind: the engine
     * waits as for a queued kind (begin, then looks; acquire.c). etcd 1
     * (the owner is the first key by create revision), Redis 0. */
    int in_line;
    /* The renewal record's operations: the engine's lease_end, settle and
     * lost hooks, with this backend's renew (NULL: the watchdog's batched
     * Redis rounds). */
    const dlock__renewal_ops *renewal;

    /* ---- handles ------------------------------------------------------ */
    /* The kind this store serves for the kind asked for (etcd and
     * ZooKeeper: every kind, waiting in line), or NULL: DLOCK_ENOTSUP. */
    const struct dlock__kind *(*kind_for)(const dlock_client *c, const struct dlock__kind *k);
    /* The backend's part of a new handle (its keys, its record);
     * DLOCK_OK, DLOCK_ENOMEM, or DLOCK_EINVAL for a name that is no key
     * of this store (a ZooKeeper path), which dlock_lock_new() returns.
     * lock_clear frees it, also after a failed lock_init: in a fork child
     * (forked) memory only. */
    int (*lock_init)(dlock_lock *l);
    void (*lock_clear)(dlock_lock *l, int forked);

    /* ---- the operations the engine drives ------------------------------ */
    /* The engine's wait (acquire.c). try is one attempt (a queued
     * kind's: one look in line) as a request (op.h): DLOCK_OK and
     * op->done() later, exactly once, from op->loop, with op->v filled
     * (the acquire's code and message, V_RETRY when waiting
     * could help, V_SPLIT, V_QUEUED with look_ms the next look's due when
     * we may hold a place in line, the holder's TTL, the look hint); or
     * an error, and done() never comes. On DLOCK_OK the hold, its token
     * and fence are the handle's and its lease end was reported
     * (dlock__lock_granted()): the engine then makes the handle HELD (a
     * counted kind's handle that holds already took one more hold of its
     * owner). On an error the handle holds what it held before, unless
     * the backend found that hold ended and let it go
     * (dlock__engine_ended()). watch: start being woken by a release
     * (the waiter record's wake hook, waiter.h), without waiting: DLOCK_OK
     * if watched (unwatch ends it), else an error (not watched).
     * watch_ready: is the watch confirmed (a release from now on wakes
     * the waiter)? 1 yes, 0 not yet, -1 never; it may wait for that until
     * until_ns (0: only look). The backend calls the waiter's wake hook
     * when the answer changes (Redis: a node confirmed or refused the
     * subscription). Redis's try is a chain of fan-outs on op->loop
     * (attempt.h; fair.c). leave: a waiter that gives up leaves the
     * store's waiter list or line, best effort, within timeout_ms, a
     * request like try, op->v.code set by the engine to the acquire's
     * result, which the backend may turn into DLOCK_OK (a queued kind's
     * leave that finds the lock handed to it: the hold is then the
     * handle's, as a try's); any other code: nothing was sent, as for a
     * waiter not listed, and done() never comes. A queued kind's wait
     * (kinds.h, DLOCK__WAIT_QUEUE) starts with begin, a request like
     * try: settle what the last wait left and take the wait's token (its
     * place in line), answered DLOCK_OK, or why not (V_RETRY: the engine
     * backs off and begins again); and after a sleep that a message
     * ended, handed says whether that message handed the hold over (1:
     * it is the handle's, as a try's grant; 0: look again); so does
     * every wait on a store whose waits are all in line (in_line above:
     * etcd's begin gets in line, its tries look, its stream wakes the
     * sleep through the waiter record, etcd_wait.h). */
    int (*begin)(dlock_lock *l, dlock__op *op);
    int (*try)(dlock_lock *l, dlock__op *op);
    int (*watch)(dlock_lock *l);
    int (*watch_ready)(dlock_lock *l, int64_t until_ns);
    void (*unwatch)(dlock_lock *l);
    int (*leave)(dlock_lock *l, int64_t timeout_ms, dlock__op *op);
    int (*handed)(dlock_lock *l);
    /* Give back one hold of the handle's owner; last: the handle's last
     * one (a plain lock's only one). A request (op.h), as try above:
     * DLOCK_OK and op->done() later, exactly once, from op->loop, with
     * op->v.code DLOCK_OK or why not (DLOCK_ENOTOWNER, DLOCK_EEXPIRED,
     * ...); or an error, and done() never comes. Either way the state
     * change is the engine's. Redis: a chain of fan-outs on op->loop
     * (release.c); etcd: a revoke of the lease when no other handle of
     * the owner shares it, or on the client's session the key's delete
     * (etcd_release.c, etcd_session.h). A release that sends nothing
     * (a counted hold that is not the last) still answers from the loop's
     * next turn. */
    int (*release_start)(dlock_lock *l, int last, dlock__op *op);
    /* Push the lease out, a request as release_start: ttl_ms, or 0 for
     * the lease's own TTL. A confirmation after deadline_ns proves
     * nothing (INT64_MAX: unknown). On DLOCK_OK op->v.until_ns is the new
     * end of the lease (drift taken off) and op->v.renew_ttl_ms the TTL
     * that renewals keep up. The engine runs both on its call's loop
     * (call.c). */
    int (*extend_start)(dlock_lock *l, int64_t ttl_ms, int64_t deadline_ns, dlock__op *op);
    /* The TTL the renewals of a new hold keep up (etcd: the lease's). */
    int64_t (*lease_ttl_ms)(dlock_lock *l);
    /* How much of a lease of ttl_ms a renewal round's start may be off by
     * (Redlock's clock drift; 0 for etcd). */
    int64_t (*drift_ns)(dlock_lock *l, int64_t ttl_ms);
    /* Adopt: is token a holder's token of this store? DLOCK_OK, or
     * DLOCK_EINVAL with the handle's message. adopt then makes the
     * backend's record of a hold by it (DLOCK_OK or DLOCK_ENOMEM). */
    int (*adopt_check)(dlock_lock *l, const char *token, size_t len);
    int (*adopt)(dlock_lock *l, const char *token, size_t len);
    /* What a handle leaves in the store, each best effort and a request
     * as release_start (op.h): DLOCK_OK and op->done() later, exactly
     * once, from op->loop, op->v.code DLOCK_OK (what is still owed stays
     * noted on the handle for the next acquire or the free); or an error
     * (DLOCK_ENOMEM), nothing sent, and done() never comes. The engine runs them on its call's loop (call.c); on a loop
     * shared with other work a stalled node holds up none of it. Nothing
     * to send still answers from the loop's next turn. Redis: chains of fan-outs on op->loop (tidy.c);
     * etcd: settle and the lost path owe nothing here (a lease a cut leave
 * left owed waits for the next acquire's begin or the free), and the
 * free's cleanup is its release_start, or else the owed lease's revoke;
 * a release or leave with no answer is owed to the client's settler
 * instead, which sends it again in the background (etcd_owed.h).
     * settle_start: before the token changes outside an acquire (adopt),
     * settle what an earlier operation left with an unknown outcome.
     * Its answer may be DLOCK_ENOMEM, with the handle's message: what is
     * owed could only be kept under the current token, so the adopt
     * fails and changes nothing. */
    int (*settle_start)(dlock_lock *l, dlock__op *op);
    /* release_lost_start: the handle was found lost, and its holder lets
     * go (release, or the handle's next acquire): take its token out of
     * the store should it still be there, without waiting long (Redis: 50
     * ms a node at most). */
    int (*release_lost_start)(dlock_lock *l, dlock__op *op);
    /* The handle lets go of its hold without a word to the store (lost,
     * ended, forgotten): drop the backend's record of it. */
    void (*drop)(dlock_lock *l);
    /* cleanup_start: dlock_lock_free(), cleanup of everything the handle
     * left in the store (pending undos and releases, bookkeeping, holds).
     * The renewal is stopped already; the backend's record of a hold is
     * dropped by the time it answers. */
    int (*cleanup_start)(dlock_lock *l, dlock__op *op);

    /* ---- elections (election.c, docs/elections.md) --------------------- */
    /* Blocking calls of the election API on the term's fair lock; NULL:
     * no elections on this store (DLOCK_ENOTSUP). elect_value_at_grant:
     * 1 when the grant itself writes the term lock's elect_value (etcd:
     * the key's value from its creation), 0 when the engine writes it
     * with elect_write right after the grant (Redis). elect_write: the
     * value, only if l's hold is still the store's holder (DLOCK_OK,
     * DLOCK_ENOTOWNER, DLOCK_EEXPIRED, or a node error; l's message
     * set). elect_read: the leader of the election whose lock key is
     * key, as election.h says. elect_watch: start waking w (bump
     * w->woken under w->mu, broadcast w->cond) whenever the leader may
     * have changed, and return once the store confirmed it (a change from
     * then on wakes w) or could not within the client's I/O timeout:
     * DLOCK_OK (watching; elect_unwatch ends it and frees w->rec), or an
     * error (nothing to end). */
    int elect_value_at_grant;
    int (*elect_write)(dlock_lock *l, const char *value, size_t len);
    /* elect_write as a request on op->loop, for a campaign on a looped
     * client (election_loop.c); needed where elect_value_at_grant is 0.
     * It copies what it needs of l and value in the start, and answers
     * through op with op->v.code as elect_write returns it and its
     * message in *err (the starter's, alive until done()): l may be
     * freed before it answers. DLOCK_OK (started) or DLOCK_ENOMEM. */
    int (*elect_write_start)(dlock_lock *l, const char *value, size_t len, dlock__op *op,
                             struct dlock__errbuf *err);
    int (*elect_read)(dlock_client *c, const char *key, size_t klen,
                      struct dlock__leader *out);
    int (*elect_watch)(dlock_client *c, const char *key, size_t klen,
                       struct dlock__elect_watch *w);
    void (*elect_unwatch)(dlock_client *c, struct dlock__elect_watch *w);
    /* After a resign's release answered DLOCK_OK: wake the election's
     * observers, where the release alone does not (NULL: it does). Best
     * effort; elect_resigned blocks, elect_resigned_start is a request
     * on op->loop (answers DLOCK_OK through op; it returns DLOCK_OK,
     * started, or DLOCK_ENOMEM). Redis: a fair release's hand-over tells
     * the next standby alone, and a standby that is stopped or dead never
     * writes the value that would wake the observers. */
    void (*elect_resigned)(dlock_lock *l);
    int (*elect_resigned_start)(dlock_lock *l, dlock__op *op);
} dlock__backend;

/* The backend that serves these URLs (backends.c: the only list). */
const dlock__backend *dlock__backend_for(const char *const *urls, size_t n_urls);

#endif
