/* SPDX-License-Identifier: BSD-3-Clause */
/* What a release or a leave still owes etcd after it answered (backend.h:
 * settle), sent again in the background until etcd answers it.
 *
 * A release (a lease's revoke, or on a session its key's delete) or a
 * waiter's leave that gets no definite answer (dlock__etcd_owed_unknown:
 * every member failed, or none answered within its io_timeout_ms, or
 * etcd had no leader; a leave cut by a cancel's budget too) would leave
 * the key in line until its lease ends, and every other waiter would
 * wait that long. Such a revoke or delete is handed to the client's
 * settler: one per client, made on first use, whose requests run on a
 * loop of their own (a thread, or on a looped client the application's
 * loop: loop_thread.h), never on a caller's. It sends each again with a
 * backoff (100 ms, doubling to 1 s) until etcd answers it: done, or the
 * lease or key gone ("not found"), or any other definite refusal. It
 * gives a request up once the lease has ended anyway: one TTL and an
 * election's margin (5 s) past the lease's end as last known (a key on
 * a session: the session's lease), pushed to one TTL and that margin
 * past now by each unknown answer, since with no leader no lease
 * expires and a new leader renews every lease by its TTL when it takes
 * over. "Not found" to a release sent again, when the hold was valid at
 * its first send, is that send's clean release (as etcd_release.c
 * counts it); a clean late release revokes the hold's lock-delay
 * companion too (etcd_delay.h), once, best effort.
 *
 * A waiter's leave is owed only when its place's create may have made
 * the key (a create that went out, answered or not; not one no member
 * got, nor a place whose grant failed): a wait retrying through an
 * outage makes no key and owes nothing. A newer record replaces an
 * older one for the same key on the same lease (a key on a session), or,
 * with no key, of the same handle and kind (a leave, a release). 64 records per
 * client at most: past that the oldest is dropped. A dropped record's
 * key ends with its lease, as before the settler.
 *
 * Every resend is the request that was owed: a revoke of a lease that
 * was the hold's alone (a session's only when the hold was its tainted
 * last user: etcd_session.h), or the delete of one key if it is still
 * on that lease (and has its create revision, when known). A re-acquire
 * by the same client meanwhile makes a new lease or a key of another ID:
 * a session takes again only keys its holds' own releases removed, never
 * an owed one (etcd_session.h), so no resend can touch it.
 *
 * The client's free ends the settler at once: a resend in flight is cut,
 * the rest are dropped, and those keys end with their leases, as before
 * (no free waits for a cluster with no leader). */
#ifndef DLOCK_ETCD_OWED_H
#define DLOCK_ETCD_OWED_H

#include "error.h"
#include "etcd_client.h"
#include "etcd_lock.h"
#include "loop.h"
#include "op.h"

/* Is a release's or a leave's outcome rc unknown, so that its request is
 * still owed? An I/O failure, no answer in time, etcd busy (no leader). */
int dlock__etcd_owed_unknown(int rc);

/* Who owes a request: the handle (a lease's revoke: one record per
 * handle and kind, a newer one replaces the older, which ends with its
 * lease; a key's delete is matched by its key instead), whether it
 * is a waiter's leave or a hold's release, and when the first copy went
 * out (a release's: "not found" to a resend counts as that copy's clean
 * release when the hold was valid then; INT64_MAX: never). */
typedef struct dlock__etcd_owed_by {
    const void *owner;
    int leave;
    int64_t sent_ns;
} dlock__etcd_owed_by;

/* h's revoke (or, h->on_session, its key's delete, compared with its
 * lease and, when known, its create revision) is owed: sent again by the
 * client's settler, loop the client's application loop (NULL: a thread
 * of the settler's own). Any thread; best effort: out of memory or
 * threads, nothing is sent and the lease lapses by its TTL. h is
 * copied. */
void dlock__etcd_owe(dlock__etcd_client *ec, dlock__loop *loop, const dlock__etcd_hold *h,
                     const dlock__etcd_owed_by *by);

/* The engine's release of h (etcd_release.h, dlock__etcd_release_op),
 * whose request is owed to the settler when its outcome is unknown; the
 * release answers what it answers anyway. An adopted hold's (h->rev 0:
 * its lease is read from its key first) is not owed, nor is one out of
 * memory. DLOCK_OK (done() follows) or DLOCK_ENOMEM. */
int dlock__etcd_release_owing(dlock__op *op, dlock__etcd_client *ec, dlock__loop *app,
                              const dlock__etcd_hold *h, dlock__errbuf *err);

/* Tests only (test_etcd_wait): 1 owes nothing to any settler, so that
 * what a handle keeps owed for its next acquire or free (etcd_hold.h) is
 * the only resend, as when the settler is out of memory. */
extern _Atomic int dlock__etcd_owed_off_for_tests;

/* The client's close (etcd_client.c): end the settler, cutting a resend
 * in flight; forked (a child of fork()): memory only. */
void dlock__etcd_owed_close(dlock__etcd_client *ec, int forked);

#endif
