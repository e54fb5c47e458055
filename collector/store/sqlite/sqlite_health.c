/*
 * sqlite_health.c - the SQLite backend's health check (GET /healthz,
 * store_ops_t.health): beyond the path's identity (sqlite_check), whether
 * a batch could commit now. A connection of its own (opened at the first
 * check, kept) asks for the write lock with BEGIN IMMEDIATE and gives it
 * back at once: another process holding it (a BEGIN EXCLUSIVE in the
 * sqlite3 shell, a backup) for more than SQLITE_HEALTH_LOCK_WAIT_MS makes
 * the check say "locked"; the batches' commits, milliseconds each, only
 * delay it. The database's file system with less than
 * SQLITE_HEALTH_MIN_FREE_BYTES free says "disk full". Never takes st->lock:
 * answered during a long query or a batch too. Any thread (health_lock).
 */
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "collector/store/sqlite/sqlite_store.h"

#define SQLITE_HEALTH_LOCK_WAIT_MS 1000
#define SQLITE_HEALTH_MIN_FREE_BYTES (1ull << 20)

static int free_space(const store_t *st, char *why, size_t why_len);
static int write_lock(store_t *st, char *why, size_t why_len);

int sqlite_health(store_t *st, char *why, size_t why_len) {
  if (sqlite_check(st, why, why_len) != STORE_OK) return STORE_LOST;
  if (free_space(st, why, why_len) != STORE_OK) return STORE_ERROR;
  pthread_mutex_lock(&st->health_lock);
  int rc = write_lock(st, why, why_len);
  pthread_mutex_unlock(&st->health_lock);
  return rc;
}

void sqlite_health_close(store_t *st) {
  sqlite3_close(st->health);
  st->health = NULL;
}

/* "disk full" when the directory of the database has less than the
   minimum free for an unprivileged writer. */
static int free_space(const store_t *st, char *why, size_t why_len) {
  char *copy = strdup(st->path);
  if (!copy) return STORE_OK; /* no memory for the check: not the disk's fault */
  struct statvfs vfs;
  const char *dir = dirname(copy);
  int rc = STORE_OK;
  if (statvfs(dir, &vfs) == 0) {
    unsigned long long avail = (unsigned long long)vfs.f_bavail * vfs.f_frsize;
    if (avail < SQLITE_HEALTH_MIN_FREE_BYTES) {
      snprintf(why, why_len,
               "disk full: %llu bytes free in %s (less than %llu; database %s cannot grow)", avail,
               dir, SQLITE_HEALTH_MIN_FREE_BYTES, st->path);
      rc = STORE_ERROR;
    }
  }
  free(copy);
  return rc;
}

/* BEGIN IMMEDIATE within the wait, then ROLLBACK. */
static int write_lock(store_t *st, char *why, size_t why_len) {
  if (!st->health) {
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;
    if (sqlite3_open_v2(st->path, &st->health, flags, NULL) != SQLITE_OK) {
      snprintf(why, why_len, "unavailable: database %s: open: %s", st->path,
               st->health ? sqlite3_errmsg(st->health) : "out of memory");
      sqlite_health_close(st);
      return STORE_ERROR;
    }
    sqlite3_busy_timeout(st->health, SQLITE_HEALTH_LOCK_WAIT_MS);
  }
  int rc = sqlite3_exec(st->health, "BEGIN IMMEDIATE", NULL, NULL, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_exec(st->health, "ROLLBACK", NULL, NULL, NULL);
    return STORE_OK;
  }
  if (rc == SQLITE_BUSY)
    snprintf(why, why_len,
             "locked: database %s: another connection has held its write lock for more than %d "
             "ms (batches wait, then fail with 503)",
             st->path, SQLITE_HEALTH_LOCK_WAIT_MS);
  else
    snprintf(why, why_len, "unavailable: database %s: BEGIN IMMEDIATE: %s", st->path,
             sqlite3_errmsg(st->health));
  sqlite_health_close(st); /* a fresh connection at the next check */
  return STORE_ERROR;
}
