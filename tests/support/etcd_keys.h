/* SPDX-License-Identifier: BSD-3-Clause */
/* Test helper: a key put straight through the etcd client layer, as
 * another client (etcdctl, a Go program) would put one in a lock's line. */
#ifndef DLOCK_TEST_ETCD_KEYS_H
#define DLOCK_TEST_ETCD_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "dlock.h"
#include "etcd_http.h"
#include "etcd_server.h"

/* Create key (len bytes, any bytes; its value the key) through e with
 * lease attached, if absent. *rev (may be NULL): its create revision.
 * DLOCK_OK, or the error with its message in msg (msg_len bytes). */
int test_etcd_put_key(dlock__etcd *e, const char *key, size_t len, int64_t lease, int64_t *rev,
                      char *msg, size_t msg_len);

/* A second client of the etcd member(s) at url, below dlock's API, to
 * look at keys and leases as another program would (500 ms connect,
 * 2000 ms I/O timeout). DLOCK_OK, or the error. */
int test_etcd_raw(dlock__etcd **out, const char *url);

/* test_etcd_setup() of one member (options o, may be NULL) with such a
 * second client of it in *raw: 0, or -1; and its teardown. */
int test_etcd_setup_raw(test_etcd *srv, const dlock_client_options *o, dlock_client **cl,
                        dlock__etcd **raw);
void test_etcd_teardown_raw(test_etcd *srv, dlock_client *cl, dlock__etcd *raw);

/* Through e: the first key under NAME/ by create revision (the holder's)
 * into out (len bytes; "" if none), and how many keys are under NAME/
 * (up to 100). DLOCK_OK, or the error. */
int test_etcd_first_key(dlock__etcd *e, const char *name, char *out, size_t len);
int test_etcd_keys_under(dlock__etcd *e, const char *name, size_t *n);

/* The key's ID a dlock token names: its first 16 hex digits (a token of
 * 32 names the hold's fence too, in the other 16). */
unsigned long long test_etcd_token_id(const char *token);

#endif
