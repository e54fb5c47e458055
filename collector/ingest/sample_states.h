/*
 * sample_states.h - an event's per-sample thread states (the wire's
 * Event.sample_states, sample_syscalls, sample_fds) counted per thread and
 * state for the store (store_state_count_t). Ingest, on MHD's worker
 * threads.
 */
#ifndef PERF_COLLECTOR_SAMPLE_STATES_H
#define PERF_COLLECTOR_SAMPLE_STATES_H

#include <stddef.h>

#include "collector/store/store.h"
#include "perf/v1/perf.pb-c.h"

/* The states of event e of bt (decoded and validated: every column has
   one entry per sample or none), counted per (tid, state, syscall, fd),
   most samples first, in *out (malloc'd, the strings are bt's or static;
   free with free()); *n 0 and *out NULL when the event carries no states.
   0, or -1 when memory ran out. */
int sample_states_count(const Perf__V1__Batch *bt, const Perf__V1__Event *e,
                        store_state_count_t **out, size_t *n);

/* The states of profile event e (EVENT_KIND_PROFILE), whose counts are
   per (stack, thread, state): their samples summed per (tid, state), no
   system call or descriptor (a profile carries none), most samples first,
   in *out as sample_states_count's (counts of unknown state as "unknown");
   *n 0 and *out NULL when every count's state is unknown. 0, or -1 when memory ran out. */
int sample_states_of_counts(const Perf__V1__Event *e, store_state_count_t **out, size_t *n);

#endif
