/* SPDX-License-Identifier: BSD-3-Clause */
/* The doctor's ACL check: may the connecting user run what dlock sends, on
 * the keys and channel of --prefix? ACL DRYRUN (Redis 7) answers without
 * running anything; without it the check says it could not tell. */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <string.h>

#include "doctor.h"

static int is_error(const redisReply *r)
{
    return !r || r->type == REDIS_REPLY_ERROR;
}

static const char *reply_text(const redisReply *r, const char *err)
{
    return !r ? err : r->str ? r->str : "unexpected reply";
}

/* What dlock runs, and what for. K stands for a lock key, H for a helper
 * key, C for the wake-up channel (filled in with --prefix). */
typedef struct acl_need {
    const char *argv[6];
    doc_status if_missing;
    const char *what;
} acl_need;

static const acl_need needs[] = {
    {{"EVALSHA", "0000000000000000000000000000000000000000", "1", "K"}, DOC_FAIL, "locks"},
    {{"EVAL", "return 1", "1", "K"}, DOC_FAIL, "locks"},
    {{"SCRIPT", "LOAD", "return 1"}, DOC_FAIL, "locks"},
    {{"SET", "K", "v"}, DOC_FAIL, "locks"},
    {{"GET", "K"}, DOC_FAIL, "locks"},
    {{"DEL", "K"}, DOC_FAIL, "locks"},
    {{"EXISTS", "H"}, DOC_FAIL, "locks"},
    {{"TYPE", "K"}, DOC_FAIL, "locks"},
    {{"PTTL", "K"}, DOC_FAIL, "locks"},
    {{"PEXPIRE", "K", "1000"}, DOC_FAIL, "locks"},
    {{"INCR", "H"}, DOC_FAIL, "fencing"},
    {{"PUBLISH", "C", "x"}, DOC_WARN, "wake-ups (else waiters poll)"},
    {{"SUBSCRIBE", "C"}, DOC_WARN, "wake-ups (else waiters poll)"},
    {{"HSET", "K", "f", "1"}, DOC_WARN, "reentrant locks"},
    {{"HINCRBY", "K", "f", "1"}, DOC_WARN, "reentrant locks"},
    {{"HKEYS", "K"}, DOC_WARN, "reentrant locks"},
    {{"RPUSH", "H", "x"}, DOC_WARN, "fair mode"},
    {{"LPOS", "H", "x"}, DOC_WARN, "fair mode"},
    {{"ZADD", "H", "1", "x"}, DOC_WARN, "waiter lists, shared locks, semaphores"},
    {{"ZREMRANGEBYSCORE", "H", "0", "1"}, DOC_WARN, "shared locks, semaphores"},
    {{"TIME"}, DOC_WARN, "waiter lists, shared locks, semaphores"},
};

static void acl_argv(const acl_need *n, const char *user, const char *key, const char *helper,
                     const char *chan, const char **out, int *argc)
{
    *argc = 0;
    out[(*argc)++] = "ACL";
    out[(*argc)++] = "DRYRUN";
    out[(*argc)++] = user;
    for (int i = 0; i < 6 && n->argv[i]; i++) {
        const char *a = n->argv[i];
        out[(*argc)++] = !strcmp(a, "K") ? key : !strcmp(a, "H") ? helper : !strcmp(a, "C") ? chan : a;
    }
}

void doc_check_acl(doc_conn *c, const char *node, const doc_settings *s)
{
    char err[256], user[256] = "default";
    redisReply *r = doc_commandf(c, err, sizeof err, "ACL", "WHOAMI", NULL);
    if (!r || (r->type == REDIS_REPLY_ERROR && strstr(r->str, "unknown"))) {
        doc_add(node, "acl", DOC_INFO, NULL, NULL,
                "no ACLs on this server (before Redis 6): every client may run every command");
        doc_reply_free(r);
        return;
    }
    if (is_error(r)) {
        doc_add(node, "acl", DOC_SKIP, "ACL WHOAMI refused, so the user's rights are unknown",
                "check the user against the ACL in docs/design.md (Key layout) by hand",
                "could not check: %s", reply_text(r, err));
        doc_reply_free(r);
        return;
    }
    snprintf(user, sizeof user, "%s", r->str ? r->str : "default");
    doc_reply_free(r);

    const char *prefix = s->g->copts.key_prefix ? s->g->copts.key_prefix : "";
    /* A helper key is the lock key, a NUL byte and more: a key pattern
     * that matches the lock key with '*' matches them too. */
    char key[512], chan[600];
    snprintf(key, sizeof key, "%sdlock-doctor", prefix);
    snprintf(chan, sizeof chan, "dlock:wake:%s", key);
    char missing_fail[1024] = "", missing_warn[1024] = "";
    for (size_t i = 0; i < sizeof needs / sizeof needs[0]; i++) {
        const char *argv[12];
        int argc;
        acl_argv(&needs[i], user, key, key, chan, argv, &argc);
        r = doc_command(c, err, sizeof err, argc, argv);
        if (r && r->type == REDIS_REPLY_ERROR && strcasestr(r->str, "unknown subcommand")) {
            doc_add(node, "acl", DOC_SKIP, "ACL DRYRUN is new in Redis 7",
                    "check the user against the ACL in docs/design.md (Key layout) by hand",
                    "could not check the rights of user '%s'", user);
            doc_reply_free(r);
            return;
        }
        if (r && r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "NOPERM", 6)) {
            doc_add(node, "acl", DOC_SKIP,
                    "the user may not run ACL DRYRUN, which tells what a user may run",
                    "grant the user +acl|dryrun for the doctor, or check it against "
                    "docs/design.md (Key layout) by hand",
                    "could not check the rights of user '%s'", user);
            doc_reply_free(r);
            return;
        }
        if (!r) {
            doc_add(node, "acl", DOC_SKIP, NULL, NULL, "could not check: %s", err);
            return;
        }
        int allowed = r && r->type == REDIS_REPLY_STATUS && !strcmp(r->str, "OK");
        if (!r) {
            doc_add(node, "acl", DOC_SKIP, NULL, NULL, "could not check: %s", err);
            return;
        }
        if (!allowed) {
            char *dst = needs[i].if_missing == DOC_FAIL ? missing_fail : missing_warn;
            size_t used = strlen(dst);
            char word[64];
            snprintf(word, sizeof word, "%s%s", needs[i].argv[0],
                     !strcmp(needs[i].argv[0], "SCRIPT") ? "|LOAD" : "");
            for (char *p = word; *p; p++)
                *p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
            snprintf(dst + used, 1024 - used, "%s%s (%s)", used ? ", " : "", word, needs[i].what);
        }
        doc_reply_free(r);
    }
    if (missing_fail[0])
        doc_add(node, "acl", DOC_FAIL, "dlock's scripts and commands are refused with NOPERM",
                "grant them for the key prefix (ACL SETUSER in docs/design.md, Key layout)",
                "user '%s' may not run: %s%s%s", user, missing_fail, missing_warn[0] ? "; " : "",
                missing_warn);
    else if (missing_warn[0])
        doc_add(node, "acl", DOC_WARN, "some features will be refused or fall back to polling",
                "grant them (ACL SETUSER in docs/design.md, Key layout)",
                "user '%s' may not run: %s", user, missing_warn);
    else
        doc_add(node, "acl", DOC_OK, NULL, NULL, "user '%s' may run every command dlock sends on "
                "keys '%s*'", user, prefix);
}

