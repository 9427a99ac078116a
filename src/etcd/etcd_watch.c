/* SPDX-License-Identifier: BSD-3-Clause */
/* A watch stream as a request on a loop (etcd_watch.h). */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "common.h"
#include "etcd_kv.h"
#include "etcd_watch.h"

/* Any event (or a cancelled watch): what an every_event watch ends on. */
static int changed(json_t *result)
{
    return json_is_true(json_object_get(result, "canceled")) ||
           json_array_size(json_object_get(result, "events")) > 0;
}

static int on_msg(json_t *result, void *arg)
{
    dlock__etcd_watch *w = arg;
    if (!w->created && json_is_true(json_object_get(result, "created"))) {
        w->created = 1;
        /* The header's revision is read after the watcher was registered
         * (etcd's v3rpc watch.go), so events after read_rev may be
         * missing only when it is later than read_rev: the caller reads
         * again then, at a revision the stream covers. */
        if (dlock__etcd_json_i64(json_object_get(result, "header"), "revision",
                                 &w->created_rev) != 0)
            w->created_rev = INT64_MAX; /* unknown: read again to be sure */
        if (w->created_rev > w->read_rev && w->moved)
            w->moved(w);
    }
    if (w->every_event ? !changed(result) : !dlock__etcd_watch_says_look(result))
        return 0;
    /* a cancelled watch (compaction) carries no events */
    w->deleted = !json_is_true(json_object_get(result, "canceled"));
    return 1;
}

/* The transfer back in the pool, the request's memory freed. */
static void let_go(dlock__etcd_watch *w)
{
    dlock__etcd_transfer_unbind(w->h);
    dlock__etcd_handle_put(w->e, w->h);
    w->h = NULL;
    free(w->text);
    w->text = NULL;
    dlock__free(w->s.buf);
    memset(&w->s, 0, sizeof w->s);
    dlock__free(w->key);
    w->key = NULL;
    w->running = 0;
}

static void stream_ended(dlock__etcd_transfer *t)
{
    dlock__etcd_watch *w = t->on_end_arg;
    int sent = 0;
    long http = 0;
    char why[300];
    int rc = t->done ? DLOCK_OK : t->over ? DLOCK_ETIMEDOUT : DLOCK_ENOMEM;
    /* A message that said "look" stopped the transfer (on_msg): curl ends
     * it with a write error, which finish() counts as the stop it is. */
    (void)dlock__etcd_exchange_finish(t, rc, &w->s, w->hdrs, &sent, &http, why, sizeof why);
    w->hdrs = NULL;
    w->look = w->s.stop && !w->s.stream_bad && !w->s.stream_code;
    let_go(w);
    w->ended(w);
}

int dlock__etcd_watch_start(dlock__etcd_watch *w, dlock__etcd *e, dlock__loop *loop,
                            const char *key, size_t key_len, const char *end, size_t end_len,
                            int64_t read_rev, int64_t deadline_ns)
{
    char token[1024] = "";
    w->running = 0;
    w->look = 0;
    w->deleted = 0;
    w->created = 0;
    w->read_rev = read_rev;
    w->created_rev = 0;
    w->started_ns = dlock__now_ns();
    w->e = e;
    w->hdrs = NULL;
    memset(&w->s, 0, sizeof w->s);
    if (e->url.user) {
        dlock__etcd_token_copy(e, token, sizeof token);
        if (!token[0])
            return DLOCK_EAUTH;
    }
    json_t *body = dlock__etcd_watch_body(key, key_len, w->every_event ? NULL : end,
                                          end_len, 0);
    if (body && w->every_event && end && /* every event of the range: no filter */
        json_object_set_new(json_object_get(body, "create_request"), "range_end",
                            dlock__etcd_json_b64(end, end_len))) {
        json_decref(body);
        body = NULL;
    }
    w->text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    w->key = w->text ? dlock__malloc(key_len + 1) : NULL;
    w->h = w->key ? dlock__etcd_handle_get(e) : NULL;
    if (!w->h) {
        free(w->text);
        w->text = NULL;
        dlock__free(w->key);
        w->key = NULL;
        return DLOCK_ENOMEM;
    }
    memcpy(w->key, key, key_len);
    w->key[key_len] = '\0';
    w->key_len = key_len;
    w->h->on_end_arg = w;
    dlock__etcd_transfer_bind(w->h, loop);
    w->s.on_msg = on_msg;
    w->s.arg = w;
    size_t ep = atomic_load(&e->current) % e->url.n;
    int rc = dlock__etcd_exchange_begin(e, w->h, ep, "/v3/watch", w->text, strlen(w->text),
                                        token[0] ? token : NULL, &w->s, &w->hdrs);
    if (rc == DLOCK_OK &&
        (rc = dlock__etcd_transfer_start(w->h, deadline_ns, stream_ended)) != DLOCK_OK) {
        char why[300];
        (void)dlock__etcd_exchange_finish(w->h, rc, &w->s, w->hdrs, &(int){0}, &(long){0}, why,
                                          sizeof why);
        w->hdrs = NULL;
    }
    w->running = 1; /* for let_go's bookkeeping below */
    if (rc != DLOCK_OK)
        let_go(w);
    return rc;
}

void dlock__etcd_watch_stop(dlock__etcd_watch *w)
{
    if (!w->running)
        return;
    dlock__etcd_transfer_end(w->h); /* cut short: curl closes its connection */
    curl_slist_free_all(w->hdrs);
    w->hdrs = NULL;
    let_go(w);
}
