/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target: dlock__url_parse() on arbitrary text, with allocation
 * failure injected when the first byte asks for it. Invariants of a parsed
 * URL are checked; a violation aborts (a crash for libFuzzer). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "url.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 8192)
        return 0;
    /* First byte: bit 7 set = make allocation number (bits 0-2) fail. */
    uint8_t ctl = data[0];
    char *text = malloc(size);
    if (!text)
        return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';

    dlock__url u;
    char err[128];
    memset(err, 'x', sizeof err);
    if (ctl & 0x80)
        dlock__alloc_fail_after(ctl & 7);
    int rc = dlock__url_parse(&u, text, err, sizeof err);
    dlock__alloc_fail_after(-1);
    if (rc == DLOCK_OK) {
        if (!u.host || (u.is_unix ? u.port != 0 : (u.port < 1 || u.port > 65535)) || u.db < 0 ||
            (u.tls != 0 && u.tls != 1) || (u.tls && u.is_unix))
            abort();
        dlock__url_clear(&u);
    } else {
        if (rc != DLOCK_EINVAL && rc != DLOCK_ENOMEM)
            abort();
        if (!memchr(err, '\0', sizeof err))
            abort(); /* the reason must be a terminated string */
    }
    free(text);
    return 0;
}
