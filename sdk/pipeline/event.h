/*
 * event.h - one recorded slow moment (a hang, a CPU burst, a manual capture)
 * or one window of the continuous CPU profile of this process: its time,
 * threads and samples (a profile: aggregated counts only), with the
 * sampled stacks deduplicated per thread and the dominant one first once
 * finished.
 *
 * Built by one monitor (or the perf_sdk_capture_now caller), then handed to
 * the writer through the event queue; never shared while being built.
 */
#ifndef PERF_EVENT_H
#define PERF_EVENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "perf_sdk.h"
#include "sdk/sampler/modules.h"
#include "sdk/sampler/sample_state.h"
#include "sdk/sampler/stack_end.h"

#define PERF__EVENT_MAX_DEPTH 256     /* frames kept per sample */
#define PERF__EVENT_MAX_SAMPLES 20000 /* samples kept per event; more are counted */
#define PERF__EVENT_MAX_THREADS 256

typedef enum perf__event_kind_e {
  PERF__EVENT_HANG = 0,
  PERF__EVENT_FATAL_HANG = 1,
  PERF__EVENT_CPU = 2,
  PERF__EVENT_MANUAL = 3,
  PERF__EVENT_PROFILE = 4, /* a window of the continuous CPU profile: stacks only, no samples */
} perf__event_kind_t;

/* A distinct stack of one thread: same tid, same pcs and same end. */
typedef struct perf__stack_s {
  pid_t tid;
  uint32_t first; /* index of its innermost frame in event->frames */
  uint32_t depth;
  uint32_t samples; /* samples that had exactly this stack */
  uint64_t hash;
  perf__stack_end_t end; /* how the walk ended (a stack cut short is another stack) */
  uint64_t weight_ns;    /* weighted events: the CPU time of those samples */
  perf__state_t state;   /* profile events: the samples' state (part of the stack's identity) */
} perf__stack_t;

typedef struct perf__sample_s {
  int64_t mono_ns;
  pid_t tid;
  int32_t stack;              /* index in event->stacks, -1 when the capture failed */
  int error;                  /* the capture's perf_error_t when it failed */
  perf__sample_state_t state; /* running, or waiting in which call (unknown when failed) */
  uint64_t weight_ns;         /* weighted events: the CPU time the sample stands for */
} perf__sample_t;

typedef struct perf__thread_s {
  pid_t tid;
  char name[16];
  int cpu_percent; /* of one core over the event; -1 when not measured */
} perf__thread_t;

typedef struct perf__event_s {
  perf__event_kind_t kind;
  int64_t start_wall_ns; /* Unix epoch */
  int64_t start_mono_ns;
  int64_t duration_ns;
  pid_t tid;        /* the watched thread, the hottest thread or the caller */
  int cpu_percent;  /* cpu events: the process's CPU during the burst; else -1 */
  char reason[128]; /* manual events */
  char label[PERF_MAX_LABEL_BYTES + 1];        /* hang events: the unit of work's label, or "" */
  char loop[PERF_SDK_MAX_LOOP_NAME_BYTES + 1]; /* hang events: the loop's name, or "" */
  uint64_t dropped;      /* events dropped (rate limit, queue) since the previous one */
  uint64_t samples_over; /* samples beyond PERF__EVENT_MAX_SAMPLES, not kept */
  bool weighted;         /* cpu events: each sample carries the CPU time it stands for (weight_ns),
                            and the stacks are ranked by their CPU time */
  perf__thread_t *threads;
  size_t thread_count;
  perf__sample_t *samples;
  size_t sample_count, sample_cap;
  perf__stack_t *stacks; /* dominant first after perf__event_finish */
  size_t stack_count, stack_cap;
  uintptr_t *frames;
  size_t frame_count, frame_cap;
  perf__modules_t *mods; /* the module snapshot the frames belong to (a reference) */
} perf__event_t;

/* A new empty event holding a reference to `mods` (may be NULL: then its
   frames are in no known module). NULL when memory ran out. */
perf__event_t *perf__event_new(perf__event_kind_t kind, perf__modules_t *mods);

/* Add one sample of thread tid: pcs[0..n), innermost first (at most
   PERF__EVENT_MAX_DEPTH are kept: more makes the end DEPTH), whose walk
   ended as `end`. Returns 0 or PERF_E_NO_MEMORY. */
int perf__event_add_sample(perf__event_t *ev, pid_t tid, int64_t mono_ns, const uintptr_t *pcs,
                           size_t n, perf__stack_end_t end);

/* perf__event_add_sample with the thread's state when its stack was read
   (the sampler's shot.state); perf__event_add_sample records it unknown. */
int perf__event_add_sample_state(perf__event_t *ev, pid_t tid, int64_t mono_ns,
                                 const uintptr_t *pcs, size_t n, perf__stack_end_t end,
                                 perf__sample_state_t state);

/* The same for a weighted event: the sample stands for weight_ns of its
   thread's CPU time (added to its stack's weight_ns). */
int perf__event_add_weighted_sample(perf__event_t *ev, pid_t tid, int64_t mono_ns,
                                    const uintptr_t *pcs, size_t n, perf__stack_end_t end,
                                    perf__sample_state_t state, uint64_t weight_ns);

/* Add weight_ns to sample i of a weighted event (and to its stack); a
   failed sample or an index past the samples is left alone. */
void perf__event_add_weight(perf__event_t *ev, size_t i, uint64_t weight_ns);

/* A profile event's aggregated count: `samples` samples of thread tid in
   `state` with the stack pcs[0..n) (at most PERF__EVENT_MAX_DEPTH kept)
   that ended as `end`, standing for weight_ns of its CPU time. Added to an
   equal (tid, state, pcs, end) stack, else a new one; no sample is
   stored. Returns 0 or PERF_E_NO_MEMORY. */
int perf__event_add_count(perf__event_t *ev, pid_t tid, perf__state_t state, const uintptr_t *pcs,
                          size_t n, perf__stack_end_t end, uint32_t samples, uint64_t weight_ns);

/* Record a capture of tid that failed with `error`. */
int perf__event_add_failed_sample(perf__event_t *ev, pid_t tid, int64_t mono_ns, int error);

/* Add (or update) a thread's name and CPU share. */
int perf__event_set_thread(perf__event_t *ev, pid_t tid, const char *name, int cpu_percent);

/* Sort the stacks so the dominant one (most samples; weighted events: most
   CPU time) comes first. */
void perf__event_finish(perf__event_t *ev);

/* A deep copy (with its own module reference); NULL when memory ran out. */
perf__event_t *perf__event_clone(const perf__event_t *ev);

/* Samples that produced a stack. */
size_t perf__event_good_samples(const perf__event_t *ev);

void perf__event_free(perf__event_t *ev);

/* "hang", "fatal_hang", "cpu", "manual" or "profile". */
const char *perf__event_kind_name(perf__event_kind_t kind);

#endif
