/*
 * preload.c - libperfsdk-preload.so's constructor: starts the SDK from the
 * environment in a program that does not know about it (LD_PRELOAD, or
 * perf-run), before the program's main. Runs once, on the thread that
 * loads the program (its main thread, which becomes the SDK's watched
 * thread; it registers its loop as any other thread once it waits).
 *
 * The constructor
 *  - takes itself out of LD_PRELOAD (the rest of the variable stays as it
 *    was) unless PERF_SDK_FOLLOW_EXEC is true, so that programs this one
 *    executes run without the SDK;
 *  - starts the SDK with perf_sdk_config_init's defaults and the
 *    PERF_SDK_* variables perf_sdk_init applies;
 *  - logs only into PERF_SDK_LOG_FILE when it is set (appended, one line
 *    per message); without it the SDK says nothing, as with an app that
 *    gives no log_fn.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "perf_sdk.h"
#include "preload.h"

#define LIBRARY_NAME "libperfsdk-preload.so"
#define LOG_LINE_BYTES 1024

static int g_log_fd = -1;

static void leave_ld_preload(void);
static bool env_true(const char *name);
static void log_to_file(perf_log_level_t level, const char *message, void *user);
static bool is_this_library(const char *entry, size_t len);

__attribute__((constructor)) static void preload_start(void) {
  int saved = errno;
  perf__preload_resolve_waits();
  if (!env_true("PERF_SDK_FOLLOW_EXEC")) leave_ld_preload();
  const char *log_path = getenv("PERF_SDK_LOG_FILE");
  if (log_path && *log_path)
    g_log_fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);

  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  if (g_log_fd >= 0) cfg.log_fn = log_to_file;
  /* perf_sdk_init answers 0 when PERF_SDK_DISABLED turns the SDK off (the
     upload helper the SDK starts runs with it): the threshold of the
     watched thread's loop tells a running SDK. */
  if (perf_sdk_init(&cfg) == PERF_OK && perf_sdk_loop_threshold_ms() > 0) perf__preload_set_on();
  errno = saved;
}

/* LD_PRELOAD without this library's entries: separators (':' and blanks,
   as the loader reads them) and the other entries as they were. */
static void leave_ld_preload(void) {
  const char *value = getenv("LD_PRELOAD");
  if (!value) return;
  size_t n = strlen(value);
  char *out = malloc(n + 1);
  if (!out) return;
  size_t o = 0;
  bool removed = false;
  for (size_t i = 0; i < n;) {
    size_t len = strcspn(value + i, ": \t");
    if (len > 0 && is_this_library(value + i, len)) {
      removed = true;
      i += len;
      i += strspn(value + i, ": \t"); /* with the separators after it */
      continue;
    }
    size_t keep = len + strspn(value + i + len, ": \t");
    memcpy(out + o, value + i, keep);
    o += keep;
    i += keep;
  }
  while (removed && o > 0 && strchr(": \t", out[o - 1]))
    o--; /* no separator left dangling where the last entry was ours */
  out[o] = '\0';
  if (removed) {
    if (o == 0)
      unsetenv("LD_PRELOAD");
    else
      setenv("LD_PRELOAD", out, 1);
  }
  free(out);
}

/* An LD_PRELOAD entry naming this library: its file name, with or without
   a directory. */
static bool is_this_library(const char *entry, size_t len) {
  size_t name_len = sizeof LIBRARY_NAME - 1;
  if (len < name_len || memcmp(entry + len - name_len, LIBRARY_NAME, name_len) != 0) return false;
  return len == name_len || entry[len - name_len - 1] == '/';
}

/* 1, true, yes or on, in any case (the SDK's boolean spellings). */
static bool env_true(const char *name) {
  const char *v = getenv(name);
  if (!v) return false;
  return strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0 ||
         strcasecmp(v, "on") == 0;
}

/* One write per message (O_APPEND: lines of several processes sharing the
   file do not interleave within a line). */
static void log_to_file(perf_log_level_t level, const char *message, void *user) {
  (void)user;
  static const char *const k_levels[] = {"debug", "info", "warn", "error"};
  const char *word = (unsigned)level < 4 ? k_levels[level] : "log";
  char line[LOG_LINE_BYTES];
  int len = snprintf(line, sizeof line, "perf-sdk[%d] %s: %s\n", (int)getpid(), word, message);
  if (len < 0) return;
  if ((size_t)len >= sizeof line) {
    len = sizeof line - 1;
    line[len - 1] = '\n';
  }
  int saved = errno;
  ssize_t w = write(g_log_fd, line, (size_t)len);
  (void)w;
  errno = saved;
}
