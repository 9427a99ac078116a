/* SPDX-License-Identifier: BSD-3-Clause */
/* The holder identity (identity.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "identity.h"

#define HOST_MAX 64
#define PROG_MAX 32

static int printable(unsigned char ch)
{
    return ch >= 0x20 && ch <= 0x7e;
}

int dlock__identity_check(const dlock_client_options *o, char *err, size_t len)
{
    if (o->identity != 0 && o->identity != 1) {
        snprintf(err, len, "identity must be 0 or 1");
        return DLOCK_EINVAL;
    }
    if (!o->identity_text)
        return DLOCK_OK;
    if (!o->identity) {
        snprintf(err, len, "identity_text needs identity 1");
        return DLOCK_EINVAL;
    }
    size_t n = strnlen(o->identity_text, DLOCK_IDENTITY_MAX + 1);
    if (n == 0 || n > DLOCK_IDENTITY_MAX) {
        snprintf(err, len, "identity_text must be 1 to %d bytes", DLOCK_IDENTITY_MAX);
        return DLOCK_EINVAL;
    }
    for (size_t i = 0; i < n; i++)
        if (!printable((unsigned char)o->identity_text[i])) {
            snprintf(err, len, "identity_text must be printable ASCII (byte %zu is not)", i);
            return DLOCK_EINVAL;
        }
    return DLOCK_OK;
}

/* s cut to max bytes, each byte that would break the "k=v k=v" form (not
 * printable, a space, '=') made '_', so that a reader can split it. */
static void word(char *dst, const char *s, size_t max)
{
    size_t i = 0;
    for (; s[i] && i < max; i++) {
        unsigned char ch = (unsigned char)s[i];
        dst[i] = printable(ch) && ch != ' ' && ch != '=' ? (char)ch : '_';
    }
    dst[i] = '\0';
    if (i == 0)
        strcpy(dst, "?");
}

char *dlock__identity_make(const dlock_client_options *o)
{
    if (o->identity_text)
        return dlock__strdup(o->identity_text);
    char raw[256] = "", host[HOST_MAX + 1], prog[PROG_MAX + 1];
    if (gethostname(raw, sizeof raw - 1) != 0)
        raw[0] = '\0';
    word(host, raw, HOST_MAX);
    word(prog, program_invocation_short_name, PROG_MAX);
    char text[DLOCK_IDENTITY_MAX + 1];
    snprintf(text, sizeof text, "host=%s pid=%ld prog=%s", host, (long)getpid(), prog);
    return dlock__strdup(text);
}
