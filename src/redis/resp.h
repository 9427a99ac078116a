/* SPDX-License-Identifier: BSD-3-Clause */
/* The bytes of a request to Redis (conn.c appends them to a connection's
 * output). */
#ifndef DLOCK_RESP_H
#define DLOCK_RESP_H

#include <stddef.h>

/* A command as Redis reads a request: an array of bulk strings ("*argc",
 * then "$len" and the bytes of each argument, each line ending in CRLF).
 * _len is its size; _write puts it at p, which has that much room, and
 * returns its end. argvlen NULL: the arguments are strings.
 *
 * Written here rather than by hiredis's redisFormatCommandArgv, which
 * prints each length with sprintf into a buffer of its own that is then
 * copied: that was two fifths of an uncontended acquire + release's
 * instructions (callgrind, the S1 worker; hiredis's sds formatter still a
 * third). Only the request's framing is written here; every reply is
 * read by hiredis's reader. tests/unit/test_resp_request.c holds it to
 * hiredis's output. */
size_t dlock__resp_request_len(int argc, const char *const *argv, const size_t *argvlen);
char *dlock__resp_request_write(char *p, int argc, const char *const *argv,
                                const size_t *argvlen);

#endif
