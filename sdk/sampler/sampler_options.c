/*
 * sampler_options.c - checks sampler options and applies their environment
 * overrides (see sampler_options.h). Runs on the configuring thread.
 */
#include "sdk/sampler/sampler_options.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "sdk/base/log.h"

static int env_long(const char *name, long lo, long hi, long *out);

void perf__sampler_options_apply_env(perf_sampler_options_t *opts) {
  long v;
  if (env_long("PERF_SDK_SAMPLE_SIGNAL", SIGRTMIN, SIGRTMAX, &v) == 0) opts->signal = (int)v;
  if (env_long("PERF_SDK_SAMPLE_TIMEOUT_MS", 1, 10000, &v) == 0) opts->timeout_ms = (unsigned)v;
  if (env_long("PERF_SDK_STACK_COPY_BYTES", 1024, 1048576, &v) == 0)
    opts->stack_copy_bytes = (size_t)v;
  const char *mode = getenv("PERF_SDK_UNWIND_MODE");
  if (!mode || !*mode) return;
  if (strcmp(mode, "cfi") == 0)
    opts->unwind_mode = PERF_UNWIND_CFI;
  else if (strcmp(mode, "fp") == 0)
    opts->unwind_mode = PERF_UNWIND_FRAME_POINTER;
  else if (strcmp(mode, "stack_copy") == 0)
    opts->unwind_mode = PERF_UNWIND_STACK_COPY;
  else
    perf__log(PERF__LOG_WARN, "PERF_SDK_UNWIND_MODE=%s ignored: expected cfi, fp or stack_copy",
              mode);
}

int perf__sampler_options_validate(const perf_sampler_options_t *o) {
  if (o->signal != 0 && (o->signal < SIGRTMIN || o->signal > SIGRTMAX))
    PERF__FAIL(PERF_E_INVALID_CONFIG, "signal = %d: must be 0 (pick one) or %d..%d", o->signal,
               SIGRTMIN, SIGRTMAX);
  if (o->unwind_mode != PERF_UNWIND_CFI && o->unwind_mode != PERF_UNWIND_FRAME_POINTER &&
      o->unwind_mode != PERF_UNWIND_STACK_COPY)
    PERF__FAIL(PERF_E_INVALID_CONFIG,
               "unwind_mode = %d: must be PERF_UNWIND_CFI (0), "
               "PERF_UNWIND_FRAME_POINTER (1) or PERF_UNWIND_STACK_COPY (2)",
               (int)o->unwind_mode);
  if (o->timeout_ms < 1 || o->timeout_ms > 10000)
    PERF__FAIL(PERF_E_INVALID_CONFIG, "timeout_ms = %u: must be 1..10000", o->timeout_ms);
  if (o->stack_copy_bytes < 1024 || o->stack_copy_bytes > 1048576)
    PERF__FAIL(PERF_E_INVALID_CONFIG, "stack_copy_bytes = %zu: must be 1024..1048576",
               o->stack_copy_bytes);
  return PERF_OK;
}

static int env_long(const char *name, long lo, long hi, long *out) {
  const char *s = getenv(name);
  if (!s || !*s) return -1;
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || v < lo || v > hi) {
    perf__log(PERF__LOG_WARN, "%s=%s ignored: expected an integer in %ld..%ld", name, s, lo, hi);
    return -1;
  }
  *out = v;
  return 0;
}
