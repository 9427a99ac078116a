/* SPDX-License-Identifier: BSD-3-Clause */
/* The Redis steps of every kind (src/redis/kind_steps.c) send what they
 * sent before the argument building moved there: for every kind x variant
 * (one node or three, fenced or not, wake-ups on or off, a listed waiter
 * with or without its inbox tag, a try-once writer, a counted re-entry) each step's
 * requests (which fan-out, script, keys, replica acks and every argument) are
 * written out and compared line by line with tests/unit/kind_steps.golden,
 * which the code before the move produced. The fan-out is replaced at link
 * time (-Wl,--wrap, tests/CMakeLists.txt): no server is needed, and the
 * replies are made up to steer each step down the path under test.
 *
 * Random parts are named, not compared: the token $T, the client id $C, the
 * handle id $H, the run id $R and the operation numbers $N+k (k-th number
 * taken in the scenario). DLOCK_GOLDEN_WRITE=path writes the vectors
 * instead of comparing (only to add a kind or a variant: the file's diff
 * is then the review).
 *
 * Also the completeness of the step table: every step a kind has a script
 * for has a builder and a decoder, and the replica-acks flags are today's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attempt.h"
#include "backend.h"
#include "call.h"
#include "client.h"
#include "dlock.h"
#include "fair.h"
#include "fanout.h"
#include "fanout_run.h"
#include "kind_steps.h"
#include "fsm.h"
#include "handle.h"
#include "kind_steps.h"
#include "kinds.h"
#include "loop_poll.h"
#include "release.h"
#include "wait.h"

/* ---- the recording fan-out ------------------------------------------------ */

enum mode {
    SILENT, /* nobody answers: unknown outcomes, undos */
    CANCEL, /* a cancel stops the run: what goes behind it */
    TAKEN,  /* every node: held by another (5 s left) */
    SPLIT,  /* granted with fences 5, 7, 6: a fence sync follows */
    FENCE_LOST, /* as SPLIT, but nothing after the attempt is answered */
};

static enum mode mode;
/* The loops the runs were started on, in order. */
static dlock__loop *fan_loops[8];
static int fan_starts;
static dlock_lock *cur;
static uint64_t op_base;
static char *out;
static size_t out_len, out_cap;

static void put(const char *s, size_t n)
{
    if (out_len + n + 1 > out_cap) {
        out_cap = (out_len + n + 1) * 2;
        out = realloc(out, out_cap);
        assert_non_null(out);
    }
    memcpy(out + out_len, s, n);
    out_len += n;
    out[out_len] = '\0';
}

static void puts_(const char *s)
{
    put(s, strlen(s));
}

/* One argument, its random parts named. */
static void put_arg(const char *a, size_t n)
{
    char num[24];
    for (int k = 1; k <= 20; k++) {
        int m = snprintf(num, sizeof num, "%" PRIu64, op_base + (uint64_t)k);
        if ((size_t)m == n && memcmp(a, num, n) == 0) {
            snprintf(num, sizeof num, "$N+%d", k);
            puts_(num);
            return;
        }
    }
    if (n == cur->hid_len && memcmp(a, cur->hid, n) == 0) {
        puts_("$H");
        return;
    }
    if (n == cur->run_id_len && memcmp(a, cur->run_id, n) == 0) {
        puts_("$R");
        return;
    }
    const char *cid = cur->client->id;
    size_t cid_len = strlen(cid);
    for (size_t i = 0; i < n;) {
        if (cur->token_len && n - i >= cur->token_len &&
            memcmp(a + i, cur->token, cur->token_len) == 0) {
            puts_("$T");
            i += cur->token_len;
        } else if (n - i >= cid_len && memcmp(a + i, cid, cid_len) == 0) {
            puts_("$C");
            i += cid_len;
        } else if (a[i] == '\0') {
            puts_("\\0");
            i++;
        } else {
            put(a + i, 1);
            i++;
        }
    }
}

static void record(const char *via, const dlock__req *reqs, uint32_t nreqs)
{
    for (uint32_t r = 0; r < nreqs; r++) {
        const dlock__req *q = &reqs[r];
        char head[160];
        snprintf(head, sizeof head, "  %s %s keys=%d acks=%d", via,
                 q->script ? q->script->name : "(command)", q->numkeys, q->acks);
        puts_(head);
        for (int i = 0; i < q->nargs; i++) {
            puts_(" |");
            put_arg(q->args[i], q->arglens ? q->arglens[i] : strlen(q->args[i]));
        }
        puts_("\n");
    }
}

