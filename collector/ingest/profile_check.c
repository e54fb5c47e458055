/*
 * profile_check.c - a batch's profile events checked (see profile_check.h).
 */
#include "collector/ingest/profile_check.h"

#include <stdint.h>
#include <stdio.h>

/* The first per-sample array of an Event that has entries, by its field
   name (sample_stacks first: the decoder takes the others only with one
   entry per sample). */
static const char *sample_array(const Perf__V1__Event *e) {
  if (e->n_sample_stacks) return "sample_stacks";
  if (e->n_sample_offsets_micros) return "sample_offsets_micros";
  if (e->n_sample_tids) return "sample_tids";
  if (e->n_sample_errors) return "sample_errors";
  if (e->n_sample_weights_micros) return "sample_weights_micros";
  if (e->n_sample_states) return "sample_states";
  if (e->n_sample_syscalls) return "sample_syscalls";
  if (e->n_sample_fds) return "sample_fds";
  return NULL;
}

static int check_event(const Perf__V1__Event *e, size_t index, char *msg, size_t cap) {
  const char *array = sample_array(e);
  if (array)
    return snprintf(msg, cap,
                    "event %zu (profile): %s must be empty: a profile's samples are aggregated "
                    "in stack_counts",
                    index, array),
           -1;
  for (size_t i = 0; i < e->n_stack_counts; i++) {
    const Perf__V1__StackCount *c = e->stack_counts[i];
    if ((unsigned)c->state > PERF__V1__SAMPLE_STATE__SAMPLE_STATE_OTHER)
      return snprintf(msg, cap,
                      "event %zu (profile): stack_counts[%zu].state %d is not a SampleState "
                      "(0..%d)",
                      index, i, (int)c->state, PERF__V1__SAMPLE_STATE__SAMPLE_STATE_OTHER),
             -1;
    if (c->weight_micros > PROFILE_WEIGHT_MAX_MICROS)
      return snprintf(msg, cap,
                      "event %zu (profile): stack_counts[%zu].weight_micros %llu is over %llu",
                      index, i, (unsigned long long)c->weight_micros,
                      (unsigned long long)PROFILE_WEIGHT_MAX_MICROS),
             -1;
  }
  return 0;
}

int profile_check(const Perf__V1__Batch *bt, char *msg, size_t cap) {
  for (size_t i = 0; i < bt->n_events; i++)
    if (bt->events[i]->kind == PERF__V1__EVENT_KIND__EVENT_KIND_PROFILE &&
        check_event(bt->events[i], i, msg, cap) != 0)
      return -1;
  return 0;
}
