/* SPDX-License-Identifier: BSD-3-Clause */
/* The etcd side of a dlock_client opened on etcd:// URLs: the transport
 * (endpoints, curl handles, token), the cluster's name, and room for what
 * the lock side (etcd_backend.c) keeps per client: the reentrant holds
 * and the sessions (etcd_session.h), freed through a hook it sets. client.c knows this
 * module only, so the client does not depend on the lock side (which
 * depends on the handle, which depends on the client). */
#ifndef DLOCK_ETCD_CLIENT_H
#define DLOCK_ETCD_CLIENT_H

#include <pthread.h>
#include <stddef.h>

#include "common.h"
#include "etcd_http.h"

typedef struct dlock__etcd_client {
    dlock__etcd *e;
    char *name; /* "host:port,host:port": the cluster as one node */
    int io_timeout_ms;
    /* The lock side's, under mu. */
    pthread_mutex_t mu;
    void *reentrant; /* its list of reentrant holds */
    void *sessions;  /* its table of sessions (etcd_session.h) */
    /* Set by the lock side with the above: free the holds (forked: memory
     * only). */
    void (*lock_side_free)(struct dlock__etcd_client *ec, int forked);
    /* The settler of owed revokes and deletes (etcd_owed.h), made on
     * first use under mu, or NULL; with it the hook that ends it, which
     * the close calls first (its resends use e). */
    void *owed;
    void (*owed_close)(struct dlock__etcd_client *ec, int forked);
} dlock__etcd_client;

/* 1 if the client is to be opened on etcd: urls[0] is etcd:// or etcds://. */
int dlock__etcd_wanted(const char *const *urls, size_t n_urls);

/* Open with these (checked) client options. DLOCK_OK, DLOCK_EINVAL (bad
 * or mixed URLs, credentials in the options, a TLS file that cannot be
 * loaded; message in err), DLOCK_ENOTSUP (built without etcd),
 * DLOCK_ENOMEM. */
int dlock__etcd_client_open(dlock__etcd_client **out, const char *const *urls,
                            size_t n_urls, const dlock_client_options *opts, char *err,
                            size_t err_len);

/* Close (NULL accepted); in a child of fork() (forked) free memory only. */
void dlock__etcd_client_close(dlock__etcd_client *ec, int forked);

#endif
