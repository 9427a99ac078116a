/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock_client_list() on etcd (etcd_list.c). */
#ifndef DLOCK_ETCD_LIST_H
#define DLOCK_ETCD_LIST_H

#include "common.h"
#include "etcd_http.h"

/* The held names under c's key_prefix matching pattern (a glob), in name
 * order, one callback each: DLOCK_OK, DLOCK_ECANCELED (cb stopped it),
 * DLOCK_ENOMEM or the error of a range request. */
int dlock__etcd_list(dlock_client *c, dlock__etcd *e, const char *pattern, dlock_list_fn cb,
                     void *arg);

#endif
