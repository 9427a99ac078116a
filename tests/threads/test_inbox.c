/* SPDX-License-Identifier: BSD-3-Clause */
/* Addressed wake-ups (docs/waiting.md, "Addressed wake-ups"): on one node,
 * a release's wake-up for one waiter (the "w ID" of a listed waiter, a fair
 * hand-over "g TOKEN FENCE") goes to that waiter's client's inbox for the
 * lock, not to the lock's channel that every waiting process subscribes,
 * so Redis delivers it to one process instead of W. A spy connection
 * subscribes to the lock's channel and to the waiter's inbox, and counts
 * what comes on each until a marker published after the hand-over. Also:
 * a waiter of an older dlock (a 32-digit id) is still woken on the lock's
 * channel, and so is a writer of a read-write lock, whose release waiting
 * readers must see. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dlock.h"
#include "redis_server.h"
#include "test_util.h"
#include "test_waiter.h"

#define TAG_LEN 16
#define MARK "end-of-test"

typedef struct spy {
    redisContext *c;
    char chan[128], inbox[160];
    size_t chan_len, inbox_len;
    int on_chan, on_inbox;   /* messages other than the marker */
    int inbox_subscribers;   /* PUBSUB NUMSUB of the inbox, the spy included */
    char last[200];          /* the last such message's payload */
    char last_where[8];      /* "chan" or "inbox" */
} spy;

/* Subscribe to lock `name`'s channel and, with a tag, to the inbox it names. */
static void spy_start(spy *s, const char *name, const char *tag)
{
    memset(s, 0, sizeof *s);
    s->chan_len = (size_t)snprintf(s->chan, sizeof s->chan, "dlock:wake:%s", name);
    s->c = test_redis_admin(&test_srv);
    assert_non_null(s->c);
    redisReply *r = redisCommand(s->c, "SUBSCRIBE %b", s->chan, s->chan_len);
    assert_non_null(r);
    freeReplyObject(r);
    if (tag) {
        memcpy(s->inbox, s->chan, s->chan_len);
        s->inbox[s->chan_len] = '\0';
        memcpy(s->inbox + s->chan_len + 1, tag, TAG_LEN);
        s->inbox_len = s->chan_len + 1 + TAG_LEN;
        r = redisCommand(s->c, "SUBSCRIBE %b", s->inbox, s->inbox_len);
        assert_non_null(r);
        freeReplyObject(r);
        /* The waiter's subscriber and ours (only ours when an ACL refused
         * the waiter's). */
        r = test_cmd_bin(&test_srv, "PUBSUB NUMSUB %b", s->inbox, s->inbox_len);
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_ARRAY);
        s->inbox_subscribers = (int)r->element[1]->integer;
        freeReplyObject(r);
    }
}

/* Publish the marker on the lock's channel and count what came before it:
 * one subscriber connection gets its messages in the order Redis ran the
 * PUBLISHes. */
static void spy_drain(spy *s)
{
    redisReply *m = test_cmd_bin(&test_srv, "PUBLISH %b %s", s->chan, s->chan_len, MARK);
    assert_non_null(m);
    freeReplyObject(m);
    for (;;) {
        void *v = NULL;
        assert_int_equal(redisGetReply(s->c, &v), REDIS_OK);
        redisReply *r = v;
        assert_int_equal(r->type, REDIS_REPLY_ARRAY);
        assert_int_equal(r->elements, 3);
        const redisReply *ch = r->element[1], *msg = r->element[2];
        int inbox = ch->len == s->inbox_len && !memcmp(ch->str, s->inbox, s->inbox_len);
        int mark = !inbox && !strcmp(msg->str, MARK);
        if (!mark) {
            if (inbox)
                s->on_inbox++;
            else
                s->on_chan++;
            snprintf(s->last, sizeof s->last, "%s", msg->str);
            snprintf(s->last_where, sizeof s->last_where, "%s", inbox ? "inbox" : "chan");
        }
        freeReplyObject(r);
        if (mark)
            break;
    }
    redisFree(s->c);
}

/* The first member of helper `kind` of lock `name` (a sorted set "wq" or
 * a list "q"), polled until there is one; its length, 0 if none came. */
static size_t first_in_line(const char *name, const char *kind, char *out, size_t cap)
{
    char key[128];
    size_t klen = test_helper_key(key, sizeof key, name, kind);
    const char *fmt = strcmp(kind, "q") == 0 ? "LRANGE %b 0 0" : "ZRANGE %b 0 0";
    for (int i = 0; i < 400; i++) {
        redisReply *r = test_cmd_bin(&test_srv, fmt, key, klen);
        assert_non_null(r);
        size_t n = 0;
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 1) {
            n = r->element[0]->len;
            assert_true(n < cap);
            memcpy(out, r->element[0]->str, n + 1);
        }
        freeReplyObject(r);
        if (n)
            return n;
        usleep(5000);
    }
    return 0;
}

