/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fenced_store - a tiny "storage service" that understands fencing tokens.
 *
 * A lease-based lock cannot stop a holder that stalls (GC pause, swapped
 * out, stopped with SIGSTOP) past its lease and then writes: by then
 * another process holds the lock and has written. Fencing fixes this at the
 * resource: every grant of a dlock lock comes with a fencing token that
 * grows with each grant (dlock_lock_fence()); writers send it along, and
 * the storage refuses a write whose token is lower than one it has already
 * accepted. The stalled writer's late write is then refused instead of
 * overwriting its successor's.
 *
 * This program is that storage, kept in one file, and deliberately free of
 * dlock and Redis: the check belongs to the resource, not to the lock. Two
 * write modes show the difference:
 *
 *   fenced_store FILE write FENCE VALUE
 *       fenced: accept only if FENCE >= the highest token accepted so far
 *       (the same holder may write several times with its token)
 *   fenced_store FILE write-unfenced VALUE
 *       an ordinary store: the last writer wins, whatever its token
 *   fenced_store FILE read
 *       print "FENCE VALUE" (FENCE is 0 before any fenced write)
 *
 * Exit status: 0 written (or read), 1 refused as stale, 2 usage or I/O
 * error. Concurrent invocations are serialised with a POSIX record lock on
 * FILE, as a real storage service serialises its own writes.
 *
 * For example, with the dlock command (its job gets the token):
 *   dlock run --fence job -- sh -c 'fenced_store /tmp/s write "$DLOCK_FENCE" "report v2"'
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VALUE_MAX 4096

/* What the store holds: the highest token accepted and the value. */
typedef struct record {
    uint64_t fence;
    char value[VALUE_MAX + 1];
} record;

static int usage(void)
{
    fprintf(stderr, "usage: fenced_store FILE write FENCE VALUE\n"
                    "       fenced_store FILE write-unfenced VALUE\n"
                    "       fenced_store FILE read\n");
    return 2;
}

static int parse_fence(const char *s, uint64_t *out)
{
    char *end;
    if (!*s || *s == '-')
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = (uint64_t)v;
    return 0;
}

/* Take (or drop) the whole-file record lock, waiting for other writers. */
static int file_lock(int fd, short type)
{
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    while (fcntl(fd, F_SETLKW, &fl) != 0) {
        if (errno != EINTR)
            return -1;
    }
    return 0;
}

/* File format: "FENCE VALUE" on one line; an empty file is fence 0 with an
 * empty value. */
static int load(int fd, record *r)
{
    char buf[VALUE_MAX + 32];
    ssize_t n;
    size_t len = 0;
    memset(r, 0, sizeof *r);
    if (lseek(fd, 0, SEEK_SET) < 0)
        return -1;
    while (len < sizeof buf - 1 && (n = read(fd, buf + len, sizeof buf - 1 - len)) != 0) {
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        len += (size_t)n;
    }
    buf[len] = '\0';
    if (len == 0)
        return 0;
    char *sp = strchr(buf, ' ');
    if (!sp)
        return -1;
    *sp = '\0';
    if (parse_fence(buf, &r->fence) != 0)
        return -1;
    size_t vlen = strcspn(sp + 1, "\n");
    if (vlen > VALUE_MAX)
        return -1;
    memcpy(r->value, sp + 1, vlen);
    r->value[vlen] = '\0';
    return 0;
}

static int store(int fd, const record *r)
{
    char buf[VALUE_MAX + 32];
    int len = snprintf(buf, sizeof buf, "%" PRIu64 " %s\n", r->fence, r->value);
    if (len < 0 || (size_t)len >= sizeof buf)
        return -1;
    if (ftruncate(fd, 0) != 0)
        return -1;
    for (size_t off = 0; off < (size_t)len;) {
        ssize_t n = pwrite(fd, buf + off, (size_t)len - off, (off_t)off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        off += (size_t)n;
    }
    return fsync(fd);
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return usage();
    const char *path = argv[1], *cmd = argv[2];
    int fenced = strcmp(cmd, "write") == 0;
    int unfenced = strcmp(cmd, "write-unfenced") == 0;
    int reading = strcmp(cmd, "read") == 0;
    uint64_t fence = 0;
    const char *value = NULL;

    if (fenced && argc == 5) {
        if (parse_fence(argv[3], &fence) != 0) {
            fprintf(stderr, "fenced_store: bad fencing token \"%s\"\n", argv[3]);
            return 2;
        }
        value = argv[4];
    } else if (unfenced && argc == 4) {
        value = argv[3];
    } else if (!(reading && argc == 3)) {
        return usage();
    }
    if (value && (strlen(value) > VALUE_MAX || strchr(value, '\n'))) {
        fprintf(stderr, "fenced_store: value must be one line of at most %d bytes\n",
                VALUE_MAX);
        return 2;
    }

    int fd = open(path, reading ? O_RDONLY : O_RDWR | O_CREAT, 0644);
    if (fd < 0 && reading && errno == ENOENT) {
        printf("0 \n"); /* nothing stored yet */
        return 0;
    }
    if (fd < 0) {
        fprintf(stderr, "fenced_store: %s: %s\n", path, strerror(errno));
        return 2;
    }
    record cur;
    int status = 2;
    errno = 0;
    if (file_lock(fd, reading ? F_RDLCK : F_WRLCK) != 0 || load(fd, &cur) != 0) {
        fprintf(stderr, "fenced_store: %s: cannot read the store (%s)\n", path,
                errno ? strerror(errno) : "malformed");
        goto out;
    }
    if (reading) {
        printf("%" PRIu64 " %s\n", cur.fence, cur.value);
        status = 0;
    } else if (fenced && fence < cur.fence) {
        /* The heart of fencing: a token older than one already seen comes
         * from a holder whose lease has ended. */
        printf("refused: fencing token %" PRIu64 " is older than %" PRIu64
               " (a stale lock holder)\n", fence, cur.fence);
        status = 1;
    } else {
        record next;
        next.fence = fenced ? fence : cur.fence;
        memcpy(next.value, value, strlen(value) + 1);
        if (store(fd, &next) != 0) {
            fprintf(stderr, "fenced_store: %s: write failed: %s\n", path, strerror(errno));
            goto out;
        }
        if (fenced)
            printf("accepted: \"%s\" with fencing token %" PRIu64 "\n", value, fence);
        else
            printf("accepted: \"%s\" (no token checked)\n", value);
        status = 0;
    }
out:
    close(fd); /* drops the record lock */
    return status;
}
