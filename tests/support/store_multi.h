/* SPDX-License-Identifier: BSD-3-Clause */
/* The several-names tests of an in-line store (store_multi.c). */
#ifndef TEST_STORE_MULTI_H
#define TEST_STORE_MULTI_H

/* Run them against store_url (a server the caller started): the number
 * of failed tests, as cmocka_run_group_tests() returns it. */
int test_store_multi_run(const char *store_url);

#endif
