/* SPDX-License-Identifier: BSD-3-Clause */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"

int64_t test_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void test_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

int test_start_procs(pid_t *pids, int n, int (*fn)(int i, void *arg), void *arg)
{
    int failed = 0;
    pid_t parent = getpid();
    fflush(NULL);
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            /* A worker dies with the test: a test that fails before it
             * stops its workers (cmocka leaves the function) must not
             * leave them running, holding ctest's output pipe open until
             * its timeout (test_etcd_cluster did, 300 s). */
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent)
                _exit(3);
            _exit(fn(i, arg) & 0xff);
        }
        if (pids[i] < 0)
            failed++;
    }
    return failed;
}

int test_wait_procs(const pid_t *pids, int n)
{
    int failed = 0;
    for (int i = 0; i < n; i++) {
        int st;
        if (pids[i] > 0 && (waitpid(pids[i], &st, 0) != pids[i] || !WIFEXITED(st) ||
                            WEXITSTATUS(st) != 0))
            failed++;
    }
    return failed;
}

int test_run_procs(int n, int (*fn)(int i, void *arg), void *arg)
{
    pid_t pids[256];
    if (n > 256)
        n = 256;
    int failed = test_start_procs(pids, n, fn, arg);
    return failed + test_wait_procs(pids, n);
}

void test_tmp_path(char *out, size_t len, const char *stem)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(out, len, "%s/dlock-%s-%d", tmp && *tmp ? tmp : "/tmp", stem, (int)getpid());
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

/* Remove tmp's dlock-STEM-PID-* directories of dead processes, if old. */
static void sweep_dirs(const char *tmp, const char *stem)
{
    DIR *d = opendir(tmp);
    if (!d)
        return;
    char prefix[64];
    int plen = snprintf(prefix, sizeof prefix, "dlock-%s-", stem);
    time_t now = time(NULL);
    for (struct dirent *e; (e = readdir(d));) {
        char *end;
        if (strncmp(e->d_name, prefix, (size_t)plen) != 0)
            continue;
        long pid = strtol(e->d_name + plen, &end, 10);
        if (end == e->d_name + plen || *end != '-' || strlen(end) != 7 || pid <= 0)
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue; /* alive (or not ours to ask): in use */
        char path[1200];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", tmp, e->d_name);
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && now - st.st_mtime > 3600)
            nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    }
    closedir(d);
}

int test_make_dir(char *out, size_t len, const char *stem)
{
    const char *tmp = getenv("TMPDIR");
    tmp = tmp && *tmp ? tmp : "/tmp";
    sweep_dirs(tmp, stem);
    snprintf(out, len, "%s/dlock-%s-%d-XXXXXX", tmp, stem, (int)getpid());
    if (!mkdtemp(out)) {
        fprintf(stderr, "test harness: mkdtemp %s: %s\n", out, strerror(errno));
        return -1;
    }
    return 0;
}

/* 1 if a TCP listener can bind 127.0.0.1:port now. */
static int port_bindable(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

int test_free_port(void)
{
    /* Each call moves on from a start drawn from the pid and the clock,
     * so two calls of one process never return one port, and concurrent
     * test processes rarely meet. */
    static unsigned next;
    if (next == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        next = (unsigned)getpid() * 7919u + (unsigned)ts.tv_nsec;
    }
    unsigned span = TEST_PORT_MAX - TEST_PORT_MIN;
    for (unsigned tries = 0; tries < span; tries++) {
        int port = TEST_PORT_MIN + (int)(next++ % span);
        if (port_bindable(port) && port_bindable(port + TEST_PORT_BUS_OFFSET))
            return port;
    }
    return -1;
}

pid_t test_spawn_server(const char *const argv[], const char *log_path)
{
    pid_t parent = getpid();
    fflush(NULL); /* nothing buffered is written twice */
    pid_t pid = fork();
    if (pid != 0)
        return pid; /* the parent: the pid, or -1 */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127);
    int out = log_path ? open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0600) : -1;
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
        dup2(devnull, 0);
        if (!log_path)
            dup2(devnull, 1);
    }
    if (out >= 0) {
        dup2(out, 1);
        dup2(out, 2);
    }
    /* execvp's argv is not const only for historical reasons */
    execvp(argv[0], (char *const *)argv);
    fprintf(stderr, "test harness: cannot exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

void test_reap_server(pid_t pid, int max_ms)
{
    int64_t end = test_now_ms() + max_ms;
    while (waitpid(pid, NULL, WNOHANG) == 0) {
        if (test_now_ms() >= end) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            return;
        }
        test_sleep_ms(10);
    }
}

int test_proc_threads_stopped(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return 1; /* gone */
    int stopped = 1;
    struct dirent *e;
    while (stopped && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char stat_path[600], buf[512];
        snprintf(stat_path, sizeof stat_path, "%s/%s/stat", path, e->d_name);
        FILE *f = fopen(stat_path, "r");
        if (!f)
            continue; /* the thread ended */
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        /* "tid (comm) S ...": the state follows the last ')'. */
        const char *p = strrchr(buf, ')');
        char st = p && p[1] == ' ' ? p[2] : '?';
        stopped = st == 'T' || st == 't' || st == 'Z' || st == 'X';
    }
    closedir(d);
    return stopped;
}

int test_proc_stop(pid_t pid, int max_ms)
{
    if (kill(pid, SIGSTOP) != 0)
        return -1;
    int64_t until = test_now_ms() + max_ms;
    while (!test_proc_threads_stopped(pid)) {
        if (test_now_ms() >= until)
            return -1;
        test_sleep_ms(1);
    }
    return 0;
}

double test_cpu_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

/* The sum of each(dir/name, arg) over the entries of dir, or -1 when
 * dir cannot be read. */
static long sum_over(const char *dir, long (*each)(const char *path, const char *arg),
                     const char *arg)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    long sum = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char path[300];
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        sum += each(path, arg);
    }
    closedir(d);
    return sum;
}

/* One thread's voluntary context switches if it is named comm, else 0. */
static long wakeups_of(const char *task_dir, const char *comm)
{
    char path[600], line[256];
    snprintf(path, sizeof path, "%s/comm", task_dir);
    FILE *f = fopen(path, "r");
    int named = f && fgets(line, sizeof line, f) && strncmp(line, comm, strlen(comm)) == 0 &&
                line[strlen(comm)] == '\n';
    if (f)
        fclose(f);
    long n = 0;
    snprintf(path, sizeof path, "%s/status", task_dir);
    f = named ? fopen(path, "r") : NULL;
    while (f && fgets(line, sizeof line, f) &&
           sscanf(line, "voluntary_ctxt_switches: %ld", &n) != 1)
        ;
    if (f)
        fclose(f);
    return n;
}

long test_thread_wakeups(const char *comm)
{
    return sum_over("/proc/self/task", wakeups_of, comm);
}

/* 1 if the fd at path is an eventfd. */
static long is_eventfd(const char *path, const char *unused)
{
    (void)unused;
    char to[64];
    ssize_t len = readlink(path, to, sizeof to - 1);
    if (len <= 0)
        return 0;
    to[len] = '\0';
    return strcmp(to, "anon_inode:[eventfd]") == 0;
}

int test_eventfds(void)
{
    return (int)sum_over("/proc/self/fd", is_eventfd, NULL);
}
