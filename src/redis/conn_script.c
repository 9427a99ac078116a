/* SPDX-License-Identifier: BSD-3-Clause */
/* An embedded script as a connection's command: EVALSHA by its SHA1, or
 * EVAL with its body (a server whose script cache was emptied). */
#include <stdio.h>
#include <string.h>

#include "conn.h"
#include "error.h"

int dlock__conn_append_script(dlock__conn *c, const dlock__script *s,
                              int numkeys, int nargs, const char **args,
                              const size_t *arglens, int use_eval,
                              uint32_t idx)
{
    const char *small[32];
    size_t small_len[32];
    const char **argv = small;
    size_t *lens = small_len;
    int argc = nargs + 3, rc;
    if (argc > (int)DLOCK__ARRAY_LEN(small)) {
        argv = dlock__malloc((size_t)argc * sizeof *argv);
        lens = dlock__malloc((size_t)argc * sizeof *lens);
        if (!argv || !lens) {
            rc = DLOCK_ENOMEM;
            goto out;
        }
    }
    char nk[16];
    if (numkeys >= 0 && numkeys < 10) {
        nk[0] = (char)('0' + numkeys);
        nk[1] = '\0';
    } else {
        snprintf(nk, sizeof nk, "%d", numkeys);
    }
    argv[0] = use_eval ? "EVAL" : "EVALSHA";
    lens[0] = use_eval ? 4 : 7;
    argv[1] = use_eval ? s->body : s->sha;
    lens[1] = use_eval ? s->len : 40;
    argv[2] = nk;
    lens[2] = strlen(nk);
    for (int i = 0; i < nargs; i++) {
        argv[3 + i] = args[i];
        lens[3 + i] = arglens ? arglens[i] : strlen(args[i]);
    }
    rc = dlock__conn_append(c, argc, argv, lens, idx);
out:
    if (argv != small) {
        dlock__free((void *)argv);
        dlock__free(lens);
    }
    return rc;
}
