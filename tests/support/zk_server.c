/* SPDX-License-Identifier: BSD-3-Clause */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "proc.h"
#include "zk_server.h"

#define ZK_JAR "/usr/share/java/zookeeper.jar"
#define ZK_CONF "/etc/zookeeper/conf" /* log4j's settings, as Debian's scripts use */
#define JAVA "/usr/bin/java"

int test_zk_available(void)
{
    return access(ZK_JAR, R_OK) == 0 && access(JAVA, X_OK) == 0;
}

int test_zk_four_letters(int port, const char *word, char *out, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct timeval tv = {0, 300 * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    size_t have = 0;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 && write(fd, word, 4) == 4) {
        ssize_t n;
        while (have + 1 < cap && (n = read(fd, out + have, cap - 1 - have)) > 0)
            have += (size_t)n;
    }
    out[have] = '\0';
    close(fd);
    return have > 0 ? 0 : -1;
}

/* ZooKeeper's four-letter "ruok": "imok" once it serves. */
static int ruok(int port)
{
    char buf[16];
    return test_zk_four_letters(port, "ruok", buf, sizeof buf) == 0 && strcmp(buf, "imok") == 0;
}

static int write_conf(const test_zk *z, const char *path, const char *extra)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f,
            "tickTime=100\n"
            "dataDir=%s/data\n"
            "clientPort=%d\n"
            "clientPortAddress=127.0.0.1\n"
            "maxSessionTimeout=60000\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr,cons\n"
            "%s",
            z->dir, z->port, extra ? extra : "");
    return fclose(f) == 0 ? 0 : -1;
}

/* Start z's java (a member of an ensemble when extra names the others). */
static int spawn(test_zk *z, const char *extra)
{
    char conf[300], log[300], logdir[300];
    snprintf(conf, sizeof conf, "%s/zoo.cfg", z->dir);
    snprintf(log, sizeof log, "%s/zookeeper.log", z->dir);
    snprintf(logdir, sizeof logdir, "-Dzookeeper.log.dir=%s", z->dir);
    if (write_conf(z, conf, extra) != 0)
        return -1;
    const char *main_class = extra ? "org.apache.zookeeper.server.quorum.QuorumPeerMain"
                                   : "org.apache.zookeeper.server.ZooKeeperServerMain";
    const char *argv[] = {JAVA, "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                          "-cp", ZK_CONF ":" ZK_JAR, logdir,
                          "-Dzookeeper.root.logger=WARN,CONSOLE", main_class, conf, NULL};
    pid_t pid = test_spawn_server(argv, log);
    if (pid < 0)
        return -1;
    z->pid = pid;
    return 0;
}

int test_zk_start(test_zk *z)
{
    memset(z, 0, sizeof *z);
    if (!test_zk_available()) {
        fprintf(stderr, "zk_server: no %s or %s (apt-get install zookeeper)\n", JAVA, ZK_JAR);
        return -1;
    }
    if (test_make_dir(z->dir, sizeof z->dir, "zk") != 0)
        return -1;
    for (int attempt = 0; attempt < 3; attempt++) {
        z->port = test_free_port();
        if (z->port < 0 || spawn(z, NULL) != 0)
            break;
        int64_t end = test_now_ms() + 30000; /* java on a loaded machine */
        while (test_now_ms() < end) {
            if (ruok(z->port)) {
                snprintf(z->url, sizeof z->url, "zk://127.0.0.1:%d", z->port);
                return 0;
            }
            if (kill(z->pid, 0) != 0)
                break; /* it died: the port was taken meanwhile */
            test_sleep_ms(50);
        }
        kill(z->pid, SIGKILL);
        test_reap_server(z->pid, 0);
        z->pid = 0;
    }
    fprintf(stderr, "zk_server: the member did not answer (see %s/zookeeper.log)\n", z->dir);
    return -1;
}

int test_zk_spawn_member(test_zk *z, const char *extra)
{
    return spawn(z, extra);
}

void test_zk_pause(const test_zk *z)
{
    if (z->pid > 0)
        kill(z->pid, SIGSTOP);
}

void test_zk_resume(const test_zk *z)
{
    if (z->pid > 0)
        kill(z->pid, SIGCONT);
}

void test_zk_stop(test_zk *z)
{
    if (z->pid > 0) {
        kill(z->pid, SIGCONT); /* a stopped process keeps a SIGTERM pending */
        kill(z->pid, SIGTERM);
        test_reap_server(z->pid, 5000);
        z->pid = 0;
    }
    if (z->dir[0]) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", z->dir);
        if (system(cmd) != 0)
            fprintf(stderr, "zk_server: could not remove %s\n", z->dir);
        z->dir[0] = '\0';
    }
}
