/*
 * dir.h - a directory the collector writes in, ready at start: made when
 * it is missing and its parent exists, else named with the system's
 * reason. The database's directory (store/sqlite/db_dir.c) and the
 * symbols directory (main.c) go through it. Main thread, at start.
 */
#ifndef PERF_COLLECTOR_DIR_H
#define PERF_COLLECTOR_DIR_H

#include <stddef.h>
#include <sys/types.h>

enum collector_dir_result {
  COLLECTOR_DIR_READY = 0,         /* exists (or was made, then logged), writable */
  COLLECTOR_DIR_MISSING = -1,      /* cannot be made, or is not a directory */
  COLLECTOR_DIR_NOT_WRITABLE = -2, /* exists; this process may not create files in it */
};

/* dir prepared for writing; what names it in messages and the log ("database
   directory", "symbols directory"). Anything but READY fills *why (size
   bytes): "<what> DIR: cannot create it: No such file or directory",
   "<what> DIR: not a directory", "<what> DIR: not writable: Permission
   denied". */
enum collector_dir_result collector_dir_prepare(const char *dir, const char *what, mode_t mode,
                                                char *why, size_t size);

#endif
