/* SPDX-License-Identifier: BSD-3-Clause */
/* A command as Redis reads a request (resp.h). */
#include <string.h>

#include "resp.h"

static size_t dec_digits(size_t v)
{
    size_t n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

/* "<c><v>\r\n" at p, which has room for it; the end. */
static char *put_header(char *p, char c, size_t v)
{
    size_t n = dec_digits(v);
    *p++ = c;
    for (size_t i = n; i > 0; i--) {
        p[i - 1] = (char)('0' + v % 10);
        v /= 10;
    }
    p += n;
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

size_t dlock__resp_request_len(int argc, const char *const *argv, const size_t *argvlen)
{
    size_t need = 1 + dec_digits((size_t)argc) + 2;
    for (int i = 0; i < argc; i++) {
        size_t n = argvlen ? argvlen[i] : strlen(argv[i]);
        need += 1 + dec_digits(n) + 2 + n + 2;
    }
    return need;
}

char *dlock__resp_request_write(char *p, int argc, const char *const *argv,
                                const size_t *argvlen)
{
    p = put_header(p, '*', (size_t)argc);
    for (int i = 0; i < argc; i++) {
        size_t n = argvlen ? argvlen[i] : strlen(argv[i]);
        p = put_header(p, '$', n);
        memcpy(p, argv[i], n);
        p += n;
        *p++ = '\r';
        *p++ = '\n';
    }
    return p;
}
