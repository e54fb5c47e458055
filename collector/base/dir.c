/*
 * dir.c - a directory made or named before the collector writes in it
 * (dir.h). Main thread, at start.
 */
#include "collector/base/dir.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector/base/log.h"

static enum collector_dir_result say(enum collector_dir_result result, char *why, size_t size,
                                     const char *what, const char *dir, const char *problem,
                                     int err) {
  snprintf(why, size, "%s %s: %s%s%s", what, dir, problem, err ? ": " : "",
           err ? strerror(err) : "");
  return result;
}

enum collector_dir_result collector_dir_prepare(const char *dir, const char *what, mode_t mode,
                                                char *why, size_t size) {
  struct stat st;
  if (stat(dir, &st) != 0) {
    if (errno != ENOENT)
      return say(COLLECTOR_DIR_MISSING, why, size, what, dir, "cannot read it", errno);
    if (mkdir(dir, mode) != 0)
      return say(COLLECTOR_DIR_MISSING, why, size, what, dir, "cannot create it", errno);
    chmod(dir, mode); /* whatever the umask */
    collector_log("%s %s: created", what, dir);
    return COLLECTOR_DIR_READY;
  }
  if (!S_ISDIR(st.st_mode))
    return say(COLLECTOR_DIR_MISSING, why, size, what, dir, "not a directory", 0);
  if (access(dir, W_OK | X_OK) != 0)
    return say(COLLECTOR_DIR_NOT_WRITABLE, why, size, what, dir, "not writable", errno);
  return COLLECTOR_DIR_READY;
}
