/*
 * db_identity.h - does the database path still name the files the store
 * has open? SQLite keeps writing to a database file (and its -wal) that
 * was deleted or had another file renamed over it: every commit would then
 * "succeed" into an inode no path names, lost at the next restart. This
 * records the device and inode of PATH and PATH-wal right after the store
 * opened them, and each check stat()s both paths (two system calls, a few
 * microseconds: bench/README.md "collector_bench") and compares.
 *
 * Once a check finds a difference the state is latched: every later check
 * fails with the same reason until the collector is restarted, the one
 * cure (a fresh open of whatever the path names now). The first failure is
 * logged to stderr, once.
 *
 * Threads: db_identity_check is called from any thread (MHD's workers at
 * each batch and /healthz, without the store's lock); the rest at open and
 * close only.
 */
#ifndef PERF_COLLECTOR_DB_IDENTITY_H
#define PERF_COLLECTOR_DB_IDENTITY_H

#include <stdbool.h>
#include <stddef.h>

typedef struct db_identity_s db_identity_t;

/* Record the files at path (the database, and path-wal when present) as
   they are now, just after the store opened them. NULL when out of memory
   or when path names no file (then *why says so); an in-memory database
   (":memory:", "") gets a watcher that never fails. The caller frees with
   db_identity_free. */
db_identity_t *db_identity_take(const char *path, char *why, size_t why_len);

/* true while path (and path-wal) still name the files recorded; otherwise
   false, with the reason (the path and what happened) in why. *first is
   set for the one call that found the difference (the caller then makes
   the files it has open safe, sqlite_store.c). */
bool db_identity_check(db_identity_t *id, char *why, size_t why_len, bool *first);

void db_identity_free(db_identity_t *id);

#endif
