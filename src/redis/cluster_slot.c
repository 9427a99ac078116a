/* SPDX-License-Identifier: BSD-3-Clause */
/* Redis Cluster key slots (cluster.h): the CRC16 of a key or of its hash
 * tag, and the helper keys a lock keeps in its key's slot. Pure functions,
 * apart from the slot map and the connections in cluster.c. */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "cluster.h"

/* CRC16/XMODEM (polynomial 0x1021, initial value 0, no reflection), the
 * checksum the Cluster specification uses for key slots. */
static uint16_t crc16(const char *buf, size_t len)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((uint16_t)(unsigned char)buf[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

/* The hash tag of a key: between the first '{' and the first '}' after
 * it, if that is not empty. 1 with *start, *n set, else 0. */
static int hash_tag(const char *key, size_t len, size_t *start, size_t *n)
{
    const char *open = memchr(key, '{', len);
    if (!open)
        return 0;
    size_t s = (size_t)(open - key) + 1;
    const char *close = memchr(key + s, '}', len - s);
    if (!close || close == key + s)
        return 0;
    *start = s;
    *n = (size_t)(close - (key + s));
    return 1;
}

unsigned dlock__cluster_keyslot(const char *key, size_t len)
{
    size_t s, n;
    if (hash_tag(key, len, &s, &n))
        return crc16(key + s, n) & (DLOCK__CLUSTER_SLOTS - 1);
    return crc16(key, len) & (DLOCK__CLUSTER_SLOTS - 1);
}

char *dlock__cluster_helper_key(const char *key, size_t len, const char *kind, size_t kind_len,
                                size_t *out_len)
{
    size_t s, n;
    char num[16];
    const char *tag = key;
    size_t tag_len = len;
    int with_key = 0;
    if (hash_tag(key, len, &s, &n)) {
        /* key NUL kind: shares the key's tag, as on a single node. */
        char *k = dlock__malloc(len + 1 + kind_len + 1);
        if (!k)
            return NULL;
        memcpy(k, key, len);
        k[len] = '\0';
        memcpy(k + len + 1, kind, kind_len);
        k[len + 1 + kind_len] = '\0';
        *out_len = len + 1 + kind_len;
        return k;
    }
    if (memchr(key, '}', len)) {
        /* {key} would end the tag early: a brace-free tag of the key's
         * slot instead, and the key itself after it (keeps the layout
         * one-to-one). Every client computes the same number. */
        unsigned want = dlock__cluster_keyslot(key, len);
        for (unsigned long d = 0;; d++) {
            tag_len = (size_t)snprintf(num, sizeof num, "%lu", d);
            if ((crc16(num, tag_len) & (DLOCK__CLUSTER_SLOTS - 1)) == want)
                break;
        }
        tag = num;
        with_key = 1;
    }
    /* "{" tag "}" NUL NUL [key NUL] kind. The double NUL tells these from
     * the tagged layout (a kind never starts with NUL). */
    size_t total = 1 + tag_len + 1 + 2 + (with_key ? len + 1 : 0) + kind_len;
    char *k = dlock__malloc(total + 1);
    if (!k)
        return NULL;
    char *p = k;
    *p++ = '{';
    memcpy(p, tag, tag_len);
    p += tag_len;
    *p++ = '}';
    *p++ = '\0';
    *p++ = '\0';
    if (with_key) {
        memcpy(p, key, len);
        p += len;
        *p++ = '\0';
    }
    memcpy(p, kind, kind_len);
    p += kind_len;
    *p = '\0';
    *out_len = total;
    return k;
}

unsigned dlock__cluster_req_slot(int numkeys, const char **args, const size_t *arglens)
{
    if (numkeys <= 0)
        return 0;
    return dlock__cluster_keyslot(args[0], arglens ? arglens[0] : strlen(args[0]));
}
