/* SPDX-License-Identifier: BSD-3-Clause */
/* History file and its checker (see history.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "history.h"

int64_t chaos_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int chaos_history_open(const char *path)
{
    return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
}

int chaos_history_log(int fd, chaos_rec *r)
{
    if (r->magic == 0)
        r->magic = CHAOS_REC_MAGIC;
    if (r->t_ns == 0)
        r->t_ns = chaos_now_ns();
    if (r->pid == 0)
        r->pid = (int32_t)getpid();
    for (;;) {
        ssize_t w = write(fd, r, sizeof *r);
        if (w == (ssize_t)sizeof *r)
            return 0;
        if (w < 0 && errno == EINTR)
            continue;
        return -1; /* a short write to a local file: disk full */
    }
}

int chaos_history_note(int fd, chaos_rec_type type, int slot, uint32_t proc,
                       uint32_t cs, uint64_t fence, int64_t a, int64_t b)
{
    chaos_rec r;
    memset(&r, 0, sizeof r);
    r.type = (uint16_t)type;
    r.slot = (uint16_t)slot;
    r.proc = proc;
    r.cs = cs;
    r.fence = fence;
    r.a = a;
    r.b = b;
    return chaos_history_log(fd, &r);
}

/* ---- the checker ------------------------------------------------------- */

typedef struct section {
    uint32_t proc, cs;
    int64_t enter, end; /* end < 0: still open */
    uint64_t fence;
    int kind; /* CHAOS_KIND_* */
} section;

typedef struct event {
    int64_t t;
    int delta; /* -1 end, +1 start; ends sort first at equal times */
    int kind;
} event;

static int cmp_section_key(const void *x, const void *y)
{
    const section *a = x, *b = y;
    if (a->proc != b->proc)
        return a->proc < b->proc ? -1 : 1;
    return a->cs < b->cs ? -1 : a->cs > b->cs;
}

static int cmp_i64(int64_t a, int64_t b)
{
    return a < b ? -1 : a > b;
}

static int cmp_event(const void *x, const void *y)
{
    const event *a = x, *b = y;
    int c = cmp_i64(a->t, b->t);
    return c ? c : a->delta - b->delta;
}

static int cmp_enter(const void *x, const void *y)
{
    return cmp_i64((*(section *const *)x)->enter, (*(section *const *)y)->enter);
}

static int cmp_end(const void *x, const void *y)
{
    return cmp_i64((*(section *const *)x)->end, (*(section *const *)y)->end);
}

static int cmp_val(const void *x, const void *y)
{
    return cmp_i64(*(const int64_t *)x, *(const int64_t *)y);
}

static int cmp_write_seq(const void *x, const void *y)
{
    return cmp_i64((*(chaos_rec *const *)x)->a, (*(chaos_rec *const *)y)->a);
}

static section *find_section(section *s, size_t n, uint32_t proc, uint32_t cs)
{
    section key = {proc, cs, 0, 0, 0, 0};
    return bsearch(&key, s, n, sizeof *s, cmp_section_key);
}

/* Sweep line over [enter, end] intervals: a section that starts while
 * another is open is an overlap, except shared sections beside shared
 * ones and permits beside permits (those are counted: max_readers,
 * max_permits; a semaphore's bound is the scenario's to judge). */
static int count_overlaps(const section *s, size_t n, chaos_verdict *v)
{
    event *ev = malloc((2 * n + 1) * sizeof *ev);
    if (!ev)
        return -1;
    for (size_t i = 0; i < n; i++) {
        ev[2 * i] = (event){s[i].enter, +1, s[i].kind};
        ev[2 * i + 1] = (event){s[i].end, -1, s[i].kind};
    }
    qsort(ev, 2 * n, sizeof *ev, cmp_event);
    long active = 0, by_kind[3] = {0, 0, 0};
    for (size_t i = 0; i < 2 * n; i++) {
        int k = ev[i].kind >= 0 && ev[i].kind < 3 ? ev[i].kind : CHAOS_KIND_EXCLUSIVE;
        if (ev[i].delta > 0) {
            if (k == CHAOS_KIND_EXCLUSIVE ? active > 0 : active > by_kind[k])
                v->overlaps++; /* beside an exclusive one, or of another kind */
            active++;
            by_kind[k]++;
            if (active > v->max_concurrent)
                v->max_concurrent = active;
            if (by_kind[CHAOS_KIND_SHARED] > v->max_readers)
                v->max_readers = by_kind[CHAOS_KIND_SHARED];
            if (by_kind[CHAOS_KIND_PERMIT] > v->max_permits)
                v->max_permits = by_kind[CHAOS_KIND_PERMIT];
        } else {
            active--;
            by_kind[k]--;
        }
    }
    free(ev);
    return 0;
}

