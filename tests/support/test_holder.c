/* SPDX-License-Identifier: BSD-3-Clause */
/* The child-process holder of test_holder.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <unistd.h>

#include "test_holder.h"
#include "proc.h"

void test_holder_child(dlock_client *c, dlock_lock *l, int wr)
{
    test_hold_report r = {DLOCK_EIO, 0};
    if (!c || !l)
        _exit(2);
    r.rc = dlock_lock_acquire(l, 0);
    r.fence = dlock_lock_fence(l);
    if (write(wr, &r, sizeof r) != (ssize_t)sizeof r || r.rc != DLOCK_OK)
        _exit(2);
    while ((r.rc = dlock_lock_extend(l, 60000)) == DLOCK_OK)
        test_sleep_ms(20);
    if (write(wr, &r, sizeof r) != (ssize_t)sizeof r)
        _exit(2);
    dlock_lock_free(l);
    dlock_client_free(c);
    _exit(0);
}

test_hold_report test_holder_read(int rd, int max_ms)
{
    struct pollfd p = {rd, POLLIN, 0};
    int n;
    while ((n = poll(&p, 1, max_ms)) < 0 && errno == EINTR)
        ;
    if (n != 1)
        fail_msg("the holder process said nothing within %d ms", max_ms);
    test_hold_report r;
    assert_int_equal(read(rd, &r, sizeof r), (ssize_t)sizeof r);
    return r;
}
