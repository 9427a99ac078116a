/* SPDX-License-Identifier: BSD-3-Clause */
/* A holder in a child process, for the tests that stop it (SIGSTOP) and
 * break its lock (test_break_faults.c, test_etcd_break_faults.c): it takes
 * the lock once, tells the test over a pipe, then extends every 20 ms
 * until an extend fails, and tells how. */
#ifndef DLOCK_TEST_HOLDER_H
#define DLOCK_TEST_HOLDER_H

#include <stdint.h>

#include "dlock.h"

/* What the holder tells the test: its acquire (rc, fence), then the
 * first extend that failed (rc). */
typedef struct test_hold_report {
    int rc;
    uint64_t fence;
} test_hold_report;

/* In the child (no cmocka there): run the holder on l of client c (either
 * may be NULL: the child then exits 2), writing reports to wr; frees both
 * and exits. Never returns. */
void test_holder_child(dlock_client *c, dlock_lock *l, int wr) __attribute__((noreturn));

/* One report from the holder within max_ms (the test fails otherwise). */
test_hold_report test_holder_read(int rd, int max_ms);

#endif
