/* SPDX-License-Identifier: BSD-3-Clause */
/* The read-write lock tests of an in-line store (store_rw.c). */
#ifndef TEST_STORE_RW_H
#define TEST_STORE_RW_H

/* Run them against store_url (a server the caller started): the number
 * of failed tests, as cmocka_run_group_tests() returns it. */
int test_store_rw_run(const char *store_url);

#endif