/* Made-up replies for every node and request. */
static void answer(dlock_client *c, uint32_t nreqs, const uint8_t *only, dlock__on_reply cb,
                   void *arg)
{
    enum mode m = mode == FENCE_LOST ? SPLIT : mode;
    if (m != TAKEN && m != SPLIT)
        return;
    for (size_t node = 0; node < c->n_nodes; node++) {
        if (only && !only[node])
            continue;
        for (uint32_t idx = 0; idx < nreqs; idx++) {
            redisReply e0 = {.type = REDIS_REPLY_INTEGER}, e1 = {.type = REDIS_REPLY_INTEGER};
            redisReply *el[2] = {&e0, &e1};
            redisReply r = {.type = REDIS_REPLY_ARRAY, .elements = 2, .element = el};
            static const long long fences[3] = {5, 7, 6};
            e0.integer = m == SPLIT ? 1 : 0;
            e1.integer = m == SPLIT ? fences[node % 3] : 5000;
            if (cb(arg, node, idx, 0, &r, NULL, 0))
                return;
        }
    }
}

int __wrap_dlock__fanout(struct dlock_client *client, const dlock__req *reqs, uint32_t nreqs,
                         const dlock__fanout_opts *opts, dlock__on_reply cb, void *arg);
int __wrap_dlock__fanout_cancellable(struct dlock_client *client, const dlock__req *reqs,
                                     uint32_t nreqs, const dlock__fanout_opts *opts,
                                     int cancel_fd, struct dlock__conn **kept,
                                     dlock__on_reply cb, void *arg);
int __wrap_dlock__fanout_attempt(struct dlock_client *client, const dlock__req *reqs,
                                 uint32_t nreqs, const dlock__fanout_opts *opts, int cancel_fd,
                                 struct dlock__conn **kept, dlock__on_reply cb, void *arg);
void __wrap_dlock__fanout_send_behind(struct dlock_client *client, struct dlock__conn **kept,
                                      const dlock__req *reqs, uint32_t nreqs);

int __wrap_dlock__fanout(struct dlock_client *client, const dlock__req *reqs, uint32_t nreqs,
                         const dlock__fanout_opts *opts, dlock__on_reply cb, void *arg)
{
    record("fanout", reqs, nreqs);
    answer(client, nreqs, opts->only, cb, arg);
    return DLOCK_OK;
}

int __wrap_dlock__fanout_cancellable(struct dlock_client *client, const dlock__req *reqs,
                                     uint32_t nreqs, const dlock__fanout_opts *opts,
                                     int cancel_fd, struct dlock__conn **kept,
                                     dlock__on_reply cb, void *arg)
{
    (void)cancel_fd, (void)kept;
    record("cancellable", reqs, nreqs);
    if (mode == CANCEL)
        return DLOCK_ECANCELED;
    answer(client, nreqs, opts->only, cb, arg);
    return DLOCK_OK;
}

int __wrap_dlock__fanout_attempt(struct dlock_client *client, const dlock__req *reqs,
                                 uint32_t nreqs, const dlock__fanout_opts *opts, int cancel_fd,
                                 struct dlock__conn **kept, dlock__on_reply cb, void *arg)
{
    (void)cancel_fd, (void)kept;
    record("attempt", reqs, nreqs);
    if (mode == CANCEL)
        return DLOCK_ECANCELED;
    answer(client, nreqs, opts->only, cb, arg);
    return DLOCK_OK;
}

/* A run started on a loop (the attempt's chain, attempt.h; a release,
 * extend or forget, release.c) is recorded under the name of the blocking
 * call that sent it before the chain: the attempt's own as "attempt", the
 * fence sync, an extend, a forget and a waiter's leave as "fanout", a
 * release or undo as "cancellable". It completes at the loop's next turn. */
static void fan_answered(dlock__timer *t)
{
    dlock__fan *f = DLOCK__OWNER(t, dlock__fan, fin);
    f->done(f);
}

