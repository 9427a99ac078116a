/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock doctor: checks a deployment and says what is unsafe or slow.
 *
 *   doctor.c        the command: options, the node list, findings, text
 *                   and JSON output, the exit status
 *   doctor_conn.c   a plain connection of its own to one Redis node (TCP,
 *                   unix socket, TLS through OpenSSL; hiredis formats and
 *                   parses), so that the doctor sees what the library hides
 *   doctor_redis.c  the checks of one Redis node, and those across nodes
 *                   (clocks, round trips)
 *   doctor_acl.c    the connecting user's rights (ACL DRYRUN)
 *   doctor_etcd.c   the checks of an etcd cluster (libcurl and jansson,
 *                   when the etcd backend is built)
 *   doctor_zk.c     the checks of a ZooKeeper ensemble ("srvr" to each
 *                   member, and a lock through the library)
 *
 * The doctor talks to the servers directly instead of through the library:
 * the library answers "locked" or not, while the doctor needs INFO,
 * CONFIG, ACL DRYRUN, TIME and the peer certificate. */
#ifndef DLOCK_CLI_DOCTOR_H
#define DLOCK_CLI_DOCTOR_H

#include <stddef.h>
#include <stdint.h>

#include "cli.h"

/* How bad a finding is. A warning is slow or fragile; a failure can give
 * a lock to two holders, or makes every lock fail. */
typedef enum doc_status {
    DOC_OK,
    DOC_INFO, /* a fact worth knowing; nothing to fix */
    DOC_SKIP, /* could not check (said why) */
    DOC_WARN,
    DOC_FAIL
} doc_status;

/* What the doctor was asked to check against. */
typedef struct doc_settings {
    const cli_global *g;
    int64_t ttl_ms; /* --ttl: the longest lease in use */
    size_t n_redis; /* Redis nodes among the URLs (Redlock when > 1) */
} doc_settings;

/* Record a finding. node: the URL it is about (redacted), or NULL for the
 * deployment as a whole; reason and fix may be NULL. */
void doc_add(const char *node, const char *check, doc_status st, const char *reason,
             const char *fix, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* doctor_conn.c */
typedef struct doc_conn doc_conn;

/* A parsed redis://, rediss://, unix:// or redis-sentinel:// URL, with the
 * global options (--user, -a, --tls ...) applied over it. */
typedef struct doc_target {
    char host[256];
    int port;
    char path[256]; /* unix socket; empty for TCP */
    char user[256];
    char pass[512];
    int db;
    int tls;
    char sentinel_master[256]; /* redis-sentinel://: the master's name */
    char sentinels[1024];      /* redis-sentinel://: "h:p,h:p" */
} doc_target;

int doc_parse_target(const char *url, const cli_global *g, doc_target *t, char *err, size_t len);
/* Connect (and TLS handshake). On failure NULL and err says why. With
 * TLS, *cert_days gets the days until the peer certificate expires and
 * verify_err the verification failure ("" if verified or --insecure). */
doc_conn *doc_connect(const doc_target *t, const cli_global *g, char *err, size_t len,
                      double *cert_days, char *verify_err, size_t verify_len);
/* One command; returns the reply (redisReply *, freed with
 * doc_reply_free) or NULL with err set (I/O, timeout). */
void *doc_command(doc_conn *c, char *err, size_t len, int argc, const char **argv);
void *doc_commandf(doc_conn *c, char *err, size_t len, const char *first, ...);
void doc_reply_free(void *reply);
void doc_close(doc_conn *c);
/* One "field:value" line of an INFO reply, copied into out; 0 if found. */
int doc_info_field(const char *info, const char *field, char *out, size_t len);
int64_t doc_mono_us(void);

/* doctor_redis.c */
typedef struct doc_node doc_node;
doc_node *doc_redis_check(const char *url, const doc_settings *s);
void doc_redis_across(doc_node **nodes, size_t n, const doc_settings *s);
void doc_node_free(doc_node *n);
/* Whether the node could be reached and answered. */
int doc_node_reached(const doc_node *n);

/* doctor_acl.c: the connecting user's rights (ACL DRYRUN). */
void doc_check_acl(doc_conn *c, const char *node, const doc_settings *s);

/* doctor_etcd.c: returns the number of endpoints that answered. */
int doc_etcd_check(const char *url, const doc_settings *s);
/* Whether url is etcd:// or etcds:// (TLS). */
int doc_is_etcd(const char *url);

/* doctor_zk.c: a ZooKeeper ensemble (zk://): returns the number of
 * members that answered. */
int doc_zk_check(const char *url, const doc_settings *s);
int doc_is_zk(const char *url);

int cli_cmd_doctor(cli_global *g, int argc, char **argv);

#endif
