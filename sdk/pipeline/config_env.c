/*
 * config_env.c - PERF_SDK_* variables no part of the SDK reads (see
 * config_env.h). Reads the environment, touches no file.
 */
#include "sdk/pipeline/config_env.h"

#include <stdio.h>
#include <string.h>

#include "perf_sdk.h"
#include "sdk/base/env_text.h"
#include "sdk/base/log.h"

#define PREFIX "PERF_SDK_"
#define NEAR_EDITS 2 /* at most this many edits away: "did you mean" */
#define NAME_BYTES 64

extern char **environ;

/* The variables read outside the configuration's fields (the last two by
   libperfsdk-preload.so, sdk/preload/). */
static const char *const k_others[] = {
    "PERF_SDK_DISABLED",         "PERF_SDK_SINK",        "PERF_SDK_TAGS",
    "PERF_SDK_SAMPLE_SIGNAL",    "PERF_SDK_UNWIND_MODE", "PERF_SDK_SAMPLE_TIMEOUT_MS",
    "PERF_SDK_STACK_COPY_BYTES", "PERF_SDK_CPU_TIMERS",  "PERF_SDK_CPU_TIMER_RING",
    "PERF_SDK_LOG_FILE",         "PERF_SDK_FOLLOW_EXEC",
};
#define OTHER_COUNT (sizeof k_others / sizeof k_others[0])

static const char *nearest(const char *name, const char *const *fields, size_t n, bool *exact);
static void consider(const char *name, const char *candidate, const char **best,
                     unsigned *best_edits, bool *exact);

int perf__config_env_names_check(const char *const *fields, size_t n, bool strict, bool quiet) {
  for (char **e = environ; e && *e; e++) {
    if (strncmp(*e, PREFIX, sizeof PREFIX - 1) != 0) continue;
    size_t len = strcspn(*e, "=");
    char name[NAME_BYTES];
    snprintf(name, sizeof name, "%.*s", (int)len, *e);
    bool exact = false;
    const char *near = nearest(name, fields, n, &exact);
    if (exact) continue;
    char hint[NAME_BYTES + 32] = "";
    if (near) snprintf(hint, sizeof hint, " (did you mean %s?)", near);
    if (strict)
      PERF__FAIL(PERF_E_INVALID_CONFIG,
                 "%s is not a perf sdk environment variable%s; strict_env refuses it", name, hint);
    if (!quiet)
      perf__log(PERF__LOG_WARN, "%s is not a perf sdk environment variable%s; it is ignored", name,
                hint);
  }
  return PERF_OK;
}

/* The known name nearest to `name` within NEAR_EDITS edits (NULL: none);
 *exact when name is known. */
static const char *nearest(const char *name, const char *const *fields, size_t n, bool *exact) {
  const char *best = NULL;
  unsigned best_edits = NEAR_EDITS + 1;
  for (size_t i = 0; i < n && !*exact; i++)
    consider(name, fields[i], &best, &best_edits, exact);
  for (size_t i = 0; i < OTHER_COUNT && !*exact; i++)
    consider(name, k_others[i], &best, &best_edits, exact);
  return best;
}

static void consider(const char *name, const char *candidate, const char **best,
                     unsigned *best_edits, bool *exact) {
  if (strcmp(name, candidate) == 0) {
    *exact = true;
    return;
  }
  unsigned d =
      perf__edit_distance(name + sizeof PREFIX - 1, candidate + sizeof PREFIX - 1, *best_edits);
  if (d < *best_edits) {
    *best_edits = d;
    *best = candidate;
  }
}
