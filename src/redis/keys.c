/* SPDX-License-Identifier: BSD-3-Clause */
/* Key naming (keys.h). */
#include <string.h>

#include "client.h"
#include "keys.h"

char *dlock__derived_key(const char *key, size_t len, const char *kind,
                         size_t kind_len, size_t *out_len)
{
    /* KEY NUL KIND (docs/design.md, "Key layout"). A lock key comes from C
     * strings and never holds a NUL byte, so no lock key is ever a helper
     * key, and the first NUL tells which lock a helper key belongs to: the
     * mapping is injective. The helper starts with the lock key, so an ACL
     * key pattern or a prefix that covers the lock covers its helpers, and
     * as KIND has no brace it shares the lock key's {hash tag}, if any. */
    size_t n = len + 1 + kind_len;
    char *k = dlock__malloc(n + 1);
    if (!k)
        return NULL;
    memcpy(k, key, len);
    k[len] = '\0';
    memcpy(k + len + 1, kind, kind_len);
    k[n] = '\0';
    *out_len = n;
    return k;
}

char *dlock__helper_key(const dlock_client *client, const char *key, size_t len,
                        const char *kind, size_t kind_len, size_t *out_len)
{
    /* A cluster keeps every key of a lock in its key's hash slot. */
    if (dlock__client_cluster(client))
        return dlock__cluster_helper_key(key, len, kind, kind_len, out_len);
    return dlock__derived_key(key, len, kind, kind_len, out_len);
}

char *dlock__fence_key(const char *key, size_t len, size_t *out_len)
{
    return dlock__derived_key(key, len, "fence", 5, out_len);
}

/* pfx + s, NUL-terminated. */
static char *concat(const char *pfx, size_t plen, const char *s, size_t len, size_t *out_len)
{
    char *k = dlock__malloc(plen + len + 1);
    if (!k)
        return NULL;
    memcpy(k, pfx, plen);
    memcpy(k + plen, s, len);
    k[plen + len] = '\0';
    *out_len = plen + len;
    return k;
}

char *dlock__lock_key(const dlock_client *client, const char *name, size_t len,
                      size_t *out_len)
{
    const char *pfx = client->opts.key_prefix ? client->opts.key_prefix : "";
    return concat(pfx, strlen(pfx), name, len, out_len);
}

char *dlock__wake_channel(const char *key, size_t len, size_t *out_len)
{
    return concat(DLOCK__WAKE_PREFIX, sizeof DLOCK__WAKE_PREFIX - 1, key, len, out_len);
}

char *dlock__wake_channel_for(const dlock_client *client, const char *key, size_t len,
                              size_t *out_len)
{
    if (!dlock__client_cluster(client))
        return dlock__wake_channel(key, len, out_len);
    size_t hlen = 0;
    char *h = dlock__cluster_helper_key(key, len, "wake", 4, &hlen);
    char *ch = h ? concat("\1" DLOCK__WAKE_PREFIX, sizeof DLOCK__WAKE_PREFIX, h, hlen, out_len)
                 : NULL;
    dlock__free(h);
    return ch;
}

char *dlock__elect_channel_for(const dlock_client *client, const char *key, size_t len,
                               size_t *out_len, size_t *sub_off)
{
    size_t clen = 0;
    char *ch = dlock__wake_channel_for(client, key, len, &clen);
    if (!ch)
        return NULL;
    char *out = NULL;
    *sub_off = 0;
    if (!dlock__client_cluster(client)) {
        out = dlock__derived_key(ch, clen, "elect", 5, out_len);
    } else {
        size_t hlen = 0;
        char *h = dlock__cluster_helper_key(key, len, "elect", 5, &hlen);
        out = h ? concat("\1" DLOCK__WAKE_PREFIX, sizeof DLOCK__WAKE_PREFIX, h, hlen, out_len)
                : NULL;
        dlock__free(h);
        *sub_off = 1;
    }
    dlock__free(ch);
    return out;
}

char *dlock__inbox_channel(const char *channel, size_t len, const char *client_id,
                           size_t *out_len)
{
    /* The same shape as a helper key: channel NUL tag. */
    return dlock__derived_key(channel, len, client_id, DLOCK__INBOX_TAG_LEN, out_len);
}
