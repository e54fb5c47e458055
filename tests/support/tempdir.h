/*
 * tempdir.h - one temporary directory under /tmp per test process, removed
 * with everything in it when the process that made it exits (also after a
 * failed check: CHECK exits, atexit runs). Children the test forks or
 * re-executes leave it alone.
 */
#ifndef PERF_TEST_TEMPDIR_H
#define PERF_TEST_TEMPDIR_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

static char g_tempdir[64]; /* "/tmp/<short prefix>.XXXXXX" */
static pid_t g_tempdir_owner;

static int tempdir_remove_entry(const char *path, const struct stat *st, int flag,
                                struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  remove(path);
  return 0;
}

static inline void tempdir_remove(void) {
  if (g_tempdir[0] && g_tempdir_owner == getpid())
    nftw(g_tempdir, tempdir_remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Make /tmp/<prefix>.XXXXXX (once per process) and return its path. */
static inline const char *tempdir_make(const char *prefix) {
  if (g_tempdir[0]) return g_tempdir;
  snprintf(g_tempdir, sizeof g_tempdir, "/tmp/%s.XXXXXX", prefix);
  CHECK(mkdtemp(g_tempdir) != NULL);
  g_tempdir_owner = getpid();
  atexit(tempdir_remove);
  return g_tempdir;
}

#endif
