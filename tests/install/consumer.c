/* SPDX-License-Identifier: BSD-3-Clause */
/* Built against an installed dlock by tests/install/check.sh, once through
 * pkg-config and once through find_package(dlock): the install is usable. */
#include <dlock.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    if (strcmp(dlock_version(), DLOCK_VERSION_STRING) != 0) {
        fprintf(stderr, "header %s, library %s\n", DLOCK_VERSION_STRING, dlock_version());
        return 1;
    }
    const char *urls[] = {"redis://127.0.0.1:1"};
    dlock_client *c = NULL;
    int rc = dlock_client_new(&c, urls, 1, NULL, NULL, 0);
    dlock_client_free(c);
    printf("consumer: dlock %s, client_new %s\n", dlock_version(), dlock_errname(rc));
    return rc == DLOCK_OK ? 0 : 1;
}