void __wrap_dlock__fan_start(dlock__fan *f, dlock__loop *l, void (*done)(dlock__fan *f));
void __wrap_dlock__fan_start(dlock__fan *f, dlock__loop *l, void (*done)(dlock__fan *f))
{
    const char *name = f->reqs[0].script ? f->reqs[0].script->name : "";
    int plain = f->cb == dlock__fence_cb || strstr(name, "extend") || strstr(name, "forget") ||
                strstr(name, "wq_leave");
    const char *via = f->keep_timed_out ? "attempt" : plain ? "fanout" : "cancellable";
    record(via, f->reqs, f->nreqs);
    if (fan_starts < (int)(sizeof fan_loops / sizeof fan_loops[0]))
        fan_loops[fan_starts] = l;
    fan_starts++;
    f->rc = DLOCK_OK;
    if (mode == CANCEL && strcmp(via, "fanout") != 0)
        f->rc = DLOCK_ECANCELED;
    else if (mode != FENCE_LOST || !strcmp(via, "attempt"))
        answer(f->client, f->nreqs, f->o->only, f->cb, f->arg);
    f->done = done;
    f->fin.fire = fan_answered;
    dlock__defer(l, &f->fin);
}

void __wrap_dlock__fanout_send_behind(struct dlock_client *client, struct dlock__conn **kept,
                                      const dlock__req *reqs, uint32_t nreqs)
{
    (void)client, (void)kept;
    record("behind", reqs, nreqs);
}

/* ---- the scenarios -------------------------------------------------------- */

typedef struct {
    const char *name;
    unsigned flags, permits;
} kind_case;

static const kind_case kinds_[] = {
    {"plain", 0, 0},
    {"counted", DLOCK_REENTRANT, 0},
    {"fair", DLOCK_FAIR, 0},
    {"exclusive", DLOCK_EXCLUSIVE, 0},
    {"shared", DLOCK_SHARED, 0},
    {"semaphore", 0, 3},
    {"shared-counted", DLOCK_SHARED | DLOCK_REENTRANT, 0},
    {"exclusive-counted", DLOCK_EXCLUSIVE | DLOCK_REENTRANT, 0},
};

/* Between steps: nothing left owed, so the next step starts clean. */
/* A backend's release or extend step alone (the engine's verbs check the
 * handle's state first), on a private loop until it is done. */
typedef struct raw_step {
    dlock__call call;
    dlock__op op;
} raw_step;

static void raw_step_done(dlock__op *op)
{
    DLOCK__OWNER(op, raw_step, op)->call.done = 1;
}

static void backend_step(dlock_lock *l, int extend, int64_t ttl_ms)
{
    raw_step b;
    dlock__call_init(&b.call);
    dlock__op_begin(&b.op, l, &b.call.lp.loop, raw_step_done);
    int rc = extend ? l->backend->extend_start(l, ttl_ms, INT64_MAX, &b.op)
                    : l->backend->release_start(l, 1, &b.op);
    if (rc == DLOCK_OK)
        dlock__call_run(&b.call);
    dlock__call_close(&b.call);
}

static void settle(dlock_lock *l)
{
    l->undo_pending = l->rel_pending = l->in_doubt = 0;
    l->fair_cleanup_pending = 0;
    l->canceled = 0;
    dlock__fsm_fire(l, DLOCK__EV_LET_GO, 0);
}

static void step(const char *what, enum mode m)
{
    mode = m;
    puts_(" ");
    puts_(what);
    puts_("\n");
}

/* A grant whose fence sync no node answers: not the handle's
 * (DLOCK_ENOQUORUM, worth a retry), and what the attempt took is undone. */
static void fence_lost(dlock_lock *l, int *retry)
{
    size_t from = out_len;
    step("attempt, granted with fences apart, the fence sync unanswered (then its undo)",
         FENCE_LOST);
    *retry = 0;
    int rc = dlock__attempt(l, retry);
    if (strstr(out + from, "fence_sync")) {
        assert_int_equal(rc, DLOCK_ENOQUORUM);
        assert_int_equal(*retry, 1);
        assert_non_null(strstr(dlock_lock_errmsg(l), "fencing token not confirmed"));
        assert_int_equal(dlock__lock_get_state(l), DLOCK_STATE_UNLOCKED);
    }
    settle(l);
}

/* The steps on a private loop, turned until the one started is over, as
 * the chains that send them run them (tidy.c, fair.c, attempt*.c). */
