/* SPDX-License-Identifier: BSD-3-Clause */
/* Key naming: the Redis key of a lock and the helper keys derived from it
 * (docs/design.md, "Key layout"). Used by the lock path, status and tests;
 * it knows nothing of lock handles. */
#ifndef DLOCK_KEYS_H
#define DLOCK_KEYS_H

#include <stddef.h>

#include "common.h"

/* The prefix of a lock's wake-up channel: "dlock:wake:" + lock key. */
#define DLOCK__WAKE_PREFIX "dlock:wake:"

/* A helper key of the lock key `key`: key NUL kind: under the lock key's
 * prefix, in its hash slot when the key has a {tag}, and never equal to a
 * lock key or another lock's helper key. NULL when out of memory. */
char *dlock__derived_key(const char *key, size_t len, const char *kind,
                         size_t kind_len, size_t *out_len);
/* dlock__derived_key(), or on a cluster client the layout that keeps the
 * helper key in the lock key's hash slot (src/redis/cluster.h,
 * docs/deployment.md). */
char *dlock__helper_key(const dlock_client *client, const char *key, size_t len,
                        const char *kind, size_t kind_len, size_t *out_len);
/* The fencing counter key: key NUL "fence". */
char *dlock__fence_key(const char *key, size_t len, size_t *out_len);
/* The Redis key of lock `name`: the client's key_prefix + name. */
char *dlock__lock_key(const dlock_client *client, const char *name, size_t len,
                      size_t *out_len);
/* The wake-up channel of lock key `key`: DLOCK__WAKE_PREFIX + key. */
char *dlock__wake_channel(const char *key, size_t len, size_t *out_len);
/* The same for a client: on a cluster, the byte 1 (which tells the
 * release scripts to SPUBLISH; src/redis/scripts/lib/wake.lua) then
 * DLOCK__WAKE_PREFIX + the key's helper form for "wake", a name in the
 * key's hash slot (a script's shard channel must share its keys' slot). */
char *dlock__wake_channel_for(const dlock_client *client, const char *key, size_t len,
                              size_t *out_len);

/* An election's channel (src/redis/elect.c), on which its leader's value
 * writes are published: the lock's channel NUL "elect" (a name no inbox
 * has: an inbox's tag is hex), or on a cluster DLOCK__WAKE_PREFIX + the
 * key's helper form for "elect" (in the key's slot). As the scripts name
 * it: on a cluster with the byte 1 first (SPUBLISH); *sub_off is the
 * offset of the name to subscribe to (1 on a cluster, else 0). */
char *dlock__elect_channel_for(const dlock_client *client, const char *key, size_t len,
                               size_t *out_len, size_t *sub_off);

/* Addressed wake-ups (docs/waiting.md): a waiting client's inbox for a
 * lock is the lock's channel, NUL, then the tag: the first
 * DLOCK__INBOX_TAG_LEN hex digits of the client id. A wait id or fair
 * token of 32 + DLOCK__INBOX_TAG_LEN hex digits ends with the tag of the
 * inbox it is woken on (src/redis/scripts/lib/wake.lua, wake_to): the channel
 * is under the lock's own, so an ACL channel pattern that covers the lock
 * covers it too. */
#define DLOCK__INBOX_TAG_LEN 16
char *dlock__inbox_channel(const char *channel, size_t len, const char *client_id,
                           size_t *out_len);

#endif
