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

/* Room for need bytes in *buf: 1, or 0 out of memory. */
static int room(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 1;
    size_t grown = need > 2 * *cap ? need : 2 * *cap;
    char *p = dlock__realloc(*buf, grown);
    if (!p)
        return 0;
    *buf = p;
    *cap = grown;
    return 1;
}

size_t dlock__restore_stamp_append(dlock__restore_stamp *s, char **buf, size_t *cap, size_t at,
                                   const char *tail, size_t tail_len)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&s->mu));
    size_t n = s->bytes ? s->len + tail_len : 0;
    if (n && room(buf, cap, at + n)) {
        memcpy(*buf + at, s->bytes, s->len);
        memcpy(*buf + at + s->len, tail, tail_len);
    } else {
        n = 0;
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&s->mu));
    return n;
}
