/* SPDX-License-Identifier: BSD-3-Clause */
/* The etcd gateway's JSON encoding (proto3 JSON): int64 as decimal
 * strings, bytes as base64, and what the gRPC codes of its error replies
 * mean to dlock (etcd_json.h). jansson builds and reads the JSON;
 * OpenSSL's EVP_EncodeBlock/EVP_DecodeBlock do the base64. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "common.h"
#include "etcd_json.h"

int dlock__etcd_map_error(long code, const char *msg)
{
    if (!msg)
        msg = "";
    switch (code) {
    case 16: /* UNAUTHENTICATED */
    case 7:  /* PERMISSION_DENIED */
        return DLOCK_EAUTH;
    case 3: /* INVALID_ARGUMENT: authentication failures come as this */
        /* The token predates a change of users, roles or permissions:
         * refused before it was applied, and a new token mends it
         * (dlock__etcd_token_stale). */
        if (strstr(msg, "revision of auth store is old"))
            return DLOCK_EBUSY;
        if (strstr(msg, "authentication") || strstr(msg, "user name") ||
            strstr(msg, "auth token") || strstr(msg, "password"))
            return DLOCK_EAUTH;
        return DLOCK_EREFUSED;
    case 5: /* NOT_FOUND */
        return strstr(msg, "lease not found") ? DLOCK_EEXPIRED : DLOCK_EREFUSED;
    case 14: /* UNAVAILABLE: a proposal that timed out may still commit */
        if (strstr(msg, "timed out") || strstr(msg, "leader changed"))
            return DLOCK_EUNKNOWN;
        return DLOCK_EBUSY;
    case 4: /* DEADLINE_EXCEEDED */
    case 1: /* CANCELED */
        return DLOCK_EUNKNOWN;
    case 8: /* RESOURCE_EXHAUSTED */
        return strstr(msg, "too many requests") ? DLOCK_EBUSY : DLOCK_EREFUSED;
    default:
        return DLOCK_EREFUSED;
    }
}

int dlock__etcd_token_stale(long code, const char *msg)
{
    /* "invalid auth token" (expired, or issued before a restart or an auth
     * disable), "auth token not found", ...: every UNAUTHENTICATED */
    return code == 16 || (code == 3 && msg && strstr(msg, "revision of auth store is old"));
}

int dlock__etcd_json_i64(json_t *obj, const char *field, int64_t *out)
{
    json_t *v = json_object_get(obj, field);
    *out = 0;
    if (!v)
        return 0;
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return 0;
    }
    if (!json_is_string(v))
        return -1;
    const char *s = json_string_value(v);
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (end == s || *end || errno)
        return -1;
    *out = (int64_t)x;
    return 0;
}

json_t *dlock__etcd_json_of_i64(int64_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%lld", (long long)v);
    return json_string(buf);
}

json_t *dlock__etcd_json_if_created(json_t *txn, const char *key, size_t len, int64_t rev)
{
    if (!txn || rev <= 0)
        return txn;
    json_t *cmp = json_pack("{s:o, s:s, s:s, s:o}", "key", dlock__etcd_json_b64(key, len),
                            "target", "CREATE", "result", "EQUAL", "create_revision",
                            dlock__etcd_json_of_i64(rev));
    if (!cmp || json_array_append_new(json_object_get(txn, "compare"), cmp) != 0) {
        json_decref(txn);
        return NULL;
    }
    return txn;
}

json_t *dlock__etcd_json_b64(const void *data, size_t len)
{
    if (len > INT_MAX / 2)
        return NULL;
    char *buf = dlock__malloc(4 * ((len + 2) / 3) + 1);
    if (!buf)
        return NULL;
    EVP_EncodeBlock((unsigned char *)buf, data, (int)len);
    json_t *j = json_string(buf);
    dlock__free(buf);
    return j;
}

char *dlock__etcd_b64_decode(const char *text, size_t *out_len)
{
    size_t n = strlen(text);
    if (n % 4 != 0 || n > INT_MAX)
        return NULL;
    char *buf = dlock__malloc(n / 4 * 3 + 1);
    if (!buf)
        return NULL;
    int got = EVP_DecodeBlock((unsigned char *)buf, (const unsigned char *)text, (int)n);
    if (got < 0) {
        dlock__free(buf);
        return NULL;
    }
    /* EVP_DecodeBlock counts the padding as zero bytes */
    size_t len = (size_t)got;
    if (n >= 1 && text[n - 1] == '=')
        len--;
    if (n >= 2 && text[n - 2] == '=')
        len--;
    buf[len] = '\0';
    *out_len = len;
    return buf;
}

void dlock__etcd_deleted_of_json(json_t *rep, dlock__etcd_deleted *d)
{
    memset(d, 0, sizeof *d);
    json_t *prev = json_array_get(json_object_get(rep, "prev_kvs"), 0);
    d->has_prev = prev != NULL;
    d->bad = dlock__etcd_json_i64(rep, "deleted", &d->deleted) ||
             (prev && dlock__etcd_json_i64(prev, "create_revision", &d->prev_create_rev));
}
