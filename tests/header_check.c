/* SPDX-License-Identifier: BSD-3-Clause */
/* Compiled with -std=c99 -pedantic -Werror: the public header stands alone. */
#include <dlock.h>

int dlock_header_check_symbol(void);
int dlock_header_check_symbol(void)
{
    dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
    dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
    return (int)co.version + (int)lo.version + DLOCK_VERSION_NUMBER;
}
