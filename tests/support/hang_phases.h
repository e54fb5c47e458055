/*
 * hang_phases.h - one hang of the calling (watched) thread in three
 * phases, under a running SDK: blocked in read() on a pipe, then in
 * pthread_mutex_lock on a mutex a driver thread holds (a futex wait), then
 * spinning. The driver ends each phase once /proc shows the thread in it
 * and the SDK has taken `phase_samples` more samples (never a sleep that
 * hopes); every transition is stamped on CLOCK_MONOTONIC, so a test can
 * say which state each sample must have; and the hang read back from the
 * file sink's batch records. For the thread-state tests
 * (tests/sampler/test_states.c, tests/collector/ingest/test_collector_states.c).
 */
#ifndef PERF_TEST_HANG_PHASES_H
#define PERF_TEST_HANG_PHASES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "perf/v1/perf.pb-c.h"
#include "perf_sdk.h"

typedef struct hang_phases_s {
  unsigned phase_samples;
  pid_t tid; /* the hung thread */
  /* CLOCK_MONOTONIC ns: around perf_sdk_loop_busy (the event's start lies
     between them), before read(), around the write that ends it, when
     /proc first showed the futex wait, before the unlock that ends it,
     when the thread held the mutex (then it only spins), before idle. */
  int64_t busy_lo, busy_hi, read_at, write_lo, write_hi, futex_seen, unlock_at, spin_at, idle_at;
  uint64_t ends[3]; /* samples_taken when each phase was ended */
  /* internal */
  int pipe_fd[2];
  pthread_mutex_t lock;
  atomic_int locked, spinning, stop;
} hang_phases_t;

/* Run the hang on the calling thread (the SDK running, its hang monitor
   watching this thread); fails the case when a phase gets no samples
   within 20 s. */
void hang_phases_run(hang_phases_t *p, unsigned phase_samples);

/* The hang under an SDK of app (sdk_config_short_hangs: the settings the
   phases are made for) writing to a file sink
   in dir (which exists): started, run, shut down. The sink's path in
   sink (read its event with hang_phases_read_event). */
void hang_phases_run_to_file(hang_phases_t *p, unsigned phase_samples, const char *app,
                             const char *dir, char *sink, size_t sink_size);

/* The hang event of a file sink's batch records (<sink>.batches/, read
   once the SDK is shut down), decoded: the event, its batch in *bt (the
   caller frees it with perf__v1__batch__free_unpacked). */
const Perf__V1__Event *hang_phases_read_event(const char *sink, Perf__V1__Batch **bt);

#endif
