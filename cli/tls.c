/* SPDX-License-Identifier: BSD-3-Clause */
/* TLS options, the same as redis-cli's: --tls, --cacert, --cacertdir,
 * --cert, --key, --sni, --insecure, each with an environment variable
 * (DLOCK_TLS, DLOCK_CACERT, DLOCK_CACERTDIR, DLOCK_CERT, DLOCK_KEY,
 * DLOCK_SNI, DLOCK_INSECURE). The variables are read first; options win. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* A yes/no variable: set, non-empty and not "0" or "no" means yes. */
static int env_flag(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0 && strcmp(v, "no") != 0;
}

static const char *env_path(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

void cli_tls_env(cli_global *g)
{
    dlock_client_options *o = &g->copts;
    o->tls = env_flag("DLOCK_TLS");
    o->tls_insecure = env_flag("DLOCK_INSECURE");
    o->tls_ca_file = env_path("DLOCK_CACERT");
    o->tls_ca_dir = env_path("DLOCK_CACERTDIR");
    o->tls_cert_file = env_path("DLOCK_CERT");
    o->tls_key_file = env_path("DLOCK_KEY");
    o->tls_server_name = env_path("DLOCK_SNI");
}

int cli_tls_option(cli_global *g, int c, const char *arg)
{
    dlock_client_options *o = &g->copts;
    switch (c) {
    case CLI_OPT_TLS:
        o->tls = 1;
        return 0;
    case CLI_OPT_INSECURE:
        o->tls_insecure = 1;
        return 0;
    case CLI_OPT_CACERT:
        o->tls_ca_file = arg;
        return 0;
    case CLI_OPT_CACERTDIR:
        o->tls_ca_dir = arg;
        return 0;
    case CLI_OPT_CERT:
        o->tls_cert_file = arg;
        return 0;
    case CLI_OPT_KEY:
        o->tls_key_file = arg;
        return 0;
    case CLI_OPT_SNI:
        o->tls_server_name = arg;
        return 0;
    default:
        return -1;
    }
}
