/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdio.h>
#include <string.h>

#include "error.h"

static const struct {
    int code;
    const char *name;
    const char *text;
} errors[] = {
    {DLOCK_OK, "DLOCK_OK", "success"},
    {DLOCK_ENOTACQUIRED, "DLOCK_ENOTACQUIRED", "lock is held by another owner"},
    {DLOCK_ETIMEDOUT, "DLOCK_ETIMEDOUT", "timed out waiting for the lock"},
    {DLOCK_ECANCELED, "DLOCK_ECANCELED", "wait for the lock was cancelled"},
    {DLOCK_ENOTOWNER, "DLOCK_ENOTOWNER", "lock is held by another owner, not us"},
    {DLOCK_EEXPIRED, "DLOCK_EEXPIRED", "lock had already expired"},
    {DLOCK_ELOST, "DLOCK_ELOST", "lock was lost (renewal failed)"},
    {DLOCK_ENOQUORUM, "DLOCK_ENOQUORUM", "no majority of nodes reached"},
    {DLOCK_EINVAL, "DLOCK_EINVAL", "invalid argument"},
    {DLOCK_ENOTHELD, "DLOCK_ENOTHELD", "this handle does not hold the lock"},
    {DLOCK_EIO, "DLOCK_EIO", "server unreachable"},
    {DLOCK_EUNKNOWN, "DLOCK_EUNKNOWN", "no reply from the server: outcome unknown"},
    {DLOCK_EAUTH, "DLOCK_EAUTH", "authentication failed or permission denied"},
    {DLOCK_EWRONGTYPE, "DLOCK_EWRONGTYPE", "key holds a value of the wrong type"},
    {DLOCK_EREFUSED, "DLOCK_EREFUSED", "the server refused the command"},
    {DLOCK_EBUSY, "DLOCK_EBUSY", "the server is temporarily unavailable"},
    {DLOCK_ENOMEM, "DLOCK_ENOMEM", "out of memory"},
    {DLOCK_ENOTSUP, "DLOCK_ENOTSUP", "not supported"},
    {DLOCK_EPROTO, "DLOCK_EPROTO", "unexpected reply from the server"},
    {DLOCK_ETLS, "DLOCK_ETLS", "TLS handshake or certificate verification failed"},
    {DLOCK_ENOREPLICAS, "DLOCK_ENOREPLICAS", "too few replicas acknowledged the write"},
};

const char *dlock_strerror(int code)
{
    for (size_t i = 0; i < DLOCK__ARRAY_LEN(errors); i++)
        if (errors[i].code == code)
            return errors[i].text;
    return "unknown dlock error code";
}

const char *dlock_errname(int code)
{
    for (size_t i = 0; i < DLOCK__ARRAY_LEN(errors); i++)
        if (errors[i].code == code)
            return errors[i].name;
    return "DLOCK_E?";
}

int dlock_error_is_transient(int code)
{
    /* Unreachable, silent or busy nodes may come back while a caller
     * waits; refusals, bad credentials and wrong types will not (the
     * waiting acquire's rule, quorum.c). */
    switch (code) {
    case DLOCK_EIO:
    case DLOCK_EUNKNOWN:
    case DLOCK_EBUSY:
    case DLOCK_ENOQUORUM:
        return 1;
    default:
        return 0;
    }
}

const char *dlock_version(void)
{
    return DLOCK_VERSION_STRING;
}

static const struct {
    const char *prefix;
    int code;
} redis_errors[] = {
    {"NOAUTH", DLOCK_EAUTH},         {"WRONGPASS", DLOCK_EAUTH},
    {"NOPERM", DLOCK_EAUTH},         {"WRONGTYPE", DLOCK_EWRONGTYPE},
    {"OOM", DLOCK_EREFUSED},         {"READONLY", DLOCK_EREFUSED},
    {"MISCONF", DLOCK_EREFUSED},     {"NOREPLICAS", DLOCK_EREFUSED},
    {"EXECABORT", DLOCK_EREFUSED},   {"NOSCRIPT", DLOCK_EREFUSED},
    {"LOADING", DLOCK_EBUSY},        {"BUSY", DLOCK_EBUSY},
    {"MASTERDOWN", DLOCK_EBUSY},     {"TRYAGAIN", DLOCK_EBUSY},
    {"CLUSTERDOWN", DLOCK_EBUSY},
};

