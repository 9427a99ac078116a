/* SPDX-License-Identifier: BSD-3-Clause */
/* The handle registry of test_handles.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_handles.h"

static dlock_lock *handles[TEST_HANDLES_MAX];
static dlock_client *clients[TEST_HANDLES_MAX];
static size_t n_handles, n_clients;

dlock_lock *test_handles_add(dlock_lock *l)
{
    assert_true(n_handles < TEST_HANDLES_MAX);
    handles[n_handles++] = l;
    return l;
}

dlock_client *test_handles_add_client(dlock_client *c)
{
    assert_true(n_clients < TEST_HANDLES_MAX);
    clients[n_clients++] = c;
    return c;
}

void test_handles_free_all(void)
{
    while (n_handles > 0)
        dlock_lock_free(handles[--n_handles]);
    while (n_clients > 0)
        dlock_client_free(clients[--n_clients]);
}
