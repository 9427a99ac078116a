/* SPDX-License-Identifier: BSD-3-Clause */
/* The wake-up thread's channel table (wakeup_chan.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cluster.h"
#include "wakeup_chan.h"

dlock__chan *dlock__chan_find(dlock__chan *list, const char *name, size_t len)
{
    for (dlock__chan *ch = list; ch; ch = ch->next)
        if (ch->len == len && !memcmp(ch->name, name, len))
            return ch;
    return NULL;
}

dlock__chan *dlock__chan_join(dlock__chan **list, const char *name, size_t len, int inbox,
                              dlock__watcher *w, int *made)
{
    dlock__chan *ch = dlock__chan_find(*list, name, len);
    *made = 0;
    if (!ch) {
        ch = dlock__calloc(1, sizeof *ch);
        if (!ch || !(ch->name = dlock__strndup(name, len))) {
            dlock__free(ch);
            return NULL;
        }
        ch->len = len;
        ch->inbox = inbox;
        ch->master = -1;
        ch->slot = dlock__cluster_keyslot(name, len);
        ch->next = *list;
        *list = ch;
        *made = 1;
    }
    w->next = ch->watchers;
    ch->watchers = w;
    ch->idle_since_ns = 0;
    return ch;
}

int dlock__chan_leave(dlock__chan *list, const char *name, size_t len, const dlock__waiter *l)
{
    dlock__chan *ch = dlock__chan_find(list, name, len);
    if (!ch)
        return 0;
    for (dlock__watcher **pp = &ch->watchers; *pp; pp = &(*pp)->next) {
        if ((*pp)->lock == l) {
            dlock__watcher *w = *pp;
            *pp = w->next;
            dlock__free(w);
            break;
        }
    }
    if (ch->watchers)
        return 0;
    ch->idle_since_ns = dlock__now_ns();
    return 1;
}

static void wake_lock(dlock__waiter *l)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(l->mu));
    l->woken++;
    DLOCK__CHECK_PTHREAD(pthread_cond_broadcast(l->cond));
    if (l->wake)
        l->wake(l->wake_arg);
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(l->mu));
}

void dlock__chan_wake_all(dlock__chan *ch)
{
    for (dlock__watcher *w = ch->watchers; w; w = w->next)
        wake_lock(w->lock);
}

void dlock__chan_poke_all(dlock__chan *list)
{
    for (dlock__chan *ch = list; ch; ch = ch->next)
        for (dlock__watcher *w = ch->watchers; w; w = w->next) {
            dlock__waiter *l = w->lock;
            DLOCK__CHECK_PTHREAD(pthread_mutex_lock(l->mu));
            if (l->wake)
                l->wake(l->wake_arg);
            DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(l->mu));
        }
}

void dlock__chan_deliver(dlock__chan *ch, const char *msg, size_t len)
{
    for (dlock__watcher *w = ch->watchers; w; w = w->next) {
        dlock__waiter *l = w->lock;
        if (len > 2 && msg[0] == 'w' && msg[1] == ' ' && l->wait_id &&
            (len - 2 != l->wait_id_len || memcmp(msg + 2, l->wait_id, len - 2) != 0))
            continue; /* another listed waiter is woken */
        if (len > 2 && msg[0] == 'g' && msg[1] == ' ') {
            /* A hand-over: only a fair waiter's token is stable while it
             * waits (and only it can be named here). */
            if (!l->token)
                continue;
            const char *tok = msg + 2;
            const char *sp = memchr(tok, ' ', len - 2);
            size_t tlen = sp ? (size_t)(sp - tok) : len - 2;
            if (tlen != l->token_len || memcmp(tok, l->token, tlen) != 0)
                continue;
            DLOCK__CHECK_PTHREAD(pthread_mutex_lock(l->mu));
            l->handed_over = 1;
            l->handed_fence = sp ? strtoull(sp + 1, NULL, 10) : 0;
            DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(l->mu));
        }
        wake_lock(l);
    }
}

void dlock__chan_free_all(dlock__chan **list)
{
    while (*list) {
        dlock__chan *ch = *list;
        *list = ch->next;
        while (ch->watchers) {
            dlock__watcher *w = ch->watchers;
            ch->watchers = w->next;
            dlock__free(w);
        }
        dlock__free(ch->name);
        dlock__free(ch);
    }
}
