/*
 * recorder.h - the one door the monitors (and the perf_sdk_capture_now
 * caller) hand events through on their way to the writer: finished events
 * pass the max_events_per_hour rate limit (a token bucket) and carry the
 * count of events dropped since the last recorded one; a hang in progress
 * is passed on as the latest copy for the hang marker.
 */
#ifndef PERF_RECORDER_H
#define PERF_RECORDER_H

#include <pthread.h>
#include <stdint.h>

#include "sdk/base/stats.h"
#include "sdk/pipeline/event.h"
#include "sdk/pipeline/loop_stats.h"
#include "sdk/pipeline/writer.h"

typedef struct perf__recorder_s {
  pthread_mutex_t lock;
  double tokens;       /* events that may be recorded right now */
  double per_hour;     /* bucket size and refill rate */
  int64_t refilled_ns; /* monotonic time of the last refill */
  uint64_t pending_drops;
  perf__writer_t *writer;
  perf__stats_t *stats;
} perf__recorder_t;

void perf__recorder_init(perf__recorder_t *r, unsigned per_hour, perf__writer_t *writer,
                         perf__stats_t *stats);

/* Record `ev` (ownership passes): finish it, apply the rate limit (not to
   a profile window: one per window already), attach the drop count,
   queue it. 0 when queued; when dropped (counted):
   PERF_E_RATE_LIMITED over the rate, PERF_E_QUEUE_FULL when the writer's
   queue is full. Never blocks on I/O. */
int perf__recorder_record(perf__recorder_t *r, perf__event_t *ev);

/* The hang in progress changed: `progress` is a copy of it to keep as this
   process's hang marker, or NULL when the hang ended (ownership passes;
   only the latest matters). Not rate limited: it is not an event yet. */
void perf__recorder_progress(perf__recorder_t *r, perf__event_t *progress);

/* The watched loops' stats of a period (each loop's and their sum), on to
   the writer (summed there until they are in a batch; never dropped, not
   rate limited). */
void perf__recorder_loop_stats(perf__recorder_t *r, const perf__loop_stats_t *stats);

void perf__recorder_destroy(perf__recorder_t *r);

#endif
