/* SPDX-License-Identifier: BSD-3-Clause */
/* The Lua scripts in src/redis/scripts/, embedded at build time with their SHA1.
 * Each .lua file's header comment states its KEYS, ARGV, replies and the
 * invariant it keeps. */
#ifndef DLOCK_SCRIPTS_H
#define DLOCK_SCRIPTS_H

#include <stddef.h>

typedef struct dlock__script {
    const char *name; /* file name without .lua */
    const char *body;
    size_t len;
    char sha[41]; /* hex SHA1 of body: what EVALSHA takes */
} dlock__script;

/* Generated table (scripts_gen.c), sorted by name, ended by a NULL name. */
extern const dlock__script dlock__scripts[];

typedef enum dlock__script_id {
    DLOCK__S_ACQUIRE,      /* acquire.lua */
    DLOCK__S_RELEASE,      /* release.lua */
    DLOCK__S_EXTEND,       /* extend.lua */
    DLOCK__S_RACQUIRE,     /* reentrant_acquire.lua */
    DLOCK__S_RRELEASE,     /* reentrant_release.lua */
    DLOCK__S_REXTEND,      /* reentrant_extend.lua */
    DLOCK__S_RENEW,        /* renew_batch.lua */
    DLOCK__S_FENCE_SYNC,   /* fence_sync.lua */
    DLOCK__S_STATUS,       /* status.lua */
    DLOCK__S_FAIR_ACQUIRE, /* fair_acquire.lua */
    DLOCK__S_FAIR_RELEASE, /* fair_release.lua */
    DLOCK__S_FAIR_LEAVE,   /* fair_leave.lua */
    DLOCK__S_RUNDO,        /* reentrant_undo.lua */
    DLOCK__S_RFORGET,      /* reentrant_forget.lua */
    DLOCK__S_X_ACQUIRE,    /* exclusive_acquire.lua */
    DLOCK__S_Z_ACQUIRE,    /* shared_acquire.lua (shares and permits) */
    DLOCK__S_Z_RELEASE,    /* shared_release.lua */
    DLOCK__S_Z_EXTEND,     /* shared_extend.lua */
    DLOCK__S_HOLDERS,      /* holders.lua */
    DLOCK__S_RESTORE,      /* restore_batch.lua */
    DLOCK__S_WQ_LEAVE,     /* wq_leave.lua */
    DLOCK__S_BREAK,        /* break.lua */
    DLOCK__S_DELAY_STATUS, /* delay_status.lua */
    DLOCK__S_ELECT_WRITE,  /* elect_write.lua */
    DLOCK__S_ELECT_READ,   /* elect_read.lua */
    DLOCK__S_COUNT
} dlock__script_id;

/* The script for an id; never NULL for a valid id (checked at start-up by
 * dlock__scripts_check()). */
const dlock__script *dlock__script_get(dlock__script_id id);

/* Returns 0 if every id has its script, -1 (with the missing name in *name)
 * otherwise. */
int dlock__scripts_check(const char **name);

#endif
