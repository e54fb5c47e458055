/*
 * capture.c - samples into events (see capture.h).
 */
#include "sdk/pipeline/capture.h"

#include <stdlib.h>

#include "perf_sdk.h"
#include "sdk/base/clock.h"
#include "sdk/base/threads.h"
#include "sdk/sampler/sampler.h"
#include "sdk/sampler/stack_end.h"

/* How often a CPU sample's thread found just woken in a call is asked again. */
#define WOKEN_RETRIES 2

static int capture(perf__event_t *ev, pid_t tid, uintptr_t caller_ra, perf__stats_t *stats,
                   bool (*still_valid)(void *), void *arg);
static int add_shot(perf__event_t *ev, const perf__sampler_shot_t *shot, uint64_t weight_ns,
                    perf__stats_t *stats);
static int capture_chunks(perf__event_t *ev, const pid_t *tids, const uint64_t *weights_ns,
                          size_t n, bool *on_cpu, size_t *off_cpu, perf__stats_t *stats);

int perf__capture_sample(perf__event_t *ev, pid_t tid, perf__stats_t *stats) {
  return capture(ev, tid, 0, stats, NULL, NULL);
}

int perf__capture_sample_checked(perf__event_t *ev, pid_t tid, perf__stats_t *stats,
                                 bool (*still_valid)(void *), void *arg) {
  return capture(ev, tid, 0, stats, still_valid, arg);
}

int perf__capture_samples(perf__event_t *ev, const pid_t *tids, size_t n, perf__stats_t *stats) {
  return capture_chunks(ev, tids, NULL, n, NULL, NULL, stats);
}

int perf__capture_cpu_samples(perf__event_t *ev, const pid_t *tids, const uint64_t *weights_ns,
                              size_t n, bool *on_cpu, size_t *off_cpu, perf__stats_t *stats) {
  *off_cpu = 0;
  return capture_chunks(ev, tids, weights_ns, n, on_cpu, off_cpu, stats);
}

int perf__capture_self(perf__event_t *ev, uintptr_t caller_ra, perf__stats_t *stats) {
  return capture(ev, 0, caller_ra, stats, NULL, NULL);
}

/* Snapshots of up to CHUNK threads. With weights_ns (CPU samples): only
   the shots of threads found running are recorded, with their weights. */
static int capture_chunks(perf__event_t *ev, const pid_t *tids, const uint64_t *weights_ns,
                          size_t n, bool *on_cpu, size_t *off_cpu, perf__stats_t *stats) {
  enum { CHUNK = PERF__SAMPLER_IN_FLIGHT_MAX };
  uintptr_t *pcs = malloc((size_t)CHUNK * PERF__EVENT_MAX_DEPTH * sizeof *pcs);
  if (!pcs) return PERF_E_NO_MEMORY;
  perf__sampler_shot_t shots[CHUNK];
  int err = PERF_OK;
  for (size_t first = 0; first < n && !err; first += CHUNK) {
    size_t m = n - first < CHUNK ? n - first : CHUNK;
    for (size_t j = 0; j < m; j++)
      shots[j] = (perf__sampler_shot_t){.tid = tids[first + j],
                                        .pcs = pcs + j * PERF__EVENT_MAX_DEPTH,
                                        .max = PERF__EVENT_MAX_DEPTH,
                                        .want_on_cpu = weights_ns != NULL};
    err = perf__sampler_capture_threads(ev->mods, shots, m, CHUNK);
    /* A thread just woken in a call is about to run: asked again at once,
       it is usually caught in the work it woke up for. */
    for (size_t j = 0; j < m && !err && weights_ns; j++)
      for (int again = 0; again < WOKEN_RETRIES && shots[j].woken; again++)
        perf__sampler_capture_threads(ev->mods, &shots[j], 1, 1);
    for (size_t j = 0; j < m && !err; j++) {
      const perf__sampler_shot_t *shot = &shots[j];
      if (!weights_ns) {
        err = add_shot(ev, shot, 0, stats);
        continue;
      }
      bool walked = shot->err == PERF_OK || shot->err == PERF_E_TRUNCATED;
      on_cpu[first + j] = walked && shot->on_cpu;
      if (walked && !shot->on_cpu) {
        (*off_cpu)++; /* blocked: not a CPU sample */
        PERF__COUNT(stats, samples_taken, 1);
        continue;
      }
      err = add_shot(ev, shot, on_cpu[first + j] ? weights_ns[first + j] : 0, stats);
    }
  }
  free(pcs);
  return err;
}

void perf__capture_prepare(pid_t tid) {
  perf__modules_t *mods = perf__modules_acquire();
  if (!mods) return;
  uintptr_t pcs[PERF__EVENT_MAX_DEPTH];
  size_t n = 0;
  perf__sampler_capture(mods, tid, pcs, PERF__EVENT_MAX_DEPTH, &n);
  perf__modules_release(mods);
}

static int capture(perf__event_t *ev, pid_t tid, uintptr_t caller_ra, perf__stats_t *stats,
                   bool (*still_valid)(void *), void *arg) {
  uintptr_t pcs[PERF__EVENT_MAX_DEPTH];
  perf__sampler_shot_t shot = {.tid = tid, .pcs = pcs, .max = PERF__EVENT_MAX_DEPTH};
  int err = perf__sampler_capture_shot(ev->mods, &shot);
  size_t n = shot.count;
  perf__stack_end_t end = perf__stack_end_of(err, shot.status);
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
    return perf__event_add_sample_state(ev, tid, now, pcs + skip, n - skip, end, shot.state);
  }
  PERF__COUNT(stats, samples_failed, 1);
  return perf__event_add_failed_sample(ev, tid, now, err);
}

static int add_shot(perf__event_t *ev, const perf__sampler_shot_t *shot, uint64_t weight_ns,
                    perf__stats_t *stats) {
  int64_t when = shot->taken_ns ? shot->taken_ns : perf__now_ns();
  if (shot->err == PERF_OK || shot->err == PERF_E_TRUNCATED) {
    PERF__COUNT(stats, samples_taken, 1);
    return perf__event_add_weighted_sample(ev, shot->tid, when, shot->pcs, shot->count,
                                           perf__stack_end_of(shot->err, shot->status), shot->state,
                                           weight_ns);
  }
  PERF__COUNT(stats, samples_failed, 1);
  return perf__event_add_failed_sample(ev, shot->tid, when, shot->err);
}