typedef struct step_run {
    dlock__loop_poll lp;
    int over;
    dlock__release_run r;
    dlock__tally t;
    dlock__fan fan;
} step_run;

static void fan_over(dlock__fan *f)
{
    DLOCK__OWNER(f, step_run, fan)->over = 1;
}

static void cleanup_over(void *arg)
{
    ((step_run *)arg)->over = 1;
}

static int step_over(void *arg)
{
    return ((step_run *)arg)->over;
}

static void turn(step_run *s)
{
    dlock__loop_poll_run(&s->lp, step_over, s, INT64_MAX);
    dlock__loop_poll_close(&s->lp);
}

static void fair_cleanup(dlock_lock *l)
{
    step_run s = {.over = 0};
    dlock__loop_poll_init(&s.lp);
    if (dlock__fair_cleanup_start(l, &s.lp.loop, cleanup_over, &s) != DLOCK_OK)
        s.over = 1;
    turn(&s);
}

static void release_undo(dlock_lock *l)
{
    step_run s = {.over = 0};
    dlock__loop_poll_init(&s.lp);
    dlock__release_prepare(l, NULL, 100, 1, &s.r, &s.t);
    dlock__release_send(l, &s.r, &s.t, &s.fan, &s.lp.loop, fan_over);
    turn(&s);
}

static void forget(dlock_lock *l)
{
    step_run s = {.over = 0};
    dlock__loop_poll_init(&s.lp);
    dlock__forget_prepare(l, &s.r, &s.t);
    dlock__release_send(l, &s.r, &s.t, &s.fan, &s.lp.loop, fan_over);
    turn(&s);
}

static void undo(dlock_lock *l)
{
    step_run s = {.over = 0};
    dlock__loop_poll_init(&s.lp);
    dlock__undo_send(l, &s.r, &s.fan, &s.lp.loop, 100, -1, fan_over);
    turn(&s);
    (void)dlock__undo_noted(l);
}

/* waiter: 0 none, 1 a listed waiter's id, 2 one with its inbox tag. */
static void run_steps(dlock_lock *l, int waiter, int try_once, int reentry)
{
    int retry;
    int queued = l->kind->wait == DLOCK__WAIT_QUEUE;
    if (waiter)
        l->wait_id_len = (size_t)snprintf(l->wait_id, sizeof l->wait_id, "%s%s",
                                          "0123456789abcdef0123456789abcdef",
                                          waiter == 2 ? "fedcba9876543210" : "");
    l->try_once = try_once;
    if (reentry) /* a counted re-entry keeps its owner id */
        dlock__lock_owner_id(l), l->holds = 1;
    if (queued) {
        /* The engine's wait (acquire.c) over fair.c's begin, looks and
         * leave, on a private loop. */
        step("fair try once, unanswered (then the cleanup)", SILENT);
        l->try_once = 1;
        (void)dlock__call_acquire(l, 0, 0);
        l->try_once = try_once;
        settle(l);
        step("fair wait past its deadline (look, then leave)", TAKEN);
        l->try_once = 0; /* as the engine sets it for a wait */
        (void)dlock__call_acquire(l, 1, 0);
        l->try_once = try_once;
        settle(l);
        step("fair cleanup cancelled (leave and release behind)", CANCEL);
        fair_cleanup(l);
        settle(l);
    } else {
        step("attempt, unanswered (then its undo)", SILENT);
        (void)dlock__attempt(l, &retry);
        settle(l);
        if (reentry)
            l->holds = 1;
        step("attempt cancelled in flight (undo behind)", CANCEL);
        (void)dlock__attempt(l, &retry);
        settle(l);
        if (reentry)
            l->holds = 1;
        step("attempt, taken", TAKEN);
        (void)dlock__attempt(l, &retry);
        settle(l);
        if (reentry)
            l->holds = 1;
        if (l->client->n_nodes == 3) {
            step("attempt, granted with fences apart (fence sync)", SPLIT);
            (void)dlock__attempt(l, &retry);
            settle(l);
            if (reentry)
                l->holds = 1;
            if (l->fence_key)
                fence_lost(l, &retry);
            if (reentry)
                l->holds = 1;
        }
        if (waiter) {
            step("wait past its deadline (leave the list)", TAKEN);
            (void)dlock__call_acquire(l, 1, 0);
            settle(l);
            if (reentry)
                l->holds = 1;
        }
    }
    step("release", TAKEN);
    backend_step(l, 0, 0);
    settle(l);
    step("release as an undo", TAKEN);
    release_undo(l);
    settle(l);
    step("extend", TAKEN);
    backend_step(l, 1, 12345);
    settle(l);
    if (dlock__kind_step(l->kind, DLOCK__STEP_FORGET)->script != DLOCK__S_NONE) {
        step("forget", TAKEN);
        forget(l);
        settle(l);
    }
    if (l->kind->counted) {
        l->undo_seq = dlock__lock_next_op_no();
        memset(l->undo_nodes, 1, sizeof l->undo_nodes);
        step("undo", SILENT);
        undo(l);
        settle(l);
    }
    l->wait_id_len = 0;
    l->holds = 0;
}

