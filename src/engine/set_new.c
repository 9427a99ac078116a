/* SPDX-License-Identifier: BSD-3-Clause */
/* Making a set of names (dlock_lock_new_multi(), set.h): the names
 * checked, sorted and joined, one handle per name (the first checks the
 * options, the others get its copy), each name's watch pointed at the
 * set, and the set's own handle, which has no kind, backend or key. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "async.h"
#include "backend.h"
#include "client.h"
#include "clock.h"
#include "handle.h"
#include "set.h"

static int by_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The names checked and sorted into *sorted, and joined with spaces (for
 * the set's name) into *joined. */
static int sort_names(const char *const *names, size_t n_names, const char ***sorted,
                      char **joined)
{
    const char **v = dlock__calloc(n_names, sizeof *v);
    if (!v)
        return DLOCK_ENOMEM;
    size_t total = 0;
    int rc = DLOCK_OK;
    for (size_t i = 0; i < n_names && rc == DLOCK_OK; i++) {
        size_t len = names[i] ? strnlen(names[i], DLOCK_NAME_MAX + 1) : 0;
        if (len == 0 || len > DLOCK_NAME_MAX)
            rc = DLOCK_EINVAL;
        v[i] = names[i];
        total += len + 1;
    }
    if (rc == DLOCK_OK) {
        qsort(v, n_names, sizeof *v, by_name);
        for (size_t i = 1; i < n_names; i++)
            if (!strcmp(v[i - 1], v[i]))
                rc = DLOCK_EINVAL; /* the same name twice would wait for itself */
    }
    char *j = rc == DLOCK_OK ? dlock__malloc(total) : NULL;
    if (rc == DLOCK_OK && !j)
        rc = DLOCK_ENOMEM;
    if (rc != DLOCK_OK) {
        dlock__free(v);
        return rc;
    }
    size_t o = 0;
    for (size_t i = 0; i < n_names; i++) {
        size_t len = strlen(v[i]);
        memcpy(j + o, v[i], len);
        o += len;
        j[o++] = i + 1 < n_names ? ' ' : '\0';
    }
    *sorted = v;
    *joined = j;
    return DLOCK_OK;
}

/* The set's own handle: no kind, backend or key; its options are the
 * first name's (checked, of this version), without auto-renew (the names
 * renew themselves). Takes `joined` (not when it returns NULL). */
static dlock_lock *set_handle(dlock_client *client, char *joined, const dlock_lock *first,
                              struct dlock__set *s)
{
    dlock_lock *set = dlock__calloc(1, sizeof *set);
    if (!set)
        return NULL;
    set->client = client;
    set->wake_fd = -1; /* dlock__lock_destroy() closes it */
    set->backend = client->backend; /* its lock_clear() frees nothing: no store part */
    atomic_fetch_add(&client->live_handles, 1); /* dlock__lock_destroy() takes it back */
    set->opts = first->opts;
    set->opts.flags &= ~(unsigned)DLOCK_AUTO_RENEW;
    set->name = joined;
    set->name_len = strlen(joined);
    DLOCK__CHECK_PTHREAD(pthread_mutex_init(&set->mu, NULL));
    dlock__cond_init_monotonic(&set->cond);
    set->holder_ttl_ms = -1;
    set->cancel_fd[0] = set->cancel_fd[1] = -1;
    set->token = set->token_inline;
    set->set = s;
    return set;
}

int dlock_lock_new_multi(dlock_lock **out, dlock_client *client, const char *const *names,
                         size_t n_names, const dlock_lock_options *opts)
{
    if (out)
        *out = NULL;
    if (!out || !client || !names || n_names == 0 || n_names > DLOCK_MULTI_MAX)
        return DLOCK_EINVAL;
    if (opts && (opts->flags & DLOCK_FAIR))
        return DLOCK_ENOTSUP; /* a line per name cannot be joined in order */
    const char **sorted = NULL;
    char *joined = NULL;
    int rc = sort_names(names, n_names, &sorted, &joined);
    if (rc != DLOCK_OK)
        return rc;
    struct dlock__set *s = dlock__calloc(1, sizeof *s + n_names * sizeof s->names[0]);
    rc = s ? DLOCK_OK : DLOCK_ENOMEM;
    /* The first name checks the options; the others get its copy, without
     * the caller's on_lost: a name's loss reaches the set (its watch). */
    dlock_lock_options name_opts;
    for (size_t i = 0; rc == DLOCK_OK && i < n_names; i++) {
        rc = dlock__lock_create(&s->names[i], client, sorted[i], i ? &name_opts : opts, 0);
        if (rc != DLOCK_OK)
            break;
        s->n++;
        if (i == 0) {
            name_opts = s->names[0]->opts;
            name_opts.on_lost = NULL;
            name_opts.on_lost_arg = NULL;
        }
        if (!client->backend->sets)
            rc = DLOCK_ENOTSUP; /* not on etcd (docs/primitives.md) */
    }
    dlock_lock *set = rc == DLOCK_OK ? set_handle(client, joined, s->names[0], s) : NULL;
    if (rc == DLOCK_OK && !set)
        rc = DLOCK_ENOMEM;
    if (rc == DLOCK_OK) {
        for (size_t i = 0; i < s->n; i++) {
            s->names[i]->opts.on_lost = NULL;
            s->names[i]->opts.on_lost_arg = NULL;
            s->names[i]->watch = (dlock__watch){dlock__set_name_moved, set};
        }
    } else {
        for (size_t i = 0; s && i < s->n; i++)
            dlock__lock_destroy(s->names[i]);
        dlock__free(s);
        if (!set)
            dlock__free(joined);
    }
    dlock__free(sorted);
    *out = set;
    return dlock__async_made(out, rc);
}
