/*
 * log.h - the SDK's only way to say something: through the app's log
 * callback when it gave one, otherwise nowhere. Never called from the signal
 * handler.
 */
#ifndef PERF_LOG_H
#define PERF_LOG_H

enum { PERF__LOG_DEBUG = 0, PERF__LOG_INFO = 1, PERF__LOG_WARN = 2, PERF__LOG_ERROR = 3 };

typedef void (*perf__log_fn)(int level, const char *message, void *user);

/* Install (or remove with NULL) the callback every later message goes to. */
void perf__log_set(perf__log_fn fn, void *user);

/* Format and deliver a message; a no-op without a callback. */
void perf__log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Log at error level and return `err` from the calling function. */
#define PERF__FAIL(err, ...)                                                                       \
  do {                                                                                             \
    perf__log(PERF__LOG_ERROR, __VA_ARGS__);                                                       \
    return (err);                                                                                  \
  } while (0)

#endif
