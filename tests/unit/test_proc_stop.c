/* SPDX-License-Identifier: BSD-3-Clause */
/* The harness's pause: test_proc_stop() returns only once every thread of
 * the process has stopped. kill(SIGSTOP) alone returns before that, and a
 * "paused" server still answered a request sent right after it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc.h"

static volatile unsigned long spins;

static void *spin(void *arg)
{
    (void)arg;
    for (;;)
        spins++;
    return NULL;
}

/* A child with three busy threads, the kind a SIGSTOP catches running. */
static pid_t spinning_child(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        alarm(60); /* never outlives a broken test */
        pthread_t t[2];
        for (int i = 0; i < 2; i++)
            if (pthread_create(&t[i], NULL, spin, NULL) != 0)
                _exit(1);
        spin(NULL);
    }
    return pid;
}

static void stop_returns_with_every_thread_stopped(void **state)
{
    (void)state;
    pid_t pid = spinning_child();
    assert_true(pid > 0);
    test_sleep_ms(50); /* its threads started */
    int not_stopped = 0;
    for (int round = 0; round < 200; round++) {
        assert_int_equal(test_proc_stop(pid, 5000), 0);
        not_stopped += !test_proc_threads_stopped(pid);
        kill(pid, SIGCONT);
        test_sleep_ms(1);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    assert_int_equal(not_stopped, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stop_returns_with_every_thread_stopped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