/* identity: the client keeps a holder identity (lib/ident.lua). */
static void scenario(const kind_case *k, size_t nodes, int fenced, int wakeups, int waiter,
                     int try_once, int reentry, int identity)
{
    static const char *const urls[] = {"redis://127.0.0.1:1", "redis://127.0.0.1:2",
                                       "redis://127.0.0.1:3"};
    dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
    co.wakeups = wakeups;
    co.io_timeout_ms = 100;
    co.identity = identity;
    co.identity_text = identity ? "host=h pid=1 prog=t" : NULL;
    dlock_client *c;
    assert_int_equal(dlock_client_new(&c, urls, nodes, &co, NULL, 0), DLOCK_OK);
    dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
    lo.flags = k->flags | (fenced ? 0 : DLOCK_NO_FENCE);
    dlock_lock *l = NULL;
    int rc = k->permits ? dlock_semaphore_new(&l, c, "res", k->permits, &lo)
                        : dlock_lock_new(&l, c, "res", &lo);
    char head[200];
    snprintf(head, sizeof head, "%s nodes=%zu fenced=%d wakeups=%d waiter=%d try_once=%d "
             "reentry=%d%s\n", k->name, nodes, fenced, wakeups, waiter, try_once, reentry,
             identity ? " identity=1" : "");
    puts_(head);
    if (rc != DLOCK_OK) {
        snprintf(head, sizeof head, " refused: %s\n", dlock_strerror(rc));
        puts_(head);
    } else {
        cur = l;
        op_base = dlock__lock_next_op_no();
        run_steps(l, waiter, try_once, reentry);
        step("forget and free", SILENT);
        dlock_lock_forget(l);
        dlock_lock_free(l);
    }
    cur = NULL;
    dlock_client_free(c);
}

static void all_scenarios(void)
{
    /* Far from the small numbers the arguments carry (TTLs, counts). */
    while (dlock__lock_next_op_no() < 700000)
        ;
    for (size_t i = 0; i < sizeof kinds_ / sizeof kinds_[0]; i++) {
        const kind_case *k = &kinds_[i];
        const dlock__kind *kind = dlock__kind_of(k->flags, k->permits);
        for (size_t nodes = 1; nodes <= 3; nodes += 2)
            for (int fenced = 1; fenced >= 0; fenced--)
                for (int wakeups = 1; wakeups >= 0; wakeups--)
                    for (int waiter = 0; waiter <= 2; waiter++)
                        for (int try_once = 0; try_once <= 1; try_once++)
                            for (int reentry = 0; reentry <= kind->counted; reentry++) {
                                /* A listed waiter: wake-one kinds on one node
                                 * (with a run: the kinds with runs, kinds.h);
                                 * its inbox tag: the inbox kinds. */
                                if (waiter && (!kind->wake_one || nodes != 1 || !wakeups))
                                    continue;
                                if (waiter == 2 && !kind->inbox)
                                    continue;
                                scenario(k, nodes, fenced, wakeups, waiter, try_once, reentry,
                                         0);
                            }
    }
    /* With a holder identity (after the others, which it leaves as they
     * were): every kind, so that those that keep none are seen to send
     * nothing more; a listed waiter where there is one. */
    for (size_t i = 0; i < sizeof kinds_ / sizeof kinds_[0]; i++) {
        const kind_case *k = &kinds_[i];
        const dlock__kind *kind = dlock__kind_of(k->flags, k->permits);
        for (size_t nodes = 1; nodes <= 3; nodes += 2)
            for (int fenced = 1; fenced >= 0; fenced--)
                for (int waiter = 0; waiter <= (kind->wake_one && nodes == 1); waiter++)
                    scenario(k, nodes, fenced, 1, waiter, 0, 0, 1);
    }
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s)
        s[n] = '\0';
    fclose(f);
    return s;
}