/* What one hand-over showed: B's id or token in line, the token and fence
 * B got, and what the spy counted. */
typedef struct seen {
    char id[64], token[64];
    uint64_t fence;
    spy s;
} seen;

/* A holds `name`, B waits for it in a thread until it is in line (in the
 * helper `kind`, with an id of id_len digits); the spy subscribes; A
 * releases; B gets it. */
static void hand_over_with(dlock_client *ca, dlock_client *cb, const char *name, unsigned flags,
                           const char *kind, size_t id_len, seen *v)
{
    dlock_lock *a = test_lock_new(ca, name, 10000, flags, 10, 100);
    dlock_lock *b = test_lock_new(cb, name, 10000, flags, 10, 100);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    test_waiter w;
    assert_int_equal(test_waiter_start(&w, b, 10000, TEST_WAITER_KEEP), 0);
    assert_int_equal(first_in_line(name, kind, v->id, sizeof v->id), id_len);
    spy_start(&v->s, name, id_len == 48 ? v->id + 32 : NULL);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(test_waiter_join(&w), DLOCK_OK);
    spy_drain(&v->s);
    v->fence = dlock_lock_fence(b);
    snprintf(v->token, sizeof v->token, "%s", dlock_lock_token(b));
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
}

static void hand_over(const char *name, unsigned flags, const char *kind, size_t id_len, seen *v)
{
    dlock_client *ca = test_client_for(&test_srv, NULL), *cb = test_client_for(&test_srv, NULL);
    hand_over_with(ca, cb, name, flags, kind, id_len, v);
    dlock_client_free(ca);
    dlock_client_free(cb);
}

/* One wake-up came, on the inbox or on the lock's channel, and it was want. */
static void woken_once_on(const spy *s, int inbox, const char *want)
{
    if (inbox)
        assert_int_equal(s->inbox_subscribers, 2); /* the waiter's and the spy's */
    assert_int_equal(s->on_inbox, inbox ? 1 : 0);
    assert_int_equal(s->on_chan, inbox ? 0 : 1);
    assert_string_equal(s->last, want);
}

/* The hand-over in v woke its waiter once, on the inbox or on the lock's
 * channel: "w ID" for a listed waiter, "g TOKEN FENCE" for a fair one. */
static void handed_once_on(const seen *v, int inbox, int fair)
{
    char want[120];
    if (fair)
        snprintf(want, sizeof want, "g %s %llu", v->id, (unsigned long long)v->fence);
    else
        snprintf(want, sizeof want, "w %s", v->id);
    woken_once_on(&v->s, inbox, want);
}

static void a_listed_waiter_is_woken_on_its_inbox_alone(void **state)
{
    (void)state;
    seen v;
    hand_over("inbox-plain", 0, "wq", 48, &v);
    handed_once_on(&v, 1, 0);
}

static void a_reentrant_waiter_is_woken_on_its_inbox_alone(void **state)
{
    (void)state;
    seen v;
    hand_over("inbox-reentrant", DLOCK_REENTRANT, "wq", 48, &v);
    handed_once_on(&v, 1, 0);
}

static void a_fair_hand_over_goes_to_the_taker_s_inbox_alone(void **state)
{
    (void)state;
    seen v;
    hand_over("inbox-fair", DLOCK_FAIR, "q", 48, &v);
    /* The token in line is the one the hand-over named and B holds. */
    assert_string_equal(v.token, v.id);
    handed_once_on(&v, 1, 1);
}

/* Readers wait unlisted on the lock's channel: a writer's wake-up must
 * still come there. */
static void a_writer_is_woken_on_the_lock_s_channel(void **state)
{
    (void)state;
    seen v;
    hand_over("inbox-writer", DLOCK_EXCLUSIVE, "wq", 32, &v);
    handed_once_on(&v, 0, 0);
}

/* An ACL that grants the lock's channel by its exact name refuses the
 * inbox (a longer name) to the waiter's SUBSCRIBE and to the holder's
 * PUBLISH. The release then wakes the waiter on the lock's channel
 * (wake_to.lua), where it listens too; from then on the client waits
 * without an inbox (32-digit ids), and its waiters are still woken by
 * messages, not left to poll. */
static atomic_int n_logs;
static char first_log[300];

static void on_log(dlock_log_level level, const char *msg, void *arg)
{
    (void)arg;
    if (level == DLOCK_LOG_WARN && atomic_fetch_add(&n_logs, 1) == 0)
        snprintf(first_log, sizeof first_log, "%s", msg);
}

