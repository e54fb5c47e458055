/*
 * sdk_report.h - the file sink's report (sdk/pipeline/event_text.c,
 * docs/protocol.md "Report") read back by the tests: its events, their
 * header fields and their stacks, and the checks the monitor tests make on
 * them. Failures exit through check.h.
 */
#ifndef PERF_TEST_SDK_REPORT_H
#define PERF_TEST_SDK_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

typedef struct {
  char kind[16];
  char start[40];
  long duration_ms;
  int thread;
  long samples;
  long cpu_percent; /* -1 when the header has none */
  long dropped;
  char *text; /* the section, "event ..." up to its blank line */
} event_t;

typedef struct {
  long samples;
  int thread;
  char *text; /* "stack ..." and its frame lines */
} ev_stack_t;

/* Events of `kind` (NULL: any) in the report. */
size_t count_events(const char *report, const char *kind);

/* The nth event of `kind` (NULL: any), parsed; free with event_free. */
void find_event(const char *report, const char *kind, size_t nth, event_t *ev);
void event_free(event_t *ev);

/* The nth stack of the event (0: the dominant one); false past the last.
   Free out->text. */
bool event_stack(const event_t *ev, size_t nth, ev_stack_t *out);

/* The samples of all its stacks added up. */
long event_stack_samples(const event_t *ev);

/* The event's stack `nth` has the chain as consecutive frames (innermost
   first; stack_assert.h's alternatives with '|'). */
void expect_chain(const event_t *ev, size_t nth, const char *const *chain, size_t n);

/* start= is ISO 8601 UTC with milliseconds, between the two wall times. */
void expect_start_between(const event_t *ev, time_t from, time_t to);

#endif
