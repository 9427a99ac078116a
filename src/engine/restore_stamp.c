/* SPDX-License-Identifier: BSD-3-Clause */
/* A key's stamp for its restore (restore_stamp.h). */
#include <string.h>

#include "common.h"
#include "restore_stamp.h"

dlock__restore_stamp *dlock__restore_stamp_new(void)
{
    dlock__restore_stamp *s = dlock__calloc(1, sizeof *s);
    if (!s)
        return NULL;
    DLOCK__CHECK_PTHREAD(pthread_mutex_init(&s->mu, NULL));
    atomic_init(&s->refs, 1);
    return s;
}

dlock__restore_stamp *dlock__restore_stamp_ref(dlock__restore_stamp *s)
{
    if (s)
        atomic_fetch_add(&s->refs, 1);
    return s;
}

void dlock__restore_stamp_unref(dlock__restore_stamp *s, int forked)
{
    if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
        return;
    if (!forked)
        DLOCK__CHECK_PTHREAD(pthread_mutex_destroy(&s->mu));
    dlock__free(s->bytes);
    dlock__free(s);
}

void dlock__restore_stamp_set(dlock__restore_stamp *s, char *bytes, size_t len)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&s->mu));
    char *old = s->bytes;
    s->bytes = bytes;
    s->len = len;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&s->mu));
    dlock__free(old);
}

size_t dlock__restore_stamp_copy(dlock__restore_stamp *s, char *at, size_t cap)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&s->mu));
    size_t n = s->bytes && s->len <= cap ? s->len : 0;
    if (n)
        memcpy(at, s->bytes, n);
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&s->mu));
    return n;
}

size_t dlock__restore_stamp_len(dlock__restore_stamp *s)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&s->mu));
    size_t n = s->bytes ? s->len : 0;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&s->mu));
    return n;
}
