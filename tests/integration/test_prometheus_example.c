/* SPDX-License-Identifier: BSD-3-Clause */
/* examples/prometheus.c against a real redis-server: its output is
 * Prometheus's text format (each sample's name well formed and announced
 * by HELP and TYPE lines, histogram buckets cumulative up to +Inf = count)
 * and carries the figures of what it did (3 acquires granted, 1 busy, 3
 * releases). Skipped in a build without the examples. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis_server.h"
#include "test_util.h"

#define MAX_FAMILIES 32

/* Built only when the example is (DLOCK_BUILD_EXAMPLES; not in the
 * sanitizer builds): without it the test skips. */
#ifdef DLOCK_PROMETHEUS_BIN
typedef struct family {
    char name[96];
    char type[64];
    int help;
} family;

typedef struct exposition {
    family fam[MAX_FAMILIES];
    int n_fam;
    /* The histogram being read: its last bucket's le and count. */
    double last_le;
    double last_bucket;
    int in_buckets;
    int n_samples;
} exposition;

static family *family_of(exposition *e, const char *name)
{
    for (int i = 0; i < e->n_fam; i++)
        if (!strcmp(e->fam[i].name, name))
            return &e->fam[i];
    assert_true(e->n_fam < MAX_FAMILIES);
    family *f = &e->fam[e->n_fam++];
    snprintf(f->name, sizeof f->name, "%s", name);
    return f;
}

static family *find(exposition *e, const char *name)
{
    for (int i = 0; i < e->n_fam; i++)
        if (!strcmp(e->fam[i].name, name))
            return &e->fam[i];
    return NULL;
}

static int name_ok(const char *s, size_t n)
{
    if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == ':'))
        return 0;
    for (size_t i = 1; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == ':'))
            return 0;
    return 1;
}

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    return n > t && !strcmp(s + n - t, tail);
}

/* A comment line: "# HELP name text" or "# TYPE name type". */
static void comment(exposition *e, const char *line)
{
    char what[8], name[96], rest[64];
    assert_int_equal(sscanf(line, "# %7s %95s %63s", what, name, rest), 3);
    family *f = family_of(e, name);
    if (!strcmp(what, "HELP")) {
        f->help = 1;
    } else {
        assert_string_equal(what, "TYPE");
        assert_true(!strcmp(rest, "counter") || !strcmp(rest, "histogram"));
        snprintf(f->type, sizeof f->type, "%s", rest);
    }
}

static void sample(exposition *e, const char *line)
{
    size_t n = strcspn(line, "{ ");
    char name[96];
    assert_true(n < sizeof name && name_ok(line, n));
    memcpy(name, line, n);
    name[n] = '\0';
    const char *after = line + n;
    double le = 0;
    if (*after == '{') {
        const char *close = strchr(after, '}');
        assert_non_null(close);
        if (!strncmp(after, "{le=\"", 5))
            le = !strncmp(after + 5, "+Inf", 4) ? 1e300 : strtod(after + 5, NULL);
        after = close + 1;
    }
    assert_true(*after == ' ');
    char *end;
    double v = strtod(after + 1, &end);
    assert_true(end > after + 1 && *end == '\0' && v >= 0);
    /* Its family: the name itself, or a histogram's name without the
     * series' suffix. */
    int bucket = ends_with(name, "_bucket");
    family *f = find(e, name);
    if (!f && (bucket || ends_with(name, "_sum") || ends_with(name, "_count"))) {
        *strrchr(name, '_') = '\0';
        f = find(e, name);
        name[strlen(name)] = '_';
    }
    assert_non_null(f);
    assert_true(f->help);
    assert_true(f->type[0]);
    if (bucket) {
        assert_string_equal(f->type, "histogram");
        if (e->in_buckets) {
            assert_true(le > e->last_le);
            assert_true(v >= e->last_bucket); /* cumulative */
        }
        e->in_buckets = 1;
        e->last_le = le;
        e->last_bucket = v;
    } else if (ends_with(name, "_count") && f->type[0] == 'h') {
        assert_true(e->last_le == 1e300);   /* +Inf came last */
        assert_true(v == e->last_bucket); /* and holds them all */
        e->in_buckets = 0;
    }
    e->n_samples++;
}

static long value_of(const char *text, const char *series)
{
    const char *p = strstr(text, series);
    assert_non_null(p);
    return strtol(p + strlen(series), NULL, 10);
}

#endif

static void the_example_prints_parseable_metrics_of_what_it_did(void **state)
{
    (void)state;
#ifndef DLOCK_PROMETHEUS_BIN
    skip();
#else
    char cmd[512], text[16384];
    snprintf(cmd, sizeof cmd, "%s %s", DLOCK_PROMETHEUS_BIN, test_srv.url);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(text, 1, sizeof text - 1, p);
    text[n] = '\0';
    assert_int_equal(pclose(p), 0);

    exposition e;
    memset(&e, 0, sizeof e);
    char copy[sizeof text];
    memcpy(copy, text, n + 1);
    for (char *save, *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        line[0] == '#' ? comment(&e, line) : sample(&e, line);
    assert_true(e.n_samples > 50);
    assert_int_equal(value_of(text, "dlock_acquires_total{result=\"granted\"} "), 3);
    assert_int_equal(value_of(text, "dlock_acquires_total{result=\"busy\"} "), 1);
    assert_int_equal(value_of(text, "dlock_holds_ended_total{how=\"released\"} "), 3);
    assert_int_equal(value_of(text, "dlock_acquire_duration_seconds_count "), 4);
    assert_int_equal(value_of(text, "dlock_hold_duration_seconds_count "), 3);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_example_prints_parseable_metrics_of_what_it_did),
    };
    return cmocka_run_group_tests(tests, test_srv_setup, test_srv_teardown);
}
