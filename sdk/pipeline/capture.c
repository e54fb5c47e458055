/*
 * capture.c - samples into events (see capture.h).
 */
#include "sdk/pipeline/capture.h"

#include "perf_sdk.h"
#include "sdk/base/clock.h"
#include "sdk/base/threads.h"
#include "sdk/sampler/stack_end.h"

static int capture(perf__event_t *ev, pid_t tid, uintptr_t caller_ra, perf__stats_t *stats,
                   bool (*still_valid)(void *), void *arg);

int perf__capture_sample(perf__event_t *ev, pid_t tid, perf__stats_t *stats) {
  return capture(ev, tid, 0, stats, NULL, NULL);
}

int perf__capture_sample_checked(perf__event_t *ev, pid_t tid, perf__stats_t *stats,
                                 bool (*still_valid)(void *), void *arg) {
  return capture(ev, tid, 0, stats, still_valid, arg);
}

int perf__capture_self(perf__event_t *ev, uintptr_t caller_ra, perf__stats_t *stats) {
  return capture(ev, 0, caller_ra, stats, NULL, NULL);
}

static int capture(perf__event_t *ev, pid_t tid, uintptr_t caller_ra, perf__stats_t *stats,
                   bool (*still_valid)(void *), void *arg) {
  uintptr_t pcs[PERF__EVENT_MAX_DEPTH];
  size_t n = 0;
  perf__stack_end_t end;
  int err = perf__sampler_capture_with_end(ev->mods, tid, pcs, PERF__EVENT_MAX_DEPTH, &n, &end);
  int64_t now = perf__now_ns();
  if (still_valid && !still_valid(arg)) return PERF_OK; /* taken too late: not this event's */
  if (tid == 0) tid = perf__gettid();
  if (err == PERF_OK || err == PERF_E_TRUNCATED) {
    PERF__COUNT(stats, samples_taken, 1);
    size_t skip = 0;
    while (caller_ra && skip < n && pcs[skip] != caller_ra)
      skip++;
    if (skip == n) skip = 0; /* not found: keep everything */
    /* The stack now starts at a return address, while frame 0 is named as
       an interrupted pc (as is, not at pc - 1): point it into the call
       instruction, so it names the call site, inline chain included,
       rather than whatever follows the call. */
    if (skip) pcs[skip] -= 1;
    return perf__event_add_sample(ev, tid, now, pcs + skip, n - skip, end);
  }
  PERF__COUNT(stats, samples_failed, 1);
  return perf__event_add_failed_sample(ev, tid, now, err);
}
