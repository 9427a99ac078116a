/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock doctor [--json] [--ttl D] [URL...]: check a deployment and say
 * what is unsafe or slow, each finding with its reason and its fix.
 * Exit status: 0 nothing to fix, 1 warnings only, 2 a check failed,
 * 69 no node answered, 64 usage (docs/dlock.1). */
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"

#define DOC_EXIT_WARN 1
#define DOC_EXIT_FAIL 2
#define MAX_FINDINGS 512

typedef struct finding {
    char *node; /* NULL: the deployment as a whole */
    char *check;
    doc_status status;
    char *detail;
    char *reason;
    char *fix;
} finding;

static finding findings[MAX_FINDINGS];
static size_t n_findings;

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

void doc_add(const char *node, const char *check, doc_status st, const char *reason,
             const char *fix, const char *fmt, ...)
{
    char detail[2048];
    va_list ap;
    if (n_findings == MAX_FINDINGS)
        return;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    finding *f = &findings[n_findings++];
    f->node = dup_or_null(node);
    f->check = dup_or_null(check);
    f->status = st;
    f->detail = dup_or_null(detail);
    /* A reason or fix matter only when something is to be done. */
    f->reason = st == DOC_OK ? NULL : dup_or_null(reason);
    f->fix = st == DOC_OK || st == DOC_INFO ? NULL : dup_or_null(fix);
}

static const char *status_name(doc_status st)
{
    static const char *const names[] = {"ok", "info", "skip", "warn", "fail"};
    return names[st];
}

static const char *status_label(doc_status st)
{
    static const char *const labels[] = {"ok", "info", "skip", "WARN", "FAIL"};
    return labels[st];
}

static void json_str(const char *s, FILE *f)
{
    if (!s) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static void print_json(FILE *f, size_t counts[5], int exit_code)
{
    fprintf(f, "{\"ok\":%s,\"exit\":%d,\"failed\":%zu,\"warnings\":%zu,\"skipped\":%zu,"
               "\"findings\":[",
            exit_code == 0 ? "true" : "false", exit_code, counts[DOC_FAIL], counts[DOC_WARN],
            counts[DOC_SKIP]);
    for (size_t i = 0; i < n_findings; i++) {
        finding *x = &findings[i];
        fputs(i ? ",{\"node\":" : "{\"node\":", f);
        json_str(x->node, f);
        fputs(",\"check\":", f);
        json_str(x->check, f);
        fprintf(f, ",\"status\":\"%s\",\"detail\":", status_name(x->status));
        json_str(x->detail, f);
        fputs(",\"reason\":", f);
        json_str(x->reason, f);
        fputs(",\"fix\":", f);
        json_str(x->fix, f);
        fputc('}', f);
    }
    fputs("]}\n", f);
}

static void print_text(FILE *f, size_t counts[5])
{
    char esc[4096];
    const char *last = "";
    int first = 1;
    /* Node by node in the order checked, the deployment's findings last. */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < n_findings; i++) {
            finding *x = &findings[i];
            if ((pass == 0) != (x->node != NULL))
                continue;
            const char *group = x->node ? x->node : "deployment";
            if (first || strcmp(group, last) != 0)
                fprintf(f, "%s%s\n", first ? "" : "\n", cli_escape(group, esc, sizeof esc));
            first = 0;
            last = group;
            fprintf(f, "  %-4s  %-13s %s\n", status_label(x->status), x->check,
                    cli_escape(x->detail, esc, sizeof esc));
            if (x->reason)
                fprintf(f, "        %-13s why: %s\n", "", cli_escape(x->reason, esc, sizeof esc));
            if (x->fix)
                fprintf(f, "        %-13s fix: %s\n", "", cli_escape(x->fix, esc, sizeof esc));
        }
    }
    fprintf(f, "\n%zu failed, %zu warnings, %zu ok, %zu not checked\n", counts[DOC_FAIL],
            counts[DOC_WARN], counts[DOC_OK] + counts[DOC_INFO], counts[DOC_SKIP]);
}

int cli_cmd_doctor(cli_global *g, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, CLI_OPT_JSON},
        {"ttl", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int c, json = 0;
    doc_settings s = {g, 30000, 0};
    while ((c = getopt_long(argc, argv, ":t:h", longopts, NULL)) != -1) {
        if (c == 'h')
            exit(cli_help(argv[0]));
        else if (c == CLI_OPT_JSON)
            json = 1;
        else if (c == 't') {
            if (cli_parse_ttl(argv[0], optarg, &s.ttl_ms))
                return CLI_EXIT_USAGE;
        } else
            return cli_bad_option(argv[0], c, optopt, argv, optind);
    }
    for (int i = optind; i < argc; i++) {
        if (g->n_urls == CLI_MAX_URLS)
            return cli_usage_error(argv[0], "at most %d URLs", CLI_MAX_URLS);
        g->urls[g->n_urls++] = argv[i];
    }
    /* The URLs, password and options exactly as every other command takes
     * them (and the same usage errors); the client itself connects to
     * nothing until used, so it is dropped at once. */
    dlock_client *client = NULL;
    int rc = cli_open_client(g, &client);
    dlock_client_free(client);
    if (rc)
        return rc;

    doc_node *nodes[CLI_MAX_URLS] = {0};
    size_t reached = 0;
    for (size_t i = 0; i < g->n_urls; i++)
        if (!doc_is_etcd(g->urls[i]) && !doc_is_zk(g->urls[i]) && strstr(g->urls[i], "://"))
            s.n_redis++;
    for (size_t i = 0; i < g->n_urls; i++) {
        const char *u = g->urls[i];
        if (doc_is_etcd(u)) {
            reached += doc_etcd_check(u, &s) > 0;
        } else if (doc_is_zk(u)) {
            reached += doc_zk_check(u, &s) > 0;
        } else if (strstr(u, "://")) {
            nodes[i] = doc_redis_check(u, &s);
            reached += doc_node_reached(nodes[i]);
        }
    }
    if (s.n_redis > 0)
        doc_redis_across(nodes, g->n_urls, &s);
    for (size_t i = 0; i < g->n_urls; i++)
        doc_node_free(nodes[i]);

    size_t counts[5] = {0};
    for (size_t i = 0; i < n_findings; i++)
        counts[findings[i].status]++;
    rc = counts[DOC_FAIL] ? DOC_EXIT_FAIL : counts[DOC_WARN] ? DOC_EXIT_WARN : 0;
    if (reached == 0)
        rc = CLI_EXIT_UNAVAILABLE;
    if (json)
        print_json(stdout, counts, rc);
    else
        print_text(stdout, counts);
    if (fflush(stdout) != 0)
        rc = CLI_EXIT_OSERR;
    for (size_t i = 0; i < n_findings; i++) {
        free(findings[i].node);
        free(findings[i].check);
        free(findings[i].detail);
        free(findings[i].reason);
        free(findings[i].fix);
    }
    return rc;
}
