/*
 * log.h - the SDK's only way to say something: through the app's log
 * callback (perf_sdk_config_t.log_fn) when it gave one, otherwise nowhere.
 * Never called from the signal handler.
 */
#ifndef PERF_LOG_H
#define PERF_LOG_H

#include "perf_sdk.h"

enum {
  PERF__LOG_DEBUG = PERF_LOG_DEBUG,
  PERF__LOG_INFO = PERF_LOG_INFO,
  PERF__LOG_WARN = PERF_LOG_WARN,
  PERF__LOG_ERROR = PERF_LOG_ERROR
};

/* Install (or remove with NULL) the callback every later message goes to. */
void perf__log_set(perf_log_fn fn, void *user);

/* Format and deliver a message (at most 511 bytes, on one line: control
   characters such as a quoted body's newline become spaces, trailing ones
   are dropped); a no-op without a callback. */
void perf__log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Log at error level and return `err` from the calling function. */
#define PERF__FAIL(err, ...)                                                                       \
  do {                                                                                             \
    perf__log(PERF__LOG_ERROR, __VA_ARGS__);                                                       \
    return (err);                                                                                  \
  } while (0)

#endif