/* A section that entered after another one ended must carry a larger
 * token: tokens grow with every grant, and a grant that follows a release
 * comes later. */
static int count_fence_violations(section *s, size_t n, chaos_verdict *v)
{
    section **by_enter = malloc((n + 1) * sizeof *by_enter);
    section **by_end = malloc((n + 1) * sizeof *by_end);
    size_t m = 0;
    if (!by_enter || !by_end) {
        free(by_enter);
        free(by_end);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if (s[i].fence > 0)
            by_enter[m] = by_end[m] = &s[i], m++;
    qsort(by_enter, m, sizeof *by_enter, cmp_enter);
    qsort(by_end, m, sizeof *by_end, cmp_end);
    uint64_t max_done = 0;
    size_t j = 0;
    for (size_t i = 0; i < m; i++) {
        while (j < m && by_end[j]->end < by_enter[i]->enter) {
            if (by_end[j]->fence > max_done)
                max_done = by_end[j]->fence;
            j++;
        }
        if (by_enter[i]->fence <= max_done)
            v->fence_violations++;
    }
    free(by_enter);
    free(by_end);
    return 0;
}

int chaos_history_check_recs(const chaos_rec *recs, size_t n, chaos_verdict *v)
{
    memset(v, 0, sizeof *v);
    section *s = malloc((n + 1) * sizeof *s);
    int64_t *vals = malloc((n + 1) * sizeof *vals);
    const chaos_rec **writes = malloc((n + 1) * sizeof *writes);
    size_t ns = 0, nv = 0, nw = 0;
    int rc = -1;
    int64_t last_t = 0;
    if (!s || !vals || !writes)
        goto out;
    for (size_t i = 0; i < n; i++) {
        const chaos_rec *r = &recs[i];
        if (r->magic != CHAOS_REC_MAGIC) {
            v->torn++;
            continue;
        }
        v->records++;
        if (r->t_ns > last_t)
            last_t = r->t_ns;
        if (r->type == CHAOS_REC_ENTER)
            s[ns++] = (section){r->proc, r->cs, r->t_ns, -1, r->fence, (int)r->a};
        else if (r->type == CHAOS_REC_COUNTER)
            vals[nv++] = r->a;
        else if (r->type == CHAOS_REC_WRITE)
            writes[nw++] = r;
        else if (r->type == CHAOS_REC_FAULT)
            v->faults++;
    }
    qsort(s, ns, sizeof *s, cmp_section_key);
    for (size_t i = 0; i < n; i++) {
        const chaos_rec *r = &recs[i];
        if (r->magic != CHAOS_REC_MAGIC)
            continue;
        if (r->type == CHAOS_REC_EXIT) {
            section *x = find_section(s, ns, r->proc, r->cs);
            if (x && x->end < 0)
                x->end = r->t_ns;
        } else if (r->type == CHAOS_REC_KILLED) {
            v->kills++;
            /* One process has at most one section open: its last one. */
            for (size_t k = 0; k < ns; k++)
                if (s[k].proc == r->proc && s[k].end < 0 && s[k].enter <= r->t_ns) {
                    s[k].end = r->t_ns;
                    v->cs_killed++;
                }
        }
    }
    v->cs = (long)ns;
    for (size_t i = 0; i < ns; i++)
        if (s[i].end < 0) {
            /* Nobody saw it end: assume it lasted to the end of the run. */
            v->cs_unclosed++;
            s[i].end = last_t + 1;
        }
    if (count_overlaps(s, ns, v) != 0 || count_fence_violations(s, ns, v) != 0)
        goto out;

    /* Lost updates: two increments that read the same value. */
    v->counter_writes = (long)nv;
    qsort(vals, nv, sizeof *vals, cmp_val);
    for (size_t i = 1; i < nv; i++)
        if (vals[i] == vals[i - 1])
            v->lost_updates++;

    /* Stale writes, in the order the resource accepted them. */
    qsort(writes, nw, sizeof *writes, cmp_write_seq);
    uint64_t max_fence = 0;
    for (size_t i = 0; i < nw; i++) {
        if (writes[i]->b != 1) {
            v->writes_refused++;
            continue;
        }
        v->writes_accepted++;
        if (writes[i]->fence < max_fence)
            v->stale_writes++;
        if (writes[i]->fence > max_fence)
            max_fence = writes[i]->fence;
    }
    rc = 0;
out:
    free(s);
    free(vals);
    free(writes);
    return rc;
}

int chaos_history_check(const char *path, chaos_verdict *out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        fprintf(stderr, "chaos: cannot read history %s: %s\n", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    size_t n = (size_t)st.st_size / sizeof(chaos_rec);
    long tail = (long)((size_t)st.st_size % sizeof(chaos_rec));
    chaos_rec *recs = malloc((n + 1) * sizeof *recs);
    size_t got = 0;
    while (recs && got < n * sizeof *recs) {
        ssize_t r = read(fd, (char *)recs + got, n * sizeof *recs - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (!recs || got != n * sizeof *recs) {
        fprintf(stderr, "chaos: short read of %s\n", path);
        free(recs);
        return -1;
    }
    int rc = chaos_history_check_recs(recs, n, out);
    out->torn += tail ? 1 : 0;
    free(recs);
    return rc;
}

/* ---- self-test --------------------------------------------------------- */

static chaos_rec mk(chaos_rec_type type, uint32_t proc, uint32_t cs, int64_t t,
                    uint64_t fence, int64_t a, int64_t b)
{
    chaos_rec r;
    memset(&r, 0, sizeof r);
    r.magic = CHAOS_REC_MAGIC;
    r.type = (uint16_t)type;
    r.proc = proc;
    r.cs = cs;
    r.t_ns = t;
    r.fence = fence;
    r.a = a;
    r.b = b;
    return r;
}

static int expect(const char *name, long got, long want)
{
    if (got == want)
        return 0;
    fprintf(stderr, "history selftest %s: got %ld, want %ld\n", name, got, want);
    return 1;
}

int chaos_history_selftest(void)
{
    int failed = 0;
    chaos_verdict v;
    /* Two clean sections, one after the other. */
    chaos_rec clean[] = {
        mk(CHAOS_REC_ENTER, 1, 0, 10, 1, 0, 0), mk(CHAOS_REC_COUNTER, 1, 0, 11, 1, 0, 0),
        mk(CHAOS_REC_WRITE, 1, 0, 12, 1, 1, 1), mk(CHAOS_REC_EXIT, 1, 0, 13, 0, 0, 0),
        mk(CHAOS_REC_ENTER, 2, 0, 20, 2, 0, 0), mk(CHAOS_REC_COUNTER, 2, 0, 21, 2, 1, 0),
        mk(CHAOS_REC_WRITE, 2, 0, 22, 2, 2, 1), mk(CHAOS_REC_EXIT, 2, 0, 23, 0, 0, 0),
    };
    chaos_history_check_recs(clean, 8, &v);
    failed += expect("clean.cs", v.cs, 2) + expect("clean.overlaps", v.overlaps, 0) +
              expect("clean.lost", v.lost_updates, 0) + expect("clean.stale", v.stale_writes, 0) +
              expect("clean.fence", v.fence_violations, 0);
    /* A paused holder: overlap, lost update, stale write accepted. */
    chaos_rec paused[] = {
        mk(CHAOS_REC_ENTER, 1, 0, 10, 5, 0, 0), mk(CHAOS_REC_ENTER, 2, 0, 20, 6, 0, 0),
        mk(CHAOS_REC_COUNTER, 2, 0, 21, 6, 7, 0), mk(CHAOS_REC_WRITE, 2, 0, 22, 6, 1, 1),
        mk(CHAOS_REC_EXIT, 2, 0, 23, 0, 0, 0), mk(CHAOS_REC_COUNTER, 1, 0, 30, 5, 7, 0),
        mk(CHAOS_REC_WRITE, 1, 0, 31, 5, 2, 1), mk(CHAOS_REC_EXIT, 1, 0, 32, 0, 0, 0),
    };
    chaos_history_check_recs(paused, 8, &v);
    failed += expect("paused.overlaps", v.overlaps, 1) + expect("paused.lost", v.lost_updates, 1) +
              expect("paused.stale", v.stale_writes, 1) + expect("paused.fence", v.fence_violations, 0);
    /* A later section with a smaller token (a counter that was reset). */
    chaos_rec reset[] = {
        mk(CHAOS_REC_ENTER, 1, 0, 10, 9, 0, 0), mk(CHAOS_REC_EXIT, 1, 0, 11, 0, 0, 0),
        mk(CHAOS_REC_ENTER, 2, 0, 20, 1, 0, 0), mk(CHAOS_REC_WRITE, 2, 0, 21, 1, 1, 0),
        mk(CHAOS_REC_EXIT, 2, 0, 22, 0, 0, 0),
    };
    chaos_history_check_recs(reset, 5, &v);
    failed += expect("reset.fence", v.fence_violations, 1) + expect("reset.refused", v.writes_refused, 1) +
              expect("reset.overlaps", v.overlaps, 0);
    /* A holder killed mid-section ends there; unreported, it stays open. */
    chaos_rec killed[] = {
        mk(CHAOS_REC_ENTER, 1, 0, 10, 1, 0, 0), mk(CHAOS_REC_KILLED, 1, 0, 15, 0, 0, 0),
        mk(CHAOS_REC_ENTER, 2, 0, 20, 2, 0, 0), mk(CHAOS_REC_EXIT, 2, 0, 21, 0, 0, 0),
    };
    chaos_history_check_recs(killed, 4, &v);
    failed += expect("killed.overlaps", v.overlaps, 0) + expect("killed.cs_killed", v.cs_killed, 1);
    killed[1].type = CHAOS_REC_FAULT;
    chaos_history_check_recs(killed, 4, &v);
    failed += expect("unclosed.overlaps", v.overlaps, 1) + expect("unclosed.n", v.cs_unclosed, 1);
    /* Touching intervals (one ends when the next starts) do not overlap;
     * a torn record is counted, not trusted. */
    chaos_rec touch[] = {
        mk(CHAOS_REC_ENTER, 1, 0, 10, 1, 0, 0), mk(CHAOS_REC_EXIT, 1, 0, 20, 0, 0, 0),
        mk(CHAOS_REC_ENTER, 2, 0, 20, 2, 0, 0), mk(CHAOS_REC_EXIT, 2, 0, 30, 0, 0, 0),
        mk(CHAOS_REC_ENTER, 3, 0, 25, 3, 0, 0),
    };
    touch[4].magic = 0;
    chaos_history_check_recs(touch, 5, &v);
    failed += expect("touch.overlaps", v.overlaps, 0) + expect("touch.torn", v.torn, 1);
    /* Read-write (issue 17): two readers share; a writer beside a reader,
     * either way round, is an overlap each. */
    chaos_rec rw[] = {
        mk(CHAOS_REC_ENTER, 1, 0, 10, 0, CHAOS_KIND_SHARED, 0),
        mk(CHAOS_REC_ENTER, 2, 0, 12, 0, CHAOS_KIND_SHARED, 0),
        mk(CHAOS_REC_EXIT, 1, 0, 20, 0, 0, 0), mk(CHAOS_REC_EXIT, 2, 0, 21, 0, 0, 0),
        mk(CHAOS_REC_ENTER, 3, 0, 30, 1, CHAOS_KIND_EXCLUSIVE, 0),
        mk(CHAOS_REC_ENTER, 4, 0, 31, 0, CHAOS_KIND_SHARED, 0),
        mk(CHAOS_REC_EXIT, 4, 0, 32, 0, 0, 0), mk(CHAOS_REC_EXIT, 3, 0, 40, 0, 0, 0),
        mk(CHAOS_REC_ENTER, 5, 0, 50, 0, CHAOS_KIND_SHARED, 0),
        mk(CHAOS_REC_ENTER, 6, 0, 51, 2, CHAOS_KIND_EXCLUSIVE, 0),
        mk(CHAOS_REC_EXIT, 6, 0, 52, 0, 0, 0), mk(CHAOS_REC_EXIT, 5, 0, 60, 0, 0, 0),
    };
    chaos_history_check_recs(rw, 12, &v);
    failed += expect("rw.overlaps", v.overlaps, 2) + expect("rw.max_readers", v.max_readers, 2);
    /* Permits: three at once are counted, not overlaps. */
    chaos_rec sem[] = {
        mk(CHAOS_REC_ENTER, 1, 0, 10, 0, CHAOS_KIND_PERMIT, 0),
        mk(CHAOS_REC_ENTER, 2, 0, 11, 0, CHAOS_KIND_PERMIT, 0),
        mk(CHAOS_REC_ENTER, 3, 0, 12, 0, CHAOS_KIND_PERMIT, 0),
        mk(CHAOS_REC_EXIT, 1, 0, 20, 0, 0, 0), mk(CHAOS_REC_EXIT, 2, 0, 20, 0, 0, 0),
        mk(CHAOS_REC_EXIT, 3, 0, 20, 0, 0, 0),
    };
    chaos_history_check_recs(sem, 6, &v);
    failed += expect("sem.overlaps", v.overlaps, 0) + expect("sem.max_permits", v.max_permits, 3);
    return failed;
}
