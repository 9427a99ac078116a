/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target: dlock_duration_parse() on arbitrary text. Checks the
 * result's range and, for plain "<digits>ms" input, that it is exact. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dlock.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 256)
        return 0;
    char text[257];
    memcpy(text, data, size);
    text[size] = '\0';
    int64_t ms = -12345;
    int rc = dlock_duration_parse(&ms, text);
    if (rc == DLOCK_OK) {
        if (ms < 0 || ms > INT64_MAX / 1000000)
            abort();
        size_t n = strlen(text), d = strspn(text, "0123456789");
        if (n >= 3 && d == n - 2 && d > 0 && d < 18 && !strcmp(text + d, "ms") &&
            ms != strtoll(text, NULL, 10))
            abort();
    } else if (rc != DLOCK_EINVAL || ms != -12345) {
        abort(); /* only EINVAL, and the output untouched */
    }
    return 0;
}
