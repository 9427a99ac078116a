/* SPDX-License-Identifier: BSD-3-Clause */
/* An election's calls on etcd (etcd_elect.c; backend.h, "elections"). */
#ifndef DLOCK_ETCD_ELECT_H
#define DLOCK_ETCD_ELECT_H

#include <stddef.h>

#include "common.h"

struct dlock__leader;
struct dlock__elect_watch;

int dlock__etcd_elect_write(dlock_lock *l, const char *value, size_t len);
int dlock__etcd_elect_read(dlock_client *c, const char *key, size_t klen,
                           struct dlock__leader *out);
int dlock__etcd_elect_watch(dlock_client *c, const char *key, size_t klen,
                            struct dlock__elect_watch *ew);
void dlock__etcd_elect_unwatch(dlock_client *c, struct dlock__elect_watch *ew);

#endif
