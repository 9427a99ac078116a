/* SPDX-License-Identifier: BSD-3-Clause */
/* Test helper: a key put straight through the etcd client layer, as
 * another client (etcdctl, a Go program) would put one in a lock's line. */
#ifndef DLOCK_TEST_ETCD_KEYS_H
#define DLOCK_TEST_ETCD_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "etcd_http.h"

/* Create key (len bytes, any bytes; its value the key) through e with
 * lease attached, if absent. *rev (may be NULL): its create revision.
 * DLOCK_OK, or the error with its message in msg (msg_len bytes). */
int test_etcd_put_key(dlock__etcd *e, const char *key, size_t len, int64_t lease, int64_t *rev,
                      char *msg, size_t msg_len);

/* A second client of the etcd member(s) at url, below dlock's API, to
 * look at keys and leases as another program would (500 ms connect,
 * 2000 ms I/O timeout). DLOCK_OK, or the error. */
int test_etcd_raw(dlock__etcd **out, const char *url);

#endif
