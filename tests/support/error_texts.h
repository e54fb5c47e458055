/*
 * error_texts.h - every perf_error_t value with the exact text
 * perf_strerror must give for it, written here (not read from the SDK), and
 * the check that a library's perf_strerror gives them: the static library's
 * (tests/monitors/test_sdk.c) and the front's own copy in libperfsdk.so
 * (tests/monitors/test_guest.c). A value added to the enum needs its row.
 */
#ifndef PERF_TEST_ERROR_TEXTS_H
#define PERF_TEST_ERROR_TEXTS_H

#include <string.h>

#include "check.h"
#include "perf_sdk.h"

typedef struct error_text_s {
  int code;
  const char *name, *text;
} error_text_t;

#define ERROR_TEXT(code, text)                                                                     \
  { code, #code, text }

static const error_text_t ERROR_TEXTS[] = {
    ERROR_TEXT(PERF_OK, "success"),
    ERROR_TEXT(PERF_E_INVALID_ARGUMENT, "invalid argument (a NULL pointer, a value out of range), "
                                        "or a nested loop ended without its begin"),
    ERROR_TEXT(PERF_E_NO_MEMORY, "out of memory or over a size bound"),
    ERROR_TEXT(PERF_E_NO_THREAD, "no such thread in this process"),
    ERROR_TEXT(PERF_E_TIMEOUT, "the thread did not answer the sampler in time (it blocks the "
                               "sampler's signal, got no CPU within the timeout, or kept waking "
                               "and blocking)"),
    ERROR_TEXT(PERF_E_BUSY, "busy: the sampler is already capturing that thread or cannot send "
                            "another request now, or an SDK call is already in progress on this "
                            "thread (a CPU profile's sample: taken before its thread's stack or "
                            "unwind rules were learned, with the sample ring full, or of a thread "
                            "past the profile's bound)"),
    ERROR_TEXT(PERF_E_SIGNAL, "no usable sampling signal (none free, the configured one is taken, "
                              "or the app replaced the sampler's handler)"),
    ERROR_TEXT(PERF_E_SYSTEM, "a system call (or libdwfl) failed or answered unexpectedly"),
    ERROR_TEXT(PERF_E_TRUNCATED, "the stack was deeper than the output buffer"),
    ERROR_TEXT(PERF_E_INVALID_CONFIG, "invalid configuration (the log names the field)"),
    ERROR_TEXT(PERF_E_ALREADY_INITIALIZED, "already initialized (the SDK is running, or the "
                                           "sampler's signal or stack copy size is fixed by its "
                                           "first use)"),
    ERROR_TEXT(PERF_E_NOT_INITIALIZED, "not initialized (perf_sdk_init first, or after shutdown)"),
    ERROR_TEXT(PERF_E_UNSUPPORTED, "not available here: the SDK's core library, or what the "
                                   "feature needs, could not be loaded or set up (the log says "
                                   "which)"),
    ERROR_TEXT(PERF_E_RATE_LIMITED,
               "over max_events_per_hour: the event was dropped (events_dropped_rate)"),
    ERROR_TEXT(PERF_E_QUEUE_FULL, "the event queue is full (queue_capacity): the event was dropped "
                                  "(events_dropped_queue)"),
    ERROR_TEXT(PERF_E_DEADLINE, "the timeout ran out first (a flush's rest is written and sent "
                                "later, a shutdown leaves a busy SDK thread running)"),
    ERROR_TEXT(PERF_E_SINK_FAILED, "recorded events were lost: a batch could not be put into the "
                                   "spool, or the spool could not be opened (the log says why)"),
};

/* The text of `code` as ERROR_TEXTS has it (the check fails for a code it
   has not). */
static inline const char *error_text(int code) {
  for (size_t i = 0; i < sizeof ERROR_TEXTS / sizeof ERROR_TEXTS[0]; i++)
    if (ERROR_TEXTS[i].code == code) return ERROR_TEXTS[i].text;
  CHECKF(0, "error_texts.h has no row for %d", code);
  return NULL;
}

/* `rc` is `want`, and perf_strerror says the text written here for it. */
#define CHECK_ERROR(rc, want)                                                                      \
  do {                                                                                             \
    int rc_ = (rc);                                                                                \
    CHECKF(rc_ == (want), "%s returned %d (%s), want %s", #rc, rc_, perf_strerror(rc_), #want);    \
    CHECKF(strcmp(perf_strerror(rc_), error_text(want)) == 0, "perf_strerror(%s): \"%s\"", #want,  \
           perf_strerror(rc_));                                                                    \
  } while (0)

/* perf_strerror of every value: its text (never "unknown error"); the
   values are 0, -1, -2, ... without a gap; one past the last and a
   positive one are "unknown error". */
static inline void check_error_texts(void) {
  size_t n = sizeof ERROR_TEXTS / sizeof ERROR_TEXTS[0];
  for (size_t i = 0; i < n; i++) {
    CHECKF(ERROR_TEXTS[i].code == -(int)i, "%s is %d, row %zu", ERROR_TEXTS[i].name,
           ERROR_TEXTS[i].code, i);
    const char *got = perf_strerror(ERROR_TEXTS[i].code);
    CHECKF(got && strcmp(got, ERROR_TEXTS[i].text) == 0, "perf_strerror(%s) = \"%s\", want \"%s\"",
           ERROR_TEXTS[i].name, got ? got : "(null)", ERROR_TEXTS[i].text);
    CHECKF(strcmp(got, "unknown error") != 0, "%s has no text", ERROR_TEXTS[i].name);
  }
  CHECKF(strcmp(perf_strerror(-(int)n), "unknown error") == 0,
         "%d has a text (\"%s\"): a value without its row here", -(int)n, perf_strerror(-(int)n));
  CHECK(strcmp(perf_strerror(1), "unknown error") == 0);
}

#endif