static int match_word(const char *msg, size_t len, const char *word)
{
    size_t n = strlen(word);
    if (len < n || memcmp(msg, word, n) != 0)
        return 0;
    return len == n || msg[n] == ' ' || msg[n] == '\r' || msg[n] == '\n';
}

int dlock__map_redis_error(const char *msg, size_t len)
{
    if (!msg)
        return DLOCK_EPROTO;
    for (size_t i = 0; i < DLOCK__ARRAY_LEN(redis_errors); i++)
        if (match_word(msg, len, redis_errors[i].prefix))
            return redis_errors[i].code;
    /* "ERR invalid password" (Redis < 6), "ERR AUTH <password> called
     * without any password configured" and, from Redis < 7, errors raised
     * inside a script are wrapped in "ERR Error running script ...": look
     * for the inner class. */
    static const char *inner[] = {"WRONGTYPE", "NOPERM", "OOM", "READONLY",
                                  "NOAUTH", "BUSY", "LOADING"};
    for (size_t i = 0; i < DLOCK__ARRAY_LEN(inner); i++) {
        size_t n = strlen(inner[i]);
        for (size_t j = 1; j + n <= len; j++)
            if (msg[j - 1] == ' ' && memcmp(msg + j, inner[i], n) == 0 &&
                (j + n == len || msg[j + n] == ' '))
                return dlock__map_redis_error(msg + j, len - j);
    }
    if (len >= 20 && (memmem(msg, len, "invalid password", 16) ||
                      memmem(msg, len, "invalid username-password", 25)))
        return DLOCK_EAUTH;
    /* An ACL refusal of a command a script runs: Redis 6 and 7.0 say "ERR
     * The user executing the script can't run this command or subcommand"
     * (or "can't access at least one of the keys", or "is lacking the
     * permissions"), 7.2 "ERR ACL failure in script: ...". It is the ACL's
     * no, as NOPERM is. */
    if (memmem(msg, len, "The user executing the script ", 30) ||
        memmem(msg, len, "ERR ACL failure in script", 25))
        return DLOCK_EAUTH;
    return DLOCK_EREFUSED;
}

void dlock__err_clear(dlock__errbuf *e)
{
    if (e->msg)
        e->msg[0] = '\0';
}

const char *dlock__err_str(const dlock__errbuf *e)
{
    return e->msg ? e->msg : "";
}

void dlock__err_free(dlock__errbuf *e)
{
    dlock__free(e->msg);
    e->msg = NULL;
}

static int err_room(dlock__errbuf *e)
{
    if (!e->msg && (e->msg = dlock__malloc(DLOCK__ERRMSG_MAX)) != NULL)
        e->msg[0] = '\0';
    return e->msg != NULL;
}

void dlock__err_set(dlock__errbuf *e, const char *fmt, ...)
{
    if (!err_room(e))
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, DLOCK__ERRMSG_MAX, fmt, ap);
    va_end(ap);
}

void dlock__err_append(dlock__errbuf *e, const char *fmt, ...)
{
    if (!err_room(e))
        return;
    size_t used = strlen(e->msg);
    if (used > 0 && used + 2 < DLOCK__ERRMSG_MAX) {
        memcpy(e->msg + used, "; ", 3);
        used += 2;
    }
    if (used + 1 >= DLOCK__ERRMSG_MAX)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg + used, DLOCK__ERRMSG_MAX - used, fmt, ap);
    va_end(ap);
}

void dlock__copy_msg(char *dst, size_t len, const char *src)
{
    if (!dst || len == 0)
        return;
    snprintf(dst, len, "%s", src ? src : "");
}

void dlock__misuse(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "dlock: %s; aborting\n", line);
    abort();
}

void dlock__pthread_abort(const char *what, int rc, const char *file, int line)
{
    fprintf(stderr, "dlock: %s failed with %d at %s:%d; aborting\n", what, rc,
            file, line);
    abort();
}
