/* SPDX-License-Identifier: BSD-3-Clause */
/* Options for the deployment modes of docs/deployment.md: --cluster (the
 * URLs are seeds of one Redis Cluster), --min-replicas and
 * --min-replicas-timeout (replica acknowledgement with WAIT). */
#include <limits.h>
#include <stdlib.h>

#include "cli.h"

int cli_deploy_option(cli_global *g, int c, const char *arg)
{
    dlock_client_options *o = &g->copts;
    switch (c) {
    case CLI_OPT_CLUSTER:
        o->cluster = 1;
        return 0;
    case CLI_OPT_MIN_REPLICAS: {
        char *end = NULL;
        long n = strtol(arg, &end, 10);
        if (!*arg || *end || n < 0 || n > 1000)
            return cli_usage_error(NULL, "--min-replicas: a number of replicas, 0..1000");
        o->min_replicas = (int)n;
        return 0;
    }
    case CLI_OPT_MIN_REPLICAS_TIMEOUT: {
        int64_t ms;
        if (cli_parse_duration(NULL, "--min-replicas-timeout", arg, &ms))
            return CLI_EXIT_USAGE;
        if (ms < 1 || ms > 60000)
            return cli_usage_error(NULL, "--min-replicas-timeout: between 1ms and 60s");
        o->min_replicas_timeout_ms = (int)ms;
        return 0;
    }
    default:
        return -1;
    }
}