static void every_step_sends_the_golden_arguments(void **state)
{
    (void)state;
    all_scenarios();
    const char *write_to = getenv("DLOCK_GOLDEN_WRITE");
    if (write_to) {
        FILE *f = fopen(write_to, "wb");
        assert_non_null(f);
        fwrite(out, 1, out_len, f);
        fclose(f);
        return;
    }
    char *want = read_file(DLOCK_KIND_STEPS_GOLDEN);
    assert_non_null(want);
    /* The first line that differs, with its scenario. */
    const char *a = out, *b = want, *scen = out;
    size_t line = 1;
    while (*a && *b) {
        const char *ea = strchr(a, '\n'), *eb = strchr(b, '\n');
        size_t la = ea ? (size_t)(ea - a) : strlen(a), lb = eb ? (size_t)(eb - b) : strlen(b);
        if (a[0] != ' ')
            scen = a;
        if (la != lb || memcmp(a, b, la) != 0) {
            print_error("line %zu differs in scenario %.*s\n got: %.*s\nwant: %.*s\n", line,
                        (int)(strchr(scen, '\n') - scen), scen, (int)la, a, (int)lb, b);
            fail();
        }
        a += la + (ea != NULL);
        b += lb + (eb != NULL);
        line++;
    }
    if (*a || *b)
        print_error("the vectors differ in length at line %zu\n", line);
    assert_true(*a == '\0' && *b == '\0');
    free(want);
}

/* Every step a kind has a script for has a builder and a decoder; the
 * steps every kind that takes locks must have are there; and the replica
 * acks are the fan-out's rule before they moved to the table: WAIT behind
 * the acquire and extend scripts of the retrying kinds (acquire, reentrant,
 * exclusive and shared acquire; extend, reentrant and shared extend). */
static void every_step_is_complete_and_acks_are_the_old_rule(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof kinds_ / sizeof kinds_[0]; i++) {
        const dlock__kind *kind = dlock__kind_of(kinds_[i].flags, kinds_[i].permits);
        for (int st = 0; st < DLOCK__STEP_COUNT; st++) {
            const dlock__step_row *s = dlock__kind_step(kind, (dlock__step_id)st);
            dlock__script_id id = s->script;
            int old_acks = id == DLOCK__S_ACQUIRE || id == DLOCK__S_RACQUIRE ||
                           id == DLOCK__S_X_ACQUIRE || id == DLOCK__S_Z_ACQUIRE ||
                           id == DLOCK__S_EXTEND || id == DLOCK__S_REXTEND ||
                           id == DLOCK__S_Z_EXTEND;
            if (id == DLOCK__S_NONE) {
                assert_null(s->build);
                assert_int_equal(s->acks, 0);
                continue;
            }
            assert_true(id < DLOCK__S_COUNT);
            assert_non_null(dlock__script_get(id));
            assert_non_null(s->build);
            assert_non_null(s->decode);
            assert_int_equal(s->acks, old_acks);
        }
        for (int st = DLOCK__STEP_ACQUIRE; st <= DLOCK__STEP_UNDO; st++)
            assert_int_not_equal(dlock__kind_step(kind, (dlock__step_id)st)->script,
                                 DLOCK__S_NONE);
        /* Counted kinds forget their handle's bookkeeping; queued kinds
         * leave the line (and the row says so); wake-one kinds leave the
         * waiter list; fenced kinds on several masters sync the counter. */
        assert_int_equal(dlock__kind_step(kind, DLOCK__STEP_FORGET)->script != DLOCK__S_NONE,
                         kind->counted);
        assert_int_equal(dlock__kind_step(kind, DLOCK__STEP_LEAVE)->script, kind->leave);
        assert_int_equal(dlock__kind_step(kind, DLOCK__STEP_LEAVE_LIST)->script != DLOCK__S_NONE,
                         kind->wake_one);
        assert_int_equal(dlock__kind_step(kind, DLOCK__STEP_FENCE_SYNC)->script != DLOCK__S_NONE,
                         (kind->fenced || kind->guards) && kind->wait != DLOCK__WAIT_QUEUE);
    }
}

