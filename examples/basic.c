/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * basic - the dlock API in one page. Copy from here.
 *
 *   usage: basic [redis://127.0.0.1:6379]
 *
 * It takes a lock called "example:nightly-report", shows the fencing token
 * and the lease, extends the lease, shows what another owner sees while we
 * hold it, releases, and shows how errors are reported.
 *
 * Build against an installed dlock:
 *   cc basic.c $(pkg-config --cflags --libs dlock hiredis) -o basic
 */
#include <inttypes.h>
#include <stdio.h>

#include "dlock.h"

/* Print a failed call the way dlock means it to be printed: the code's
 * static description from dlock_strerror(), then the handle's detail
 * message (which node, what it said) from dlock_lock_errmsg(). */
static void report(const char *what, int rc, const dlock_lock *lock)
{
    const char *detail = lock ? dlock_lock_errmsg(lock) : "";
    fprintf(stderr, "%s: %s [%s]%s%s\n", what, dlock_strerror(rc), dlock_errname(rc),
            *detail ? ": " : "", detail);
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "redis://127.0.0.1:6379";
    dlock_client *client = NULL;
    dlock_lock *lock = NULL, *rival = NULL;
    int status = 1;
    int rc;

    /* 1. A client. Options are a versioned struct: start from the _INIT
     *    macro and change only what you need. Nothing connects yet; the
     *    first lock call does. Pass several URLs for Redlock (a majority of
     *    independent masters); the rest of this file would not change. */
    dlock_client_options copts = DLOCK_CLIENT_OPTIONS_INIT;
    copts.io_timeout_ms = 500;
    char err[256];
    rc = dlock_client_new(&client, &url, 1, &copts, err, sizeof err);
    if (rc != DLOCK_OK) {
        /* No handle exists yet, so the detail comes through errbuf. */
        fprintf(stderr, "dlock_client_new: %s: %s\n", dlock_strerror(rc), err);
        return 1;
    }

    /* 2. A handle for one lock name. The TTL is the lease: if this process
     *    dies holding the lock, Redis frees it after ttl_ms. Creating the
     *    handle takes nothing in Redis. */
    dlock_lock_options lopts = DLOCK_LOCK_OPTIONS_INIT;
    lopts.ttl_ms = 10000;
    rc = dlock_lock_new(&lock, client, "example:nightly-report", &lopts);
    if (rc != DLOCK_OK) {
        report("dlock_lock_new", rc, NULL);
        goto out;
    }

    /* 3. Acquire, waiting up to 5 s for a current holder to let go.
     *    wait_ms = 0 tries once; DLOCK_WAIT_FOREVER waits without a
     *    deadline. Only DLOCK_OK means we hold the lock. */
    rc = dlock_lock_acquire(lock, 5000);
    if (rc == DLOCK_ETIMEDOUT) {
        /* Expected when someone else holds it for long: not a failure of
         * dlock, so it deserves its own message. */
        report("still busy after 5 s", rc, lock);
        goto out;
    } else if (rc != DLOCK_OK) {
        report("acquire", rc, lock); /* e.g. DLOCK_EIO: Redis unreachable */
        goto out;
    }
    printf("acquired \"%s\": token %s, lease %" PRId64 " ms left\n", dlock_lock_name(lock),
           dlock_lock_token(lock), dlock_lock_validity_ms(lock));

    /* 4. The fencing token grows by one with every grant of this name.
     *    Send it with every write to the resource the lock protects, and
     *    have the resource refuse a token lower than one it has seen: a
     *    holder that stalled past its lease (GC pause, swapped out) then
     *    cannot overwrite its successor's work. See fenced_store.c. */
    uint64_t fence = dlock_lock_fence(lock);
    printf("fencing token: %" PRIu64 "  (write with it: PUT /report?fence=%" PRIu64 ")\n",
           fence, fence);

    /* 5. While we hold it, any other owner (another handle, process or
     *    machine) is refused. A try-once acquire says so at once, and the
     *    detail message tells how long our lease still runs. */
    if (dlock_lock_new(&rival, client, "example:nightly-report", &lopts) == DLOCK_OK) {
        rc = dlock_lock_acquire(rival, 0);
        printf("a rival trying once gets %s: %s\n", dlock_errname(rc),
               dlock_lock_errmsg(rival));
    }

    /* 6. Work longer than planned? Extend the lease before it runs out.
     *    0 means "the handle's TTL again, from now". This fails with
     *    DLOCK_EEXPIRED or DLOCK_ENOTOWNER if the lease had already ended:
     *    then stop working, someone else may hold the lock now.
     *    (DLOCK_AUTO_RENEW in lopts.flags makes a watchdog do this.) */
    rc = dlock_lock_extend(lock, 0);
    if (rc != DLOCK_OK) {
        report("extend", rc, lock);
        goto out;
    }
    printf("extended: lease %" PRId64 " ms left\n", dlock_lock_validity_ms(lock));

    /* 7. Release. It only deletes the key if it still holds our token, so
     *    a late release can never free someone else's lock. */
    rc = dlock_lock_release(lock);
    if (rc != DLOCK_OK) {
        report("release", rc, lock);
        goto out;
    }
    printf("released\n");

    /* 8. Errors are negative codes; every one has a static description and
     *    a name, and the handle keeps a detail message for its last failed
     *    call. Releasing twice is an error of the caller: */
    rc = dlock_lock_release(lock);
    printf("releasing again gives %s (\"%s\"): %s\n", dlock_errname(rc), dlock_strerror(rc),
           dlock_lock_errmsg(lock));

    status = rc == DLOCK_ENOTHELD ? 0 : 1;
out:
    /* 9. Free handles before their client. dlock_lock_free() also releases
     *    a lock the handle still holds; both accept NULL. */
    dlock_lock_free(rival);
    dlock_lock_free(lock);
    dlock_client_free(client);
    return status;
}
