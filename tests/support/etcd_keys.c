/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "error.h"
#include "etcd_keys.h"
#include "etcd_kv.h"
#include "etcd_url.h"

int test_etcd_put_key(dlock__etcd *e, const char *key, size_t len, int64_t lease, int64_t *rev,
                      char *msg, size_t msg_len)
{
    /* The transaction reads the first key of a range that must hold the
     * new key: [key, key NUL) holds it alone. */
    char *end = dlock__malloc(len + 1);
    if (!end)
        return DLOCK_ENOMEM;
    memcpy(end, key, len);
    end[len] = '\0';
    int64_t made = 0;
    dlock__etcd_kv first;
    dlock__errbuf err = {0};
    int rc = dlock__etcd_create_and_first(e, key, len, NULL, 0, lease, key, len, end, len + 1,
                                          &made, &first, dlock__deadline_after_ms(3000), -1, &err);
    if (rc == DLOCK_OK)
        dlock__etcd_kv_clear(&first);
    else
        snprintf(msg, msg_len, "%s", dlock__err_str(&err));
    if (rev)
        *rev = made;
    dlock__err_free(&err);
    dlock__free(end);
    return rc;
}

int test_etcd_raw(dlock__etcd **out, const char *url)
{
    dlock__etcd_url u;
    char err[256];
    int rc = dlock__etcd_url_parse(&u, &url, 1, err, sizeof err);
    return rc == DLOCK_OK ? dlock__etcd_new(out, &u, 500, 2000) : rc;
}

int test_etcd_setup_raw(test_etcd *srv, const dlock_client_options *o, dlock_client **cl,
                        dlock__etcd **raw)
{
    if (test_etcd_setup(srv, 1, o, cl) != 0)
        return -1;
    return test_etcd_raw(raw, srv->url) == DLOCK_OK ? 0 : -1;
}

void test_etcd_teardown_raw(test_etcd *srv, dlock_client *cl, dlock__etcd *raw)
{
    dlock__etcd_free(raw);
    test_etcd_teardown(srv, cl);
}

unsigned long long test_etcd_token_id(const char *token)
{
    char id[17];
    snprintf(id, sizeof id, "%s", token);
    return strtoull(id, NULL, 16);
}

/* [NAME/, NAME0) into b and e (96 bytes each): the length of both. */
static size_t line_of(const char *name, char *b, char *e)
{
    int n = snprintf(b, 96, "%s/", name);
    snprintf(e, 96, "%s0", name);
    return (size_t)n;
}

int test_etcd_first_key(dlock__etcd *e, const char *name, char *out, size_t len)
{
    char b[96], end[96];
    size_t n = line_of(name, b, end);
    dlock__etcd_kv kv;
    int rc = dlock__etcd_first(e, b, n, end, n, &kv, dlock__deadline_after_ms(3000), NULL);
    snprintf(out, len, "%.*s", rc == DLOCK_OK && kv.key ? (int)kv.key_len : 0,
             rc == DLOCK_OK && kv.key ? kv.key : "");
    if (rc == DLOCK_OK)
        dlock__etcd_kv_clear(&kv);
    return rc;
}

int test_etcd_keys_under(dlock__etcd *e, const char *name, size_t *count)
{
    char b[96], end[96];
    size_t n = line_of(name, b, end);
    dlock__etcd_kv *kvs = NULL;
    int more = 0;
    int rc = dlock__etcd_range_page(e, b, n, end, n, 100, &kvs, count, &more,
                                    dlock__deadline_after_ms(3000), NULL);
    for (size_t i = 0; rc == DLOCK_OK && i < *count; i++)
        dlock__etcd_kv_clear(&kvs[i]);
    dlock__free(kvs);
    return rc;
}
