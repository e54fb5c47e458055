/*
 * cpu_timers.h - CPU profiles driven by each thread's own CPU clock: a
 * POSIX timer on a thread's CPU clock (timer_create on the clock id made
 * from its tid, SIGEV_THREAD_ID to that tid) sends the sampler's signal to
 * the thread each time it has burned a period of CPU; the handler walks its
 * stack into a preallocated record the monitor drains. No requester round trip and no
 * /proc read per sample.
 *
 * Only where the kernel checks CPU timers in task work on the way back to
 * user mode (perf__cpu_timers_supported): there the signal is generated
 * after a system call completed, never while the thread sleeps in one, so
 * no call of the app returns EINTR or early. Elsewhere the requester-driven
 * burst (cpu_monitor.c) is used.
 *
 * One profile at a time, run by one thread (the CPU monitor): begin, arm
 * each hot thread, drain now and then, end. The handler half runs on the
 * sampled threads (perf__cpu_timers_on_signal, called by the sampler's
 * handler for SI_TIMER signals).
 */
#ifndef PERF_SAMPLER_CPU_TIMERS_H
#define PERF_SAMPLER_CPU_TIMERS_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sdk/sampler/modules.h"
#include "sdk/sampler/unwind_rules.h"

/* Most threads one profile arms (cpu_top_threads' bound). */
#define PERF__CPU_TIMERS_MAX 64
/* Frames one timer sample keeps (the event keeps as many). */
#define PERF__CPU_TIMER_DEPTH 256

/* One sample, as drained. */
typedef struct perf__cpu_timer_sample_s {
  pid_t tid;
  int64_t taken_ns; /* CLOCK_MONOTONIC in the handler */
  size_t count;
  perf__walk_status_t status;
  const uintptr_t *pcs; /* count frames, innermost first; valid during the callback */
} perf__cpu_timer_sample_t;

/* Whether this kernel and architecture deliver CPU-timer signals only on
   the way back to user mode (task-work CPU timers: x86_64 since Linux
   5.11). PERF_SDK_CPU_TIMERS=0 turns them off, =1 forces them on. */
bool perf__cpu_timers_supported(void);

/* Start a profile walking with the rules of `mods` (a reference is held
   until perf__cpu_timers_end). Installs the sampler's signal when needed.
   PERF_OK, PERF_E_BUSY (a profile is running), PERF_E_NO_MEMORY or
   PERF_E_SIGNAL. */
int perf__cpu_timers_begin(perf__modules_t *mods);

/* Arm a timer on tid's CPU clock, expiring every period_ns of its CPU
   time. Not armed when it blocks the sampler's signal (one read of its
   /proc status). Its stack's bounds, when the sampler does not know them
   and it is not blocked now (perf__cpu_timers_learn_bounds), are learned
   from its first sample (which is not taken). PERF_OK,
   PERF_E_NO_THREAD, PERF_E_TIMEOUT (it blocks the signal), PERF_E_BUSY
   (no slot), or PERF_E_SYSTEM. */
int perf__cpu_timers_arm(pid_t tid, int64_t period_ns);

/* Give tid's timer a new period of its CPU time (its next expiry drawn
   within the new period). PERF_OK, PERF_E_NO_THREAD (no timer, or its
   thread is gone), PERF_E_INVALID_ARGUMENT. */
int perf__cpu_timers_set_period(pid_t tid, int64_t period_ns);

/* Delete tid's timer (a thread gone, or idle long enough to give its
   place to another), as the end of a profile deletes them all; its
   samples not drained yet are drained as usual. PERF_OK or
   PERF_E_NO_THREAD (no timer). */
int perf__cpu_timers_disarm(pid_t tid);

/* What the handlers cost the sampled threads while measured (below):
   the timer signals handled and the CPU time spent inside the handler
   (each thread's CPU clock, read at its entry and exit: two system calls;
   the kernel's delivery of the signal is not in it). Any thread. */
void perf__cpu_timers_cost(uint64_t *signals, uint64_t *handler_ns);

/* Whether handlers measure their cost (perf__cpu_timers_cost): on only
   while a continuous profile keeps its budget, so that a burst's samples
   without one pay no system call for it. */
void perf__cpu_timers_measure_cost(bool on);

/* Whether tid has a timer in this profile. */
bool perf__cpu_timers_armed(pid_t tid);

/* An armed thread's stack bounds, when not known yet and it is blocked
   now (the sp /proc shows): its first sample once it runs is then taken.
   One read of its /proc syscall file while they are not known. */
void perf__cpu_timers_learn_bounds(pid_t tid);

/* Hand every sample written since the last drain to fn, then free its
   record. A sample whose walk reached rules not compiled yet is not taken:
   those are compiled here (the next samples go through), and a thread whose sp lay
   outside the bounds known has the mapping that holds it looked up.
   Returns the samples not taken since the last drain (a full ring, a
   stack whose bounds or rules were not known yet). */
uint64_t perf__cpu_timers_drain(void (*fn)(void *arg, const perf__cpu_timer_sample_t *s),
                                void *arg);

/* Delete every timer, wait until no handler is inside, take back a signal
   left pending in a thread that blocked it meanwhile, drain what is left
   into fn, and drop the reference on the rules. Returns the samples not
   taken, as perf__cpu_timers_drain. */
uint64_t perf__cpu_timers_end(void (*fn)(void *arg, const perf__cpu_timer_sample_t *s), void *arg);

/* The handler half: a timer signal (si_code SI_TIMER) on the thread it
   was armed for. Async-signal-safe. */
void perf__cpu_timers_on_signal(const siginfo_t *si, void *ucontext);

/* In a forked child (the sampler's atfork handler): the parent's timers
   are not the child's, nor is its profile (the monitor thread that ran it
   is not there), nor the samples its ring held. */
void perf__cpu_timers_atfork_child(void);

#endif
