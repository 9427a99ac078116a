/* SPDX-License-Identifier: BSD-3-Clause */
/* The recording observer (test_recorder.h). */
#include <stdio.h>
#include <string.h>

#include "test_recorder.h"

static test_recorder rec = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void copy_str(char *dst, size_t len, const char *s)
{
    snprintf(dst, len, "%s", s ? s : "(null)");
}

static void on_start(void *arg, const dlock_acquire_event *ev)
{
    test_recorder *r = arg;
    pthread_mutex_lock(&r->mu);
    if (r->n_start < TEST_REC_MAX) {
        r->start[r->n_start] = *ev;
        copy_str(r->start_name[r->n_start], 64, ev->name);
        r->n_start++;
    }
    pthread_mutex_unlock(&r->mu);
}

static void on_end(void *arg, const dlock_acquire_event *ev)
{
    test_recorder *r = arg;
    pthread_mutex_lock(&r->mu);
    if (r->n_end < TEST_REC_MAX) {
        int i = r->n_end++;
        r->end[i] = *ev;
        copy_str(r->end_name[i], 64, ev->name);
        copy_str(r->end_kind[i], 32, ev->kind);
        copy_str(r->end_backend[i], 16, ev->backend);
    }
    pthread_mutex_unlock(&r->mu);
}

static void on_hold(void *arg, const dlock_hold_event *ev)
{
    test_recorder *r = arg;
    pthread_mutex_lock(&r->mu);
    if (r->n_hold < TEST_REC_MAX) {
        r->hold[r->n_hold] = *ev;
        copy_str(r->hold_name[r->n_hold], 64, ev->name);
        r->n_hold++;
    }
    pthread_mutex_unlock(&r->mu);
}

static void on_round(void *arg, const dlock_renewal_event *ev)
{
    test_recorder *r = arg;
    pthread_mutex_lock(&r->mu);
    if (r->n_round < TEST_REC_MAX)
        r->round[r->n_round++] = *ev;
    pthread_mutex_unlock(&r->mu);
}

static void on_node(void *arg, const dlock_node_event *ev)
{
    test_recorder *r = arg;
    pthread_mutex_lock(&r->mu);
    if (r->n_node < TEST_REC_MAX) {
        r->node[r->n_node] = *ev;
        copy_str(r->node_name[r->n_node], 300, ev->node);
        r->node_on_caller[r->n_node] = pthread_equal(pthread_self(), r->caller);
        r->n_node++;
    }
    pthread_mutex_unlock(&r->mu);
}

static void on_wake(void *arg, const dlock_wakeup_event *ev)
{
    test_recorder *r = arg;
    pthread_mutex_lock(&r->mu);
    if (r->n_wake < TEST_REC_MAX)
        r->wake[r->n_wake++] = *ev;
    pthread_mutex_unlock(&r->mu);
}

const dlock_observer test_rec_observer = {
    .version = DLOCK_OBSERVER_VERSION, .arg = &rec, .acquire_start = on_start,
    .acquire_end = on_end, .hold_end = on_hold, .renewal_round = on_round,
    .node_event = on_node, .wakeup = on_wake,
};

void test_rec_reset(void)
{
    pthread_mutex_lock(&rec.mu);
    rec.n_start = rec.n_end = rec.n_hold = rec.n_round = rec.n_node = rec.n_wake = 0;
    rec.caller = pthread_self();
    pthread_mutex_unlock(&rec.mu);
}

test_recorder test_rec_seen(void)
{
    static test_recorder copy;
    pthread_mutex_lock(&rec.mu);
    memcpy((char *)&copy + sizeof copy.mu, (char *)&rec + sizeof rec.mu,
           sizeof rec - sizeof rec.mu);
    pthread_mutex_unlock(&rec.mu);
    return copy;
}
