/* SPDX-License-Identifier: BSD-3-Clause */
/* A registry of the lock handles and clients one test makes, freed by the
 * test's teardown even when the test failed half-way (cmocka longjmps out
 * of it): handles first, newest first, then clients. Main thread only. */
#ifndef DLOCK_TEST_HANDLES_H
#define DLOCK_TEST_HANDLES_H

#include "dlock.h"

#define TEST_HANDLES_MAX 16

/* Register and return l (c): freed by test_handles_free_all(). */
dlock_lock *test_handles_add(dlock_lock *l);
dlock_client *test_handles_add_client(dlock_client *c);
/* Free everything registered (teardown). */
void test_handles_free_all(void);

#endif