static void an_acl_with_exact_channel_names_wakes_on_the_lock_s_channel(void **state)
{
    (void)state;
    const char *name = "inbox-acl";
    test_cmd_status(&test_srv, "ACL SETUSER exact on >pw ~* resetchannels &dlock:wake:%s +@all",
                    name);
    char url[128];
    snprintf(url, sizeof url, "redis://exact:pw@127.0.0.1:%d", test_srv.port);
    const char *urls[1] = {url};
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.on_log = on_log;
    atomic_store(&n_logs, 0);
    dlock_client *ca = test_client_new(urls, 1, &o), *cb = test_client_new(urls, 1, &o);
    seen v;
    /* The first wait's id was made before the refusal came. */
    hand_over_with(ca, cb, name, 0, "wq", 48, &v);
    assert_int_equal(v.s.inbox_subscribers, 1); /* the spy's alone */
    handed_once_on(&v, 0, 0);
    /* The next waits have none: woken on the lock's channel, by message. */
    hand_over_with(ca, cb, name, 0, "wq", 32, &v);
    handed_once_on(&v, 0, 0);
    hand_over_with(ca, cb, name, DLOCK_FAIR, "q", 32, &v);
    handed_once_on(&v, 0, 1);
    /* Said once, by the waiting client; wake-ups were never refused. */
    assert_int_equal(atomic_load(&n_logs), 1);
    assert_non_null(strstr(first_log, "own channel"));
    dlock_client_free(ca);
    dlock_client_free(cb);
    assert_int_equal(test_cmd_int(&test_srv, "ACL DELUSER exact"), 1);
}

/* A holds `name` with `id` listed (by hand, scored `score`) and nobody
 * else waiting; A's release must wake `id` on the lock's channel. */
static void listed_by_hand_is_woken_on_the_lock_s_channel(const char *name, const char *id,
                                                          long long score)
{
    dlock_client *ca = test_client_for(&test_srv, NULL);
    dlock_lock *a = test_lock_new(ca, name, 10000, 0, 10, 100);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    char key[128];
    size_t klen = test_helper_key(key, sizeof key, name, "wq");
    redisReply *r = test_cmd_bin(&test_srv, "ZADD %b %lld %s", key, klen, score, id);
    assert_non_null(r);
    freeReplyObject(r);
    spy s;
    spy_start(&s, name, NULL);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    spy_drain(&s);
    char want[64];
    snprintf(want, sizeof want, "w %s", id);
    woken_once_on(&s, 0, want);
    dlock_lock_free(a);
    dlock_client_free(ca);
}

/* A waiter whose inbox nobody listens to any more (its process is gone,
 * its list entry not yet; scored in server us, as this version lists) is
 * woken on the lock's channel, where the unlisted waiters (readers)
 * listen: a release after it costs them no look. */
static void a_wake_up_for_an_inbox_nobody_hears_goes_to_the_lock_s_channel(void **state)
{
    (void)state;
    listed_by_hand_is_woken_on_the_lock_s_channel(
        "inbox-gone", "0123456789abcdef0123456789abcdeffedcba9876543210",
        (long long)time(NULL) * 1000000LL);
}

/* An older dlock's waiter lists a 32-digit id (scored by a lapse time in
 * ms) and listens on the lock's channel alone. */
static void an_older_dlock_s_waiter_is_woken_on_the_lock_s_channel(void **state)
{
    (void)state;
    listed_by_hand_is_woken_on_the_lock_s_channel("inbox-old", "0123456789abcdef0123456789abcdef",
                                                  (long long)time(NULL) * 1000LL + 400);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(a_listed_waiter_is_woken_on_its_inbox_alone, test_srv_flush),
        cmocka_unit_test_teardown(a_reentrant_waiter_is_woken_on_its_inbox_alone, test_srv_flush),
        cmocka_unit_test_teardown(a_fair_hand_over_goes_to_the_taker_s_inbox_alone, test_srv_flush),
        cmocka_unit_test_teardown(a_writer_is_woken_on_the_lock_s_channel, test_srv_flush),
        cmocka_unit_test_teardown(an_older_dlock_s_waiter_is_woken_on_the_lock_s_channel,
                                  test_srv_flush),
        cmocka_unit_test_teardown(an_acl_with_exact_channel_names_wakes_on_the_lock_s_channel,
                                  test_srv_flush),
        cmocka_unit_test_teardown(a_wake_up_for_an_inbox_nobody_hears_goes_to_the_lock_s_channel,
                                  test_srv_flush),
    };
    return cmocka_run_group_tests(tests, test_srv_setup, test_srv_teardown);
}
