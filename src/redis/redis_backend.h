/* SPDX-License-Identifier: BSD-3-Clause */
/* The Redis backend's client-level operations (backend.h), for its table
 * in redis_backend.c: the nodes of a client (redis_client.c) and the
 * read-only looks (status.c, holders.c, list.c) and the breaking of a
 * stuck lock (break.c). */
#ifndef DLOCK_REDIS_BACKEND_H
#define DLOCK_REDIS_BACKEND_H

#include <stddef.h>

#include "common.h"

int dlock__redis_open(dlock_client *c, const char *const *urls, size_t n_urls,
                      const dlock_client_options *opts, char *err, size_t err_len);
void dlock__redis_close(dlock_client *c, int forked);
size_t dlock__redis_node_count(const dlock_client *c);
const char *dlock__redis_node_name(const dlock_client *c, size_t i);

/* key: the lock's key (the client's prefix + the name), klen bytes. */
int dlock__redis_status(dlock_client *c, const char *key, size_t klen, dlock_node_status *out,
                        dlock_lock_status *summary);
/* dlock_client_identity() (status.c). */
int dlock__redis_identity(dlock_client *c, const char *key, size_t klen, size_t node, char *buf,
                          size_t len);
/* Elections (elect.c; backend.h, "elections"). */
struct dlock__leader;
struct dlock__elect_watch;
int dlock__redis_elect_write(dlock_lock *l, const char *value, size_t len);
struct dlock__op;
struct dlock__errbuf;
int dlock__redis_elect_write_start(dlock_lock *l, const char *value, size_t len,
                                   struct dlock__op *op, struct dlock__errbuf *err);
int dlock__redis_elect_read(dlock_client *c, const char *key, size_t klen,
                            struct dlock__leader *out);
int dlock__redis_elect_watch(dlock_client *c, const char *key, size_t klen,
                             struct dlock__elect_watch *ew);
void dlock__redis_elect_unwatch(dlock_client *c, struct dlock__elect_watch *ew);
/* elect_resign.c: a resign's word to the observers (backend.h). */
void dlock__redis_elect_resigned(dlock_lock *l);
int dlock__redis_elect_resigned_start(dlock_lock *l, struct dlock__op *op);
/* dlock_client_lock_delay() (status.c): delay_status.lua on one node. */
int dlock__redis_lock_delay(dlock_client *c, const char *key, size_t klen, size_t node,
                            int64_t *left_ms);
int dlock__redis_holders(dlock_client *c, const char *key, size_t klen, size_t node,
                         dlock_holders_info *info, dlock_holder *out, size_t max_out);
/* dlock_client_holder_identity() (holders.c): HGET of the identity hash. */
int dlock__redis_holder_identity(dlock_client *c, const char *key, size_t klen, size_t node,
                                 const char *token, size_t tlen, char *buf, size_t len);
int dlock__redis_list(dlock_client *c, const char *pattern, dlock_list_fn cb, void *arg);
/* redis_lock.c: the keys of a new handle's kind, and their release. */
int dlock__redis_lock_init(dlock_lock *l);
void dlock__redis_lock_clear(dlock_lock *l, int forked);
/* break.c: break.lua on every node. */
int dlock__redis_break(dlock_client *c, const char *key, size_t klen, uint64_t fence,
                       dlock_break_result *out);

#endif
