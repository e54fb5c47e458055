/*
 * db_dir.c - the database's directory made or named before SQLite opens
 * the file (db_dir.h). Main thread, at open.
 */
#include "collector/store/sqlite/db_dir.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "collector/base/dir.h"

#define DB_DIR_MODE 0750 /* the collector's data: its user and group only */

int db_dir_prepare(const char *db_path, char *why, size_t size) {
  if (!*db_path || strcmp(db_path, ":memory:") == 0 || strncmp(db_path, "file:", 5) == 0) return 0;
  char dir[4096];
  const char *slash = strrchr(db_path, '/');
  size_t len = !slash ? 0 : slash == db_path ? 1 : (size_t)(slash - db_path);
  if (len >= sizeof dir) {
    snprintf(why, size, "database %s: %s", db_path, strerror(ENAMETOOLONG));
    return -1;
  }
  if (slash) {
    memcpy(dir, db_path, len);
    dir[len] = '\0';
  } else {
    snprintf(dir, sizeof dir, ".");
  }
  return collector_dir_prepare(dir, "database directory", DB_DIR_MODE, why, size) ==
                 COLLECTOR_DIR_READY
             ? 0
             : -1;
}
