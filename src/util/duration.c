/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock_duration_parse(): "250ms", "30s", "5m", "1h", "2d", or seconds ("1.5"). */
#include <string.h>

#include "common.h"

/* Durations must fit in nanoseconds on the monotonic clock. */
#define DURATION_MAX_MS (INT64_MAX / INT64_C(1000000))

int dlock_duration_parse(int64_t *out_ms, const char *text)
{
    if (!out_ms || !text)
        return DLOCK_EINVAL;
    const char *s = text;
    int64_t ip = 0;
    int64_t frac = 0; /* fraction scaled to 1e9 */
    int digits = 0;
    while (*s >= '0' && *s <= '9') {
        if (ip > (INT64_MAX - 9) / 10)
            return DLOCK_EINVAL;
        ip = ip * 10 + (*s - '0');
        s++;
        digits++;
    }
    if (*s == '.') {
        int64_t scale = INT64_C(100000000);
        s++;
        while (*s >= '0' && *s <= '9') {
            frac += (*s - '0') * scale;
            scale /= 10;
            s++;
            digits++;
        }
    }
    if (digits == 0)
        return DLOCK_EINVAL;
    int64_t unit_ms;
    if (*s == '\0' || !strcmp(s, "s"))
        unit_ms = 1000;
    else if (!strcmp(s, "ms"))
        unit_ms = 1;
    else if (!strcmp(s, "m"))
        unit_ms = 60 * 1000;
    else if (!strcmp(s, "h"))
        unit_ms = 3600 * 1000;
    else if (!strcmp(s, "d"))
        unit_ms = INT64_C(24) * 3600 * 1000;
    else
        return DLOCK_EINVAL;
    if (ip > DURATION_MAX_MS / unit_ms)
        return DLOCK_EINVAL;
    int64_t ms = ip * unit_ms + (frac * unit_ms + 500000000) / 1000000000;
    if (ms > DURATION_MAX_MS)
        return DLOCK_EINVAL;
    *out_ms = ms;
    return DLOCK_OK;
}
