/* SPDX-License-Identifier: BSD-3-Clause */
/* The pure parts of Redis Cluster support (src/redis/cluster.c), without a
 * server: the key slot (CRC16/XMODEM and hash tags, from the Cluster
 * specification), MOVED/ASK parsing, and the master table, which must keep
 * working after more failovers than it has entries. (The slot against a
 * real server's CLUSTER KEYSLOT is in tests/integration/test_cluster.c.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "cluster.h"

static void keyslot_follows_the_specification(void **state)
{
    (void)state;
    /* CRC16/XMODEM check value: crc16("123456789") = 0x31C3. */
    assert_int_equal(dlock__cluster_keyslot("123456789", 9), 0x31C3 & 16383);
    /* A tag is hashed alone; an empty or unclosed one is not a tag. */
    assert_int_equal(dlock__cluster_keyslot("{user1000}.following", 21),
                     dlock__cluster_keyslot("user1000", 8));
    assert_int_not_equal(dlock__cluster_keyslot("foo{}{bar}", 10), dlock__cluster_keyslot("bar", 3));
    assert_int_equal(dlock__cluster_keyslot("foo{{bar}}zap", 13), dlock__cluster_keyslot("{bar", 4));
    assert_int_equal(dlock__cluster_keyslot("foo{bar}{zap}", 13), dlock__cluster_keyslot("bar", 3));
}

static void redirects_are_parsed(void **state)
{
    (void)state;
    redisReply r = {0};
    char host[64];
    int ask = -1, port = 0;
    unsigned slot = 0;
    r.type = REDIS_REPLY_ERROR;
    r.str = (char *)"MOVED 3999 127.0.0.1:6381";
    r.len = strlen(r.str);
    assert_int_equal(dlock__cluster_redirect(&r, &ask, &slot, host, sizeof host, &port), 1);
    assert_int_equal(ask, 0);
    assert_int_equal(slot, 3999);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 6381);
    r.str = (char *)"ASK 12 ::1:7000";
    r.len = strlen(r.str);
    assert_int_equal(dlock__cluster_redirect(&r, &ask, &slot, host, sizeof host, &port), 1);
    assert_int_equal(ask, 1);
    assert_string_equal(host, "::1");
    static const char *not_redirects[] = {"MOVED", "MOVED x 1.2.3.4:5", "MOVED 16384 h:1",
                                          "ASK 1 host", "ASK 1 host:0", "ERR MOVED 1 h:1"};
    for (size_t i = 0; i < sizeof not_redirects / sizeof not_redirects[0]; i++) {
        r.str = (char *)not_redirects[i];
        r.len = strlen(r.str);
        assert_int_equal(dlock__cluster_redirect(&r, &ask, &slot, host, sizeof host, &port), 0);
    }
}

/* Each MOVED to a new address adds a master entry; once the table is full,
 * entries that no slot points at any more are reused (and their
 * generation bumped), so the client never runs out after many failovers. */
static void master_table_survives_many_failovers(void **state)
{
    (void)state;
    dlock__cluster *c = NULL;
    const char *seed[1] = {"redis://127.0.0.1:7000"};
    char err[200];
    assert_int_equal(dlock__cluster_new(&c, seed, 1, 4, 1000, err, sizeof err), DLOCK_OK);
    for (int k = 0; k < 5 * DLOCK__CLUSTER_MAX_MASTERS; k++) {
        unsigned slot = (unsigned)(k % 3);
        dlock__cluster_moved(c, slot, "127.0.0.1", 10000 + k);
        int idx = dlock__cluster_master_of(c, slot);
        assert_true(idx >= 0);
        assert_int_equal(c->master[idx].port, 10000 + k);
    }
    assert_int_equal((int)c->n_masters, DLOCK__CLUSTER_MAX_MASTERS);
    /* The three slots keep three different, current masters. */
    int a = dlock__cluster_master_of(c, 0), b = dlock__cluster_master_of(c, 1);
    assert_int_not_equal(a, b);
    assert_true(dlock__cluster_master_gen(c, a) >= 1);
    dlock__cluster_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(keyslot_follows_the_specification),
        cmocka_unit_test(redirects_are_parsed),
        cmocka_unit_test(master_table_survives_many_failovers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
