/* SPDX-License-Identifier: BSD-3-Clause */
/* Versioned option structs (versioned.h). */
#include <string.h>

#include "dlock.h"
#include "versioned.h"

size_t dlock__versioned_size(const size_t *sizes, size_t n, unsigned int version)
{
    return version >= 1 && version <= n ? sizes[version - 1] : 0;
}

int dlock__versioned_init(void *opts, const void *defaults, const size_t *sizes, size_t n,
                          unsigned int version)
{
    size_t size = dlock__versioned_size(sizes, n, version);
    if (!opts || !size)
        return DLOCK_EINVAL;
    memcpy(opts, defaults, size);
    memcpy(opts, &version, sizeof version); /* the first member of every option struct */
    return DLOCK_OK;
}
