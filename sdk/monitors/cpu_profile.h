/*
 * cpu_profile.h - the continuous CPU profile (cpu_profile_hz > 0): every
 * thread of the process that burns CPU sampled by its own CPU-clock timer
 * (sdk/sampler/cpu_timers.h) at cpu_profile_hz of its CPU time, the
 * samples aggregated per (thread, state, stack) in a bounded table
 * (cpu_profile_table.h), and each window (a minute) recorded as one
 * profile event, none for a window without a sample. The profile measures
 * what it costs (the handler on the sampled threads, the monitor's drains
 * and aggregation) and lowers its rate to stay within
 * cpu_profile_budget_permille over any minute. Runs on the CPU monitor's
 * thread, which also runs the bursts: a burst pauses the profile (the two
 * share the timers), and its samples are added to the window.
 */
#ifndef PERF_CPU_PROFILE_H
#define PERF_CPU_PROFILE_H

#include <stdint.h>

#include "sdk/base/stats.h"
#include "sdk/pipeline/config.h"
#include "sdk/pipeline/event.h"
#include "sdk/pipeline/recorder.h"

typedef struct perf__cpu_profile_s perf__cpu_profile_t;

/* A profile for cfg (NULL when cfg->cpu_profile_hz is 0, when this system
   has no CPU-timer sampling (logged once), or memory ran out). Nothing
   is armed until the first perf__cpu_profile_poll. */
perf__cpu_profile_t *perf__cpu_profile_new(const perf__config_t *cfg, perf__recorder_t *recorder,
                                           perf__stats_t *stats);

/* Drain the samples into the window, arm threads that burn CPU and
   disarm those gone, keep the rate within the budget, and record the
   window when it is over (whatever is due within 50 ms is done now).
   since_cpu_ns: the calling thread's CPU clock (perf__cpu_profile_self_ns)
   when it began the sleep it woke from for this poll: the wake-up is the
   profile's cost too; 0 when it woke for something else. Returns the
   monotonic time of the next poll. */
int64_t perf__cpu_profile_poll(perf__cpu_profile_t *p, int64_t since_cpu_ns);

/* The calling thread's CPU clock, ns. */
int64_t perf__cpu_profile_self_ns(void);

/* Around a burst: pause drains what was sampled and deletes the timers
   (the burst arms its own); resume arms the threads again. */
void perf__cpu_profile_pause(perf__cpu_profile_t *p);
void perf__cpu_profile_resume(perf__cpu_profile_t *p);

/* A burst's weighted samples into the window (before the burst's event is
   recorded: the event is only read). */
void perf__cpu_profile_add_burst(perf__cpu_profile_t *p, const perf__event_t *burst);

/* Record the window so far (when it has samples) and stop sampling: the
   SDK stops. Frees p. */
void perf__cpu_profile_finish(perf__cpu_profile_t *p);

/* Test seam (sdk/sdk_testing.h): windows of window_ms (0: a minute) and
   tables of `entries` entries (0: PERF__PROFILE_TABLE_ENTRIES) for the
   profiles made from now on. */
void perf__cpu_profile_set_testing(unsigned window_ms, unsigned entries);

#endif
