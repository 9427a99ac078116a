// SPDX-License-Identifier: BSD-3-Clause
// The public header from C++, pedantic, as C++11 and C++20: the options
// macros (calls in C++, designated initialisers in C) give what
// dlock_client_options_init() and dlock_lock_options_init() fill in.
#include <dlock.h>

#include <cstdio>

#define SAME(a, b, f)                                                                  \
    do {                                                                               \
        if ((a).f != (b).f) {                                                          \
            std::printf("not ok: %s differs\n", #f);                                   \
            bad = 1;                                                                   \
        }                                                                              \
    } while (0)

int main()
{
    int bad = 0;
    dlock_client_options c = DLOCK_CLIENT_OPTIONS_INIT, cd;
    if (dlock_client_options_init(&cd, DLOCK_CLIENT_OPTIONS_VERSION) != DLOCK_OK)
        return 1;
    SAME(c, cd, version);
    SAME(c, cd, connect_timeout_ms);
    SAME(c, cd, io_timeout_ms);
    SAME(c, cd, pool_size);
    SAME(c, cd, drift_factor);
    SAME(c, cd, min_node_uptime_ms);
    SAME(c, cd, wakeups);
    SAME(c, cd, key_prefix);
    SAME(c, cd, username);
    SAME(c, cd, password);
    SAME(c, cd, on_log);
    SAME(c, cd, log_arg);
    SAME(c, cd, tls);
    SAME(c, cd, tls_ca_file);
    SAME(c, cd, tls_ca_dir);
    SAME(c, cd, tls_cert_file);
    SAME(c, cd, tls_key_file);
    SAME(c, cd, tls_server_name);
    SAME(c, cd, tls_insecure);
    SAME(c, cd, min_replicas);
    SAME(c, cd, min_replicas_timeout_ms);
    SAME(c, cd, cluster);
    SAME(c, cd, observer);
    SAME(c, cd, identity);
    SAME(c, cd, identity_text);
    SAME(c, cd, loop);
    dlock_lock_options l = DLOCK_LOCK_OPTIONS_INIT, ld;
    if (dlock_lock_options_init(&ld, DLOCK_LOCK_OPTIONS_VERSION) != DLOCK_OK)
        return 1;
    SAME(l, ld, version);
    SAME(l, ld, ttl_ms);
    SAME(l, ld, flags);
    SAME(l, ld, renew_interval_ms);
    SAME(l, ld, retry_min_ms);
    SAME(l, ld, retry_max_ms);
    SAME(l, ld, on_lost);
    SAME(l, ld, on_lost_arg);
    std::printf("%s: C++ %ld, the options macros match the library's defaults\n",
                bad ? "not ok" : "ok", (long)__cplusplus);
    return bad;
}
