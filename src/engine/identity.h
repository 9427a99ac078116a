/* SPDX-License-Identifier: BSD-3-Clause */
/* The holder identity a client keeps beside its locks
 * (dlock_client_options.identity, docs/observing.md): the options' checks
 * and the text, made once per client. The store decides where it goes
 * (Redis: src/redis/scripts/lib/ident.lua). */
#ifndef DLOCK_IDENTITY_H
#define DLOCK_IDENTITY_H

#include <stddef.h>

#include "dlock.h"

/* DLOCK_OK, or DLOCK_EINVAL with a message in err: identity not 0 or 1,
 * identity_text without identity, or a text that is empty, longer than
 * DLOCK_IDENTITY_MAX or not printable ASCII. */
int dlock__identity_check(const dlock_client_options *o, char *err, size_t len);

/* The identity text of a client with identity on (heap, NUL-terminated):
 * identity_text, or "host=HOST pid=PID prog=PROGRAM" with HOST and
 * PROGRAM cut to 64 and 32 bytes and every byte that is not printable
 * ASCII, a space or '=' made '_'. NULL when out of memory. */
char *dlock__identity_make(const dlock_client_options *o);

#endif
