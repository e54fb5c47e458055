/*
 * db_dir.c - the database's directory made or named before SQLite opens
 * the file (db_dir.h). Main thread, at open.
 */
#include "collector/store/sqlite/db_dir.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector/base/log.h"

#define DB_DIR_MODE 0750 /* the collector's data: its user and group only */

static int fail(char *why, size_t size, const char *dir, const char *what, int err) {
  if (err)
    snprintf(why, size, "database directory %s: %s: %s", dir, what, strerror(err));
  else
    snprintf(why, size, "database directory %s: %s", dir, what);
  return -1;
}

int db_dir_prepare(const char *db_path, char *why, size_t size) {
  if (!*db_path || strcmp(db_path, ":memory:") == 0 || strncmp(db_path, "file:", 5) == 0) return 0;
  char dir[4096];
  const char *slash = strrchr(db_path, '/');
  if (!slash) {
    snprintf(dir, sizeof dir, ".");
  } else {
    size_t len = slash == db_path ? 1 : (size_t)(slash - db_path);
    if (len >= sizeof dir) return fail(why, size, db_path, "path too long", ENAMETOOLONG);
    memcpy(dir, db_path, len);
    dir[len] = '\0';
  }
  struct stat st;
  if (stat(dir, &st) != 0) {
    if (errno != ENOENT) return fail(why, size, dir, "cannot read it", errno);
    if (mkdir(dir, DB_DIR_MODE) != 0) return fail(why, size, dir, "cannot create it", errno);
    collector_log("database directory %s: created", dir);
    return 0;
  }
  if (!S_ISDIR(st.st_mode)) return fail(why, size, dir, "not a directory", 0);
  if (access(dir, W_OK | X_OK) != 0) return fail(why, size, dir, "not writable", errno);
  return 0;
}