/* ---- release and extend as requests ---------------------------------------- */

static int op_dones;

static void op_seen(dlock__op *op)
{
    (void)op;
    op_dones++;
}

static int op_over(void *arg)
{
    (void)arg;
    return op_dones > 0;
}

/* The engine's request on a loop of the test's: started, not completed
 * inside its start; completed once from the loop. */
static void start_op(dlock__op *op, dlock__loop_poll *lp, dlock_lock *l)
{
    dlock__loop_poll_init(lp);
    *op = (dlock__op){.l = l, .loop = &lp->loop, .done = op_seen};
    op_dones = 0;
    fan_starts = 0;
    dlock__op_start(op);
}

static void turn_until_done(dlock__op *op, dlock__loop_poll *lp)
{
    assert_int_equal(op_dones, 0); /* never inside the start */
    dlock__loop_poll_run(lp, op_over, NULL, INT64_MAX);
    assert_int_equal(op_dones, 1);
    assert_int_equal(op->state, DLOCK__OP_DONE);
    for (int i = 0; i < fan_starts; i++)
        assert_ptr_equal(fan_loops[i], &lp->loop); /* each step on the op's loop */
    dlock__loop_poll_close(lp);
}

/* A counted kind's release with an older release pending carries it (one
 * run, reentrant_release.lua) in one step on the op's loop, not after a
 * resend. Nobody answers: the new release is pending too, and the
 * handle's other hold joins the run, owed by every node. */
static void release_and_extend_complete_on_the_requests_loop(void **state)
{
    (void)state;
    static const char *const urls[] = {"redis://127.0.0.1:1", "redis://127.0.0.1:2",
                                       "redis://127.0.0.1:3"};
    dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
    co.io_timeout_ms = 100;
    dlock_client *c;
    assert_int_equal(dlock_client_new(&c, urls, 3, &co, NULL, 0), DLOCK_OK);
    dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
    lo.flags = DLOCK_REENTRANT;
    lo.ttl_ms = 30000;
    dlock_lock *l;
    assert_int_equal(dlock_lock_new(&l, c, "res", &lo), DLOCK_OK);
    cur = l;
    mode = SILENT;
    dlock__op op;
    dlock__loop_poll lp;

    l->holds = 2;
    dlock__release_op(l, 1);
    uint64_t first = l->rel_seq;
    assert_int_equal(l->rel_base, first);
    l->rel_pending = 1;
    memset(l->rel_nodes, 1, sizeof l->rel_nodes);
    start_op(&op, &lp, l);
    assert_int_equal(l->backend->release_start(l, 0, &op), DLOCK_OK);
    assert_int_equal(fan_starts, 1); /* the release itself, at once */
    assert_true(l->rel_seq > first);
    turn_until_done(&op, &lp);
    assert_int_equal(fan_starts, 1);
    assert_int_not_equal(op.v.code, DLOCK_OK);
    assert_int_equal(l->rel_pending, 1);
    assert_int_equal(l->rel_base, first); /* one run: both releases, the other hold */
    assert_int_equal(l->rel_total, 3);
    assert_int_equal(l->in_doubt, 1);
    settle(l);

    /* An extend: its lease counted from before the send, 0 for the
     * lock's TTL. */
    int64_t t0 = dlock__now_ns();
    start_op(&op, &lp, l);
    assert_int_equal(l->backend->extend_start(l, 0, INT64_MAX, &op), DLOCK_OK);
    turn_until_done(&op, &lp);
    assert_int_equal(fan_starts, 1);
    assert_int_equal(op.v.renew_ttl_ms, 30000);
    assert_true(op.v.until_ns > t0 + 29000 * DLOCK__NS_PER_MS);
    assert_true(op.v.until_ns <= dlock__now_ns() + 30000 * DLOCK__NS_PER_MS);

    l->holds = 0;
    cur = NULL;
    dlock_lock_free(l);
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_step_is_complete_and_acks_are_the_old_rule),
        cmocka_unit_test(every_step_sends_the_golden_arguments),
        cmocka_unit_test(release_and_extend_complete_on_the_requests_loop),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    free(out);
    return rc;
}
