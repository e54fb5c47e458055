/*
 * recorder.c - rate limit and drop accounting in front of the writer (see
 * recorder.h).
 */
#include "sdk/pipeline/recorder.h"

#include "sdk/base/clock.h"

#define HOUR_NS 3600000000000.0

void perf__recorder_init(perf__recorder_t *r, unsigned per_hour, perf__writer_t *writer,
                         perf__stats_t *stats) {
  pthread_mutex_init(&r->lock, NULL);
  r->per_hour = per_hour;
  r->tokens = per_hour; /* a full bucket: the first per_hour events pass */
  r->refilled_ns = perf__now_ns();
  r->pending_drops = 0;
  r->writer = writer;
  r->stats = stats;
}

int perf__recorder_record(perf__recorder_t *r, perf__event_t *ev) {
  perf__event_finish(ev);
  pthread_mutex_lock(&r->lock);
  int64_t now = perf__now_ns();
  r->tokens += (double)(now - r->refilled_ns) * r->per_hour / HOUR_NS;
  if (r->tokens > r->per_hour) r->tokens = r->per_hour;
  r->refilled_ns = now;
  /* A profile window is not a slow moment: at most one per window, it
     takes nothing from max_events_per_hour (nor from the events it is
     there for). */
  uint64_t carried = 0; /* the drops this event tells of */
  if (ev->kind != PERF__EVENT_PROFILE) {
    if (r->tokens < 1.0) {
      r->pending_drops++;
      pthread_mutex_unlock(&r->lock);
      PERF__COUNT(r->stats, events_dropped_rate, 1);
      perf__event_free(ev);
      return PERF_E_RATE_LIMITED;
    }
    r->tokens -= 1.0;
    carried = r->pending_drops;
    r->pending_drops = 0;
  }
  ev->dropped = carried;
  /* Submitting under the lock keeps the drop count with the right event. */
  int err = perf__writer_submit(r->writer, ev);
  if (err) {
    r->pending_drops += carried + 1; /* this one, and the ones it carried */
    PERF__COUNT(r->stats, events_dropped_queue, 1);
  } else {
    PERF__COUNT(r->stats, events_recorded, 1);
  }
  pthread_mutex_unlock(&r->lock);
  return err;
}

void perf__recorder_progress(perf__recorder_t *r, perf__event_t *progress) {
  perf__writer_post_hang(r->writer, progress);
}

void perf__recorder_loop_stats(perf__recorder_t *r, const perf__loop_stats_t *stats) {
  perf__writer_add_loop_stats(r->writer, stats);
}

void perf__recorder_destroy(perf__recorder_t *r) {
  pthread_mutex_destroy(&r->lock);
}
