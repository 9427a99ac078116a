/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef DLOCK_CLIENT_H
#define DLOCK_CLIENT_H

#include "common.h"
#include "node.h"

struct dlock__watchdog;
struct dlock__wakeup;

struct dlock_client {
    dlock_client_options opts;
    size_t n_nodes;
    size_t quorum; /* n/2 + 1 */
    dlock__node *nodes;
    char *key_prefix; /* our copy of opts.key_prefix (opts points here) */
    /* Random id naming this client in reentrant hold counts. */
    char id[DLOCK_TOKEN_HEX_LEN + 1];
    /* Started on first use; protected by bg_mu. */
    pthread_mutex_t bg_mu;
    struct dlock__watchdog *watchdog;
    struct dlock__wakeup *wakeup;
};

/* Redlock: if two nodes turned out to be the same server (same run_id
 * once connected), write a message naming both into msg and return
 * DLOCK_EINVAL; DLOCK_OK otherwise. */
int dlock__client_check_distinct(dlock_client *c, char *msg, size_t len);

/* Pass a message to the client's on_log callback, if any. */
void dlock__client_log(dlock_client *c, dlock_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#endif
